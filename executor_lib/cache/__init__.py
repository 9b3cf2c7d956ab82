"""Node-local caches of split data (the NVMe split cache)."""
