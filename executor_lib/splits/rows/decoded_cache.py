"""A process-wide least-recently-used cache bounded by bytes: what the split readers keep decoded or
decompressed between searches (``columnar_copy``'s record batches, ``store_rows``' doc store blocks)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class LeastRecentlyUsed(Generic[V]):
    """Values by key, the least recently used dropped once their sizes pass ``limit`` bytes (the
    newest is always kept). Thread-safe.

    Example: ``cache = LeastRecentlyUsed(1 << 20, len); cache.put(("a", 1), b"x"); cache.get(("a", 1))``.
    """

    def __init__(self, limit: int, size: Callable[[V], int]) -> None:
        self._values: OrderedDict[Hashable, V] = OrderedDict()
        self._bytes = 0
        self._limit = limit
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            value = self._values.get(key)
            if value is not None:
                self._values.move_to_end(key)
            return value

    def put(self, key: Hashable, value: V) -> None:
        with self._lock:
            if key in self._values:
                return
            self._values[key] = value
            self._bytes += self._size(value)
            while self._bytes > self._limit and len(self._values) > 1:
                _, dropped = self._values.popitem(last=False)
                self._bytes -= self._size(dropped)

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
            self._bytes = 0
