"""The warnings of a write, shown on the client (issue 75): a column indexed with a tokenizer IndexTables4Spark
does not know (``de_stem``, ``fr_stem`` ...: the JVM knows only ``default``, ``raw``, ``whitespace`` and
``en_stem``) cannot be searched correctly by the JVM. One ``CompatibilityWarning`` per such column, at the
write (``connect_plugin.write``, ``write_stream``, ``df.write.format("indextables")...save()``), from the
options alone (``indextables_contract.settings.jvm_tokenizer_warnings``): nothing is asked of the cluster.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from indextables_contract.errors import CompatibilityWarning
from indextables_contract.settings import jvm_tokenizer_warnings

_warned: ContextVar[bool] = ContextVar("indextables_write_warned", default=False)


def warn_for_write(options: Mapping[str, Any], stacklevel: int = 3) -> None:
    """Warn once per column of ``options`` whose tokenizer IndexTables4Spark does not know (not again inside
    ``warned()``: ``connect_plugin.write``'s own ``save``)."""
    if _warned.get():
        return
    for text in jvm_tokenizer_warnings(options):
        warnings.warn(CompatibilityWarning(text), stacklevel=stacklevel)


@contextmanager
def warned() -> Iterator[None]:
    """The write's warnings are said: the ``save`` it runs says none again."""
    token = _warned.set(True)
    try:
        yield
    finally:
        _warned.reset(token)
