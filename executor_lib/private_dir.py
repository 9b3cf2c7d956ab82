"""Local directories this project trusts with data other processes of the node read back: the split
cache and the manifest cache. Such a directory is created 0700 and trusted only while it belongs to
the current user and no one else can write to it — in a shared ``/tmp``, another user could create
the default directory first and plant a split or a manifest in it, which queries would then answer from."""

from __future__ import annotations

import os
from pathlib import Path


def untrusted_reason(directory: Path, private_reads: bool = False) -> str | None:
    """Create ``directory`` (mode 0700) if missing; None if it can be trusted, else why not (owned by
    another user; writable by group or others; with ``private_reads``, readable by them too).
    OSError if it cannot be created or examined.

    Example: ``untrusted_reason(Path("/tmp/indextables-split-cache-1000"))`` is None for a fresh one.
    """
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = directory.stat()
    if st.st_uid != os.getuid():
        return f"owned by user id {st.st_uid}, not by the current user ({os.getuid()})"
    open_bits = 0o077 if private_reads else 0o022
    if st.st_mode & open_bits:
        return f"open to other users (mode {oct(st.st_mode & 0o777)})"
    return None
