"""The process's Arrow memory pool: the C library's allocator rather than Arrow's default (mimalloc).

A snapshot's file columns are long-lived and large (about 70 bytes a live file), and what decoding
them used is freed around them. mimalloc keeps most of that freed memory resident in segments that
still hold live columns; the C library's allocator maps large blocks on their own and gives them
back. Measured on a 10M-file state loaded without a manifest disk cache (``bench.state_benchmark``,
its statistics handed to the disk copies): 1,488 MB resident with mimalloc, 828 MB with the system
pool, for 706 MB of columns; search and split writes measured no slower (A/B in one window).

``use_system_pool`` is called when the log's file columns are first imported. A process that set
``ARROW_DEFAULT_MEMORY_POOL`` keeps the pool it chose.

Example: ``use_system_pool(); pa.default_memory_pool().backend_name`` -> ``'system'``
"""

from __future__ import annotations

import contextlib
import ctypes
import os

import pyarrow as pa

POOL_VARIABLE = "ARROW_DEFAULT_MEMORY_POOL"


def use_system_pool() -> None:
    """Make the C library's allocator Arrow's default pool for this process, unless the process
    chose one itself (``ARROW_DEFAULT_MEMORY_POOL``). Buffers allocated before keep their pool."""
    if os.environ.get(POOL_VARIABLE, "").strip():
        return
    if pa.default_memory_pool().backend_name != "system":
        pa.set_memory_pool(pa.system_memory_pool())


def give_back_unused() -> None:
    """Return to the system the memory Arrow's pool and the C library's arenas keep after a large
    decode freed it (their own caches of freed blocks: a cold 10M-file load's statistics and scratch)."""
    pa.default_memory_pool().release_unused()
    with contextlib.suppress(OSError, AttributeError):  # glibc only
        ctypes.CDLL("libc.so.6").malloc_trim(0)
