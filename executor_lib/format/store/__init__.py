"""The doc store: its blocks, skip index and zstd re-writing (``blocks``), and its documents
decoded column-wise into Arrow (``documents``)."""
