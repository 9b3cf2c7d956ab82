"""No Rust panic reaches a user: ``no_panic`` turns tantivy's ``pyo3_runtime.PanicException``
(a ``BaseException``, so ``except Exception`` misses it) into ``IndexEngineError`` naming what was
being done. Every entry point of this package that calls tantivy runs under it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from indextables_contract.errors import IndexEngineError

_F = TypeVar("_F", bound=Callable[..., Any])


def is_panic(e: BaseException) -> bool:
    """A pyo3 panic (its class lives in the ``pyo3_runtime`` module tantivy creates at import)."""
    return type(e).__name__ == "PanicException"


@contextmanager
def no_panic(what: str) -> Iterator[None]:
    """Run the block; a Rust panic inside it becomes IndexEngineError("<what>: ...")."""
    try:
        yield
    except BaseException as e:
        if not is_panic(e):
            raise
        raise IndexEngineError(f"{what}: Tantivy failed ({str(e).strip() or 'a Rust panic'})") from e


def guarded(what: str | Callable[..., str]) -> Callable[[_F], _F]:
    """Decorator form of ``no_panic``; ``what`` is a text or a function of the call's arguments
    (e.g. ``lambda self, *a, **k: f"search of split {self.split}"``)."""

    def wrap(fn: _F) -> _F:
        @functools.wraps(fn)
        def inner(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except BaseException as e:
                if not is_panic(e):
                    raise
                text = what if isinstance(what, str) else what(*args, **kwargs)
                raise IndexEngineError(f"{text}: Tantivy failed ({str(e).strip() or 'a Rust panic'})") from e

        return inner  # type: ignore[return-value]

    return wrap
