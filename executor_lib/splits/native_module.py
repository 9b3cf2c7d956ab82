"""The native engine (``native/``, the ``indextables_native`` extension), imported once for every
part of ``splits`` that uses it (search: ``search.native``; writes: ``write.writer``), with one
error when it is not installed.
"""

from __future__ import annotations

from typing import Any

from indextables_contract.errors import IndexEngineError

INSTALL_HINT = "build it with the README's set-up (source scripts/_venv.sh 'test,dev'), or pip install ./native"


def native_module() -> Any:
    """The ``indextables_native`` module; IndexEngineError saying how to build it when it is missing.

    Example: ``native_module().Split.open("t/part-0.split")``.
    """
    try:
        import indextables_native
    except ImportError as e:
        raise IndexEngineError(f"the native engine (indextables_native) is not installed: {INSTALL_HINT} ({e})") from e
    return indextables_native
