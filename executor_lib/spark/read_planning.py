"""How a read's splits become Spark tasks (driver side): ``SplitRef`` (what a task needs of a split),
refs of every live split from the state's columns (``split_refs``), and their grouping into tasks
(``plan_tasks``: one balanced wave for light reads, byte-sized runs for scans)."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from executor_lib.protocol.actions import AddAction

if TYPE_CHECKING:
    from executor_lib.log.snapshot import Snapshot


@dataclass(frozen=True)
class SplitRef:
    path: str
    partition_values: dict[str, str | None]
    doc_mapping: str | None
    size: int
    footer_start: int | None = None  # the add's footerStartOffset: a cold split's footer in one ranged read


# What opening a split costs, in bytes read (as Spark's ``spark.sql.files.openCostInBytes``).
OPEN_COST_BYTES = 4 << 20


def split_refs(snapshot: Snapshot) -> list[SplitRef]:
    """A ``SplitRef`` of every live split, read from the state's columns (no ``AddAction`` per file;
    equal partition values and doc mappings shared between the refs)."""
    import pyarrow.compute as pc

    columns = ["path", "size", "partition_values", "footer_start_offset", "doc_mapping_json", "doc_mapping_ref"]
    table = snapshot.file_columns(columns)
    mappings = pc.dictionary_encode(snapshot.doc_mapping_column(table).combine_chunks())
    texts, codes = mappings.dictionary.to_pylist(), mappings.indices.to_pylist()
    values = shared_partition_values(table.column("partition_values"), snapshot.partition_columns)
    return [
        SplitRef(path, value, None if code is None else texts[code], size, footer)
        for path, value, code, size, footer in zip(
            table.column("path").to_pylist(),
            values,
            codes,
            table.column("size").to_pylist(),
            table.column("footer_start_offset").to_pylist(),
            strict=True,
        )
    ]


def shared_partition_values(column: Any, partition_columns: Sequence[str]) -> list[dict[str, str | None]]:
    """Each row's partition values (column -> value; a null one left out, as the log reads it) of a
    ``partition_values`` column, one dict per distinct combination shared by its rows (a million rows
    of a thousand partitions: a thousand dicts)."""
    from executor_lib.log.files.live_files import partition_strings
    from executor_lib.log.files.partition_index import combinations

    strings = partition_strings(column, partition_columns)
    combos, inverse = combinations(list(strings.values()), len(column))
    dicts = [{c: v for c, v in zip(partition_columns, combo, strict=True) if v is not None} for combo in combos]
    return [dicts[i] for i in inverse.tolist()]


Planned = TypeVar("Planned", AddAction, SplitRef)


def plan_tasks(
    files: Sequence[Planned],
    partition_bytes: int,
    splits_per_partition: int,
    parallelism: int | None = None,
    light: bool = False,
) -> list[list[Planned]]:
    """The splits each read task takes (every group at most ``splits_per_partition`` splits).

    A Spark task of a Python data source costs tens of milliseconds before it reads anything, while
    an index query, a LIMIT or a per-split aggregate reads a small part of each split. So:

    * ``light`` reads with a known ``parallelism`` (the cluster's task slots) run as one wave: that
      many groups (fewer if there are fewer splits), balanced by size;
    * scans cut the splits, in (partition values, path) order, into groups of about
      ``partition_bytes`` — less where the table is small, so that every slot gets work (Spark's
      rule for files: at most the table's bytes over ``parallelism``, at least one split's open cost).

    Example: 32 splits of 56 MB, parallelism 2: an index query runs 2 tasks of 16 splits, a scan 7
    tasks of about 256 MB.
    """
    ordered = sorted(files, key=scan_order())
    if not ordered:
        return []
    if light and parallelism:
        groups = max(min(parallelism, len(ordered)), -(-len(ordered) // splits_per_partition))
        return _balanced(ordered, groups, splits_per_partition)
    target = partition_bytes
    if parallelism:
        total = sum(a.size + OPEN_COST_BYTES for a in ordered)
        target = min(partition_bytes, max(OPEN_COST_BYTES, total // parallelism))
    return _consecutive(ordered, target, splits_per_partition)


def scan_order() -> Callable[[Any], tuple[list[tuple[str, str | None]], str]]:
    """The order of a scan's splits: partition values (sorted items), then path; each partition
    values mapping's items sorted once (refs share them, ``split_refs``)."""
    items: dict[int, list[tuple[str, str | None]]] = {}

    def key(a: Any) -> tuple[list[tuple[str, str | None]], str]:
        values = a.partition_values
        found = items.get(id(values))
        if found is None:
            found = items[id(values)] = sorted(values.items(), key=str)
        return found, a.path

    return key


def _consecutive(files: Sequence[Planned], target_bytes: int, most: int) -> list[list[Planned]]:
    groups: list[list[Planned]] = []
    current: list[Planned] = []
    current_bytes = 0
    for add in files:
        current.append(add)
        current_bytes += add.size + OPEN_COST_BYTES
        if current_bytes >= target_bytes or len(current) >= most:
            groups.append(current)
            current, current_bytes = [], 0
    if current:
        groups.append(current)
    return groups


def _balanced(files: Sequence[Planned], count: int, most: int) -> list[list[Planned]]:
    """``files`` in ``count`` groups of about equal bytes (largest first, each to the lightest group
    with room), each kept in ``files``' order."""
    position = {id(a): i for i, a in enumerate(files)}
    groups: list[list[Planned]] = [[] for _ in range(count)]
    lightest = [(0, 0, g) for g in range(count)]  # a heap of (bytes, splits, group) of the groups with room
    for add in sorted(files, key=lambda a: -a.size):
        load, taken, g = heapq.heappop(lightest)
        groups[g].append(add)
        if taken + 1 < most:
            heapq.heappush(lightest, (load + add.size + OPEN_COST_BYTES, taken + 1, g))
    return [sorted(g, key=lambda a: position[id(a)]) for g in groups if g]
