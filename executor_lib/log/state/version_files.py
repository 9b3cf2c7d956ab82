"""The log's own files, read: the listing of ``_transaction_log/`` (version files, and the
checkpoints and state directories beside them: ``list_log``), one version file's actions
(``read_version_actions``), and the protocol this code reads and writes, checked on every version
file before anything else in it (``check_readable``, ``check_writable``).

A snapshot (``log.snapshot``) is built from a listing; writers read the version files after the
version they read; ``history``, cleanup and PURGE list the log.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from executor_lib.log.state.in_place import read_settled
from executor_lib.protocol.actions import Action, ProtocolAction, actions_from_ndjson
from executor_lib.protocol.files import (
    LOG_DIR,
    decode_log_bytes,
    parse_checkpoint_file,
    parse_state_dir,
    parse_version_file,
    version_file,
    version_name,
)
from executor_lib.storage.base import ObjectStore
from indextables_contract.errors import UnknownActionError, UnsupportedProtocolError

# What this code can read and write.
READER_VERSION = 4
WRITER_VERSION = 4
SUPPORTED_READER_FEATURES = frozenset(
    {
        "avroState",
        "multiPartCheckpoint",
        "schemaDeduplication",
        "skippedFiles",
        "extendedMetadata",
        "footerOffsets",
    }
)
# Writers may also be asked for "checkpoint" (a writer-only feature of IndexTables4Spark).
SUPPORTED_WRITER_FEATURES = SUPPORTED_READER_FEATURES | {"checkpoint"}


@dataclass
class LogListing:
    """What one listing of ``_transaction_log/`` found (from ``start_after_version`` on)."""

    versions: dict[int, int] = field(default_factory=dict)  # version file -> modified ms
    checkpoints: set[int] = field(default_factory=set)
    states: set[int] = field(default_factory=set)
    complete: bool = True  # False when the listing started after a hint

    @property
    def latest(self) -> int:
        return max([*self.versions, *self.checkpoints, *self.states], default=-1)


def list_log(store: ObjectStore, start_after_version: int | None = None) -> LogListing:
    """List version files, checkpoints and state directories (all of them, or past a version)."""
    listing = LogListing(complete=start_after_version is None)
    if start_after_version is None:
        entries = store.list(f"{LOG_DIR}/", recursive=False)
    else:
        # Two listings (version files and checkpoints; state directories), sent at once: on an
        # object store each is a round trip, and this is what every repeated query pays.
        after = version_name(start_after_version)
        with ThreadPoolExecutor(max_workers=1) as pool:
            states = pool.submit(
                lambda: list(store.list(f"{LOG_DIR}/state-v", start_after=f"{LOG_DIR}/state-v{after}", recursive=False))
            )
            files = list(store.list(f"{LOG_DIR}/0", start_after=f"{LOG_DIR}/{after}", recursive=False))
            entries = _chain(files, states.result())
    for entry in entries:
        name = entry.name
        if entry.is_dir:
            v = parse_state_dir(name)
            if v is not None:
                listing.states.add(v)
            continue
        v = parse_version_file(name)
        if v is not None:
            listing.versions[v] = entry.modified_ms
            continue
        v = parse_checkpoint_file(name)
        if v is not None:
            listing.checkpoints.add(v)
        # anything else (.crc files, checkpoint parts, _last_checkpoint) is not a version marker
    return listing


def _chain(*iterables: Iterable[Any]) -> Iterator[Any]:
    for it in iterables:
        yield from it


def read_version_actions(store: ObjectStore, version: int) -> list[Action]:
    """The actions of one version file. A protocol this code cannot read is reported before
    anything else in the file (a newer protocol may well bring action types unknown here).

    A file that is empty or does not decode (invalid JSON, truncated gzip) may be one another writer is
    still writing in place (``in_place.read_settled``): it is read again after a pause, a few times,
    before the CorruptLogError is raised. An unknown action type is raised at once."""
    key = f"{LOG_DIR}/{version_file(version)}"
    source = version_source(store, version)
    return read_settled(
        functools.partial(store.read, key), functools.partial(_parse_version_file, source=source), source
    )


def version_source(store: ObjectStore, version: int) -> str:
    """The URI of a version file, as errors about its lines name it."""
    return store.uri_of(f"{LOG_DIR}/{version_file(version)}")


def _parse_version_file(data: bytes, source: str) -> list[Action]:
    text = decode_log_bytes(data, source)
    try:
        actions = actions_from_ndjson(text, source)
    except UnknownActionError:
        for action in actions_from_ndjson(text, source, skip_unknown=True):
            if isinstance(action, ProtocolAction):
                check_readable(action, source)
        raise
    for action in actions:
        if isinstance(action, ProtocolAction):
            check_readable(action, source)
    return actions


def _check_protocol(
    where: str, role: str, required: int, supported: int, features: Iterable[str], known: frozenset[str], note: str
) -> None:
    if required > supported:
        raise UnsupportedProtocolError(
            f"{where}: table requires {role} version {required}; this code supports {role} versions up to "
            f"{supported}{note}"
        )
    unknown = set(features) - known
    if unknown:
        raise UnsupportedProtocolError(f"{where}: table requires unsupported {role} features {sorted(unknown)}")


def check_readable(protocol: ProtocolAction | None, where: str) -> None:
    """Raise UnsupportedProtocolError unless this code can read a table with ``protocol``."""
    if protocol is not None:
        features = protocol.reader_features or ()
        _check_protocol(
            where, "reader", protocol.min_reader_version, READER_VERSION, features, SUPPORTED_READER_FEATURES, ""
        )


def check_writable(protocol: ProtocolAction | None, where: str) -> None:
    """Raise UnsupportedProtocolError unless this code can write to a table with ``protocol``."""
    if protocol is not None:
        features = protocol.writer_features or ()
        note = ""
        _check_protocol(
            where, "writer", protocol.min_writer_version, WRITER_VERSION, features, SUPPORTED_WRITER_FEATURES, note
        )


def list_log_versions(store: ObjectStore) -> list[int]:
    """All version-file numbers (a listing of ``_transaction_log/0*`` only)."""
    out = []
    for entry in store.list(f"{LOG_DIR}/0", recursive=False):
        v = parse_version_file(entry.name)
        if v is not None:
            out.append(v)
    return sorted(out)
