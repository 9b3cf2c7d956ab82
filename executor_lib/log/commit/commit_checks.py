"""What a commit is checked against before anything is written: its actions alone (one protocol and
metadata at most, no file added twice or both added and removed, paths inside the table, no
negative sizes; ``validate_static``) and against the table at the version it read (partition
columns, each split's schema, one file under two spellings, removes of live files only;
``validate_against_table``). Both raise ``InvalidActionError`` naming the action.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable

from executor_lib.log.commit.split_schema import check_split_schema
from executor_lib.log.files.live_files import LiveFiles
from executor_lib.protocol.actions import (
    Action,
    AddAction,
    CommitInfoAction,
    MetadataAction,
    ProtocolAction,
    RemoveAction,
    SkipAction,
)
from executor_lib.protocol.schema_registry import registry_from_configuration
from executor_lib.storage.base import check_path_spelling, table_key
from indextables_contract.errors import InvalidActionError, InvalidPathError

ACTION_CLASSES = (ProtocolAction, MetadataAction, AddAction, RemoveAction, SkipAction)


def validate_static(actions: list[Action], root_uri: str) -> None:
    """Checks that need no table state but its root; raise InvalidActionError before anything is written.

    A path and the full URI of the same file (inside the table root) are one file (``table_key``)."""
    if not actions:
        raise InvalidActionError("a commit needs at least one action")
    seen_add: set[str] = set()
    seen_remove: set[str] = set()
    counts = {"protocol": 0, "metaData": 0}
    for a in actions:
        if isinstance(a, CommitInfoAction):
            raise InvalidActionError("commitInfo is written by the log itself; do not pass one")
        if not isinstance(a, ACTION_CLASSES):
            raise InvalidActionError(f"not a transaction-log action: {type(a).__name__}")
        if a.ACTION_KEY in counts:
            counts[a.ACTION_KEY] += 1
        key = check_path(a.path, root_uri) if isinstance(a, (AddAction, RemoveAction, SkipAction)) else ""
        if isinstance(a, AddAction):
            if key in seen_add:
                raise InvalidActionError(f"file {a.path!r} is added twice in one commit")
            if a.size < 0 or (a.num_records is not None and a.num_records < 0):
                raise InvalidActionError(f"add {a.path!r}: size and numRecords must not be negative")
            bad = [k for k, v in a.partition_values.items() if "\x00" in k or (v is not None and "\x00" in v)]
            if bad:
                raise InvalidActionError(f"add {a.path!r}: partition value of {bad[0]!r} holds a NUL byte")
            seen_add.add(key)
        elif isinstance(a, RemoveAction):
            seen_remove.add(key)
    both = seen_add & seen_remove
    if both:
        raise InvalidActionError(f"file {sorted(both)[0]!r} is both added and removed in one commit")
    for key, n in counts.items():
        if n > 1:
            raise InvalidActionError(f"a commit may hold at most one {key} action, got {n}")


def check_path(path: str, root_uri: str) -> str:
    """The storage key of an action's path (PROTOCOL.md §1); InvalidActionError for a malformed path or a
    full URI outside the table root (nothing outside the table is ever read or deleted through it)."""
    try:
        check_path_spelling(path)
        return table_key(root_uri, path)
    except InvalidPathError as e:
        raise InvalidActionError(f"{root_uri}: {e}") from e


def validate_against_table(
    actions: list[Action],
    metadata: MetadataAction | None,
    uri: str,
    read_version: int,
    live_files: Callable[[], Iterable[str]],
    new_files: bool = False,
) -> None:
    """Checks against the table at ``read_version`` (its metadata, and, only when an action needs them,
    its live files: ``live_files()``); raise InvalidActionError before anything is written.

    An add of a file already live is refused (its rows would be read twice), unless ``new_files``:
    the caller uploaded every added file itself under a new name, so none can be live and the live
    files are not looked up for it."""
    new_meta = next((a for a in actions if isinstance(a, MetadataAction)), None)
    effective = new_meta or metadata
    partition_columns = set(effective.partition_columns) if effective else set()
    registry = registry_from_configuration(effective.configuration) if effective else {}
    fitting: set[str] = set()  # doc mappings checked already: the adds of one write share one
    for a in actions:
        if not isinstance(a, AddAction):
            continue
        if set(a.partition_values) != partition_columns:
            raise InvalidActionError(
                f"add {a.path!r}: partition values {sorted(a.partition_values)} do not match the table's "
                f"partition columns {sorted(partition_columns)}"
            )
        mapping = a.doc_mapping_json or (registry.get(a.doc_mapping_ref) if a.doc_mapping_ref else None)
        # A companion split (its rows are in the source's files) indexes only the columns BUILD chose.
        if effective is None or mapping is None or a.companion_source_files is not None:
            continue
        if mapping not in fitting:
            check_split_schema(a.path, mapping, effective.schema_string, effective.partition_columns, uri)
            fitting.add(mapping)
    spelled_as_uri = [a for a in actions if isinstance(a, AddAction) and "://" in a.path]
    if spelled_as_uri:  # rare: only then is the table's live list read for this check
        live_keys = {table_key(uri, p): p for p in live_files()}
        for a in spelled_as_uri:
            existing = live_keys.get(table_key(uri, a.path))
            if existing is not None and existing != a.path:
                raise InvalidActionError(
                    f"add {a.path!r}: the file is already live as {existing!r} (one file, two spellings: its "
                    "rows would be read twice)"
                )
    added = [a.path for a in actions if isinstance(a, AddAction) and "://" not in a.path]
    if added and not new_files:
        absent = set(_missing(added, live_files()))
        live = [p for p in added if p not in absent]
        if live:
            raise InvalidActionError(
                f"add {live[0]!r}: the file is already live at read version {read_version} (adding it again "
                "would read its rows twice; a retried commit that had landed needs no second commit)"
                + (f" (and {len(live) - 1} more)" if len(live) > 1 else "")
            )
    removed = [a.path for a in actions if isinstance(a, RemoveAction)]
    if removed:
        gone = _missing(removed, live_files())
        if gone:
            raise InvalidActionError(
                f"remove of {gone[0]!r}: the file is not live at read version {read_version}"
                + (f" (and {len(gone) - 1} more)" if len(gone) > 1 else "")
            )


def _missing(paths: list[str], files: Iterable[str]) -> list[str]:
    """Those of ``paths`` that are not live ``files``: on an Avro state's columns matched column-wise
    (O(paths) objects, no index of every path), on a mapping by lookup."""
    if isinstance(files, LiveFiles):
        return files.missing(paths)
    live = files if isinstance(files, Container) else set(files)
    return [p for p in paths if p not in live]
