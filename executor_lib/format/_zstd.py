"""The one zstd module every format reader uses: the standard library's ``compression.zstd``
(Python >= 3.14), else its backport ``backports.zstd`` (the same API, a dependency of the project
on older Pythons). Its ``decompress`` checks a frame's content checksum when the frame has one.

Example:
    >>> from executor_lib.format._zstd import zstd
    >>> zstd.decompress(zstd.compress(b"abc"))
    b'abc'
"""

from __future__ import annotations

try:
    from compression import zstd  # type: ignore[import-not-found,unused-ignore]  # Python >= 3.14
except ImportError:  # pragma: no cover - depends on the Python version
    from backports import zstd  # type: ignore[import-not-found,no-redef,unused-ignore]

__all__ = ["zstd"]
