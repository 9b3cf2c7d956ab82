"""An independent reader and committer of a table as IndexTables4Spark 0.5.x does it, for tests.

Nothing here uses this project's log code: only its storage layer to fetch bytes, and fastavro.

* ``jvm_read``: the newest ``state-v<N>/_manifest.avro`` decoded with the StateManifest and
  FileEntry writer schemas taken from the 0.5.4 files themselves (as reader schemas, so Avro's
  resolution by field name applies, as in Java Avro and tantivy4java), tombstones applied, then
  the version files after it replayed. A version-file line whose action key the JVM does not know
  is an error, as in IndexTables4Spark's stricter parsers ("Unknown action type in line").
* ``Jvm05Committer``: commits the way 0.5.x does — version N is the put-if-absent of
  ``state-v<N>/_manifest.avro`` (no version file), N one past the newest state it sees — for
  tests that race it against this project's writer.
* ``Jvm053Log``: 0.5.3 in version-file mode: appends by version file, and its CHECKPOINT, which
  writes its state past the log when a state of the newest version exists already.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fastavro
import pytest

from executor_lib.storage import open_store
from executor_lib.storage.base import ObjectStore
from indextables_contract.errors import ObjectAlreadyExistsError, ObjectNotFoundError

COMPAT_ROOT = Path(__file__).resolve().parent.parent.parent / "shared" / "compat" / "indextables_spark_v0.5.4"
LOG = "_transaction_log"
KNOWN_ACTIONS = frozenset({"protocol", "metaData", "add", "remove", "mergeskip"})
_STATE = re.compile(r"^_transaction_log/state-v(\d{20})/_manifest\.avro$")
_VERSION = re.compile(r"^_transaction_log/(\d{20})\.json$")


def _writer_schema(pattern: str) -> dict[str, Any]:
    if not COMPAT_ROOT.is_dir():
        pytest.skip(
            f"needs IndexTables4Spark 0.5.4's fixture tables at {COMPAT_ROOT} (../shared is not beside the checkout)"
        )
    found = sorted(COMPAT_ROOT.glob(f"*/{LOG}/{pattern}"))
    assert found, f"no IndexTables4Spark file {pattern} under {COMPAT_ROOT} (shared/ must sit beside the checkout)"
    with open(found[0], "rb") as f:
        return dict(fastavro.reader(f).writer_schema)  # type: ignore[arg-type]


def jvm_state_schema() -> dict[str, Any]:
    return _writer_schema("state-v*/_manifest.avro")


def jvm_file_entry_schema() -> dict[str, Any]:
    return _writer_schema("manifests/*.avro")


class UnknownJvmAction(Exception):
    """A version-file line a JVM reader would reject."""


@dataclass
class JvmView:
    version: int
    files: dict[str, dict[str, Any]] = field(default_factory=dict)  # path -> FileEntry / add
    state_version: int | None = None


def _decode_version_file(data: bytes) -> str:
    if data[:2] == b"\x01\x01":
        return gzip.decompress(data[2:]).decode()
    if data[:2] == b"\x1f\x8b":
        return gzip.decompress(data).decode()
    return data.decode()


def _read_state(store: ObjectStore, version: int) -> dict[str, Any]:
    data = store.read(f"{LOG}/state-v{version:020d}/_manifest.avro")
    (record,) = list(fastavro.reader(io.BytesIO(data), reader_schema=jvm_state_schema()))
    return record  # type: ignore[no-any-return]


def _manifest_key(path: str, state_version: int) -> str:
    if path.startswith(("manifests/", "state-v")):
        return f"{LOG}/{path}"
    return f"{LOG}/state-v{state_version:020d}/{path}"


def _state_files(store: ObjectStore, state: dict[str, Any]) -> dict[str, dict[str, Any]]:
    files: dict[str, dict[str, Any]] = {}
    tombstones = set(state["tombstones"])
    for info in state["manifests"]:
        data = store.read(_manifest_key(info["path"], state["stateVersion"]))
        for entry in fastavro.reader(io.BytesIO(data), reader_schema=jvm_file_entry_schema()):
            assert isinstance(entry, dict)
            if entry["path"] not in tombstones:
                files[entry["path"]] = entry
    return files


def jvm_read(uri: str, **options: Any) -> JvmView:
    """The table's latest version and live files as a 0.5.x reader sees them."""
    store = open_store(uri, **options)
    keys = [o.key for o in store.list(f"{LOG}/")]
    states = sorted(int(m.group(1)) for k in keys if (m := _STATE.match(k)))
    versions = sorted(int(m.group(1)) for k in keys if (m := _VERSION.match(k)))
    view = JvmView(version=-1)
    if states:
        state = _read_state(store, states[-1])
        view = JvmView(states[-1], _state_files(store, state), states[-1])
    for v in (v for v in versions if v > view.version):
        if v != view.version + 1:
            raise AssertionError(f"{uri}: version {view.version + 1} missing before version file {v}")
        for line in _decode_version_file(store.read(f"{LOG}/{v:020d}.json")).splitlines():
            if not line.strip():
                continue
            obj = json.loads(line)
            (key,) = obj.keys()
            if key not in KNOWN_ACTIONS:
                raise UnknownJvmAction(f"{uri}: version {v}: unknown action type in line: {line[:80]}")
            if key == "add":
                view.files[obj["add"]["path"]] = obj["add"]
            elif key == "remove":
                view.files.pop(obj["remove"]["path"], None)
        view.version = v
    return view


def _newest_state(store: ObjectStore) -> int | None:
    keys = [o.key for o in store.list(f"{LOG}/state-v")]
    states = sorted(int(m.group(1)) for k in keys if (m := _STATE.match(k)))
    return states[-1] if states else None


@dataclass
class Jvm05Committer:
    """Appends files the way IndexTables4Spark 0.5.x commits: state manifest put-if-absent only."""

    uri: str
    options: dict[str, Any]
    lost_races: int = 0

    def commit(self, paths: list[str], records: int = 5) -> int:
        store = open_store(self.uri, **self.options)
        while True:
            base_version = _newest_state(store)
            if base_version is None:
                base: dict[str, Any] = {"manifests": [], "tombstones": [], "schemaRegistry": {}, "numFiles": 0}
                base_version, base["totalBytes"] = 0, 0
            else:
                base = _read_state(store, base_version)
            version = base_version + 1
            now = int(time.time() * 1000)
            entries = [_file_entry(p, records, version, now) for p in paths]
            buf = io.BytesIO()
            fastavro.writer(buf, fastavro.parse_schema(jvm_file_entry_schema()), entries, codec="zstandard")
            manifest = f"manifests/manifest-{uuid.uuid4().hex[:8]}.avro"
            store.put(f"{LOG}/{manifest}", buf.getvalue())
            info = {
                "path": manifest,
                "numEntries": len(entries),
                "minAddedAtVersion": version,
                "maxAddedAtVersion": version,
                "partitionBounds": None,
                "tombstoneCount": 0,
                "liveEntryCount": -1,
            }
            state = {
                "formatVersion": 1,
                "stateVersion": version,
                "createdAt": now,
                "numFiles": base["numFiles"] + len(entries),
                "totalBytes": base["totalBytes"] + 100 * len(entries),
                "manifests": [*base["manifests"], info],
                "tombstones": base["tombstones"],
                "schemaRegistry": base["schemaRegistry"],
                "protocolVersion": 4,
                "metadata": None,
            }
            buf = io.BytesIO()
            fastavro.writer(buf, fastavro.parse_schema(jvm_state_schema()), [state], codec="zstandard")
            try:
                store.put_if_absent(f"{LOG}/state-v{version:020d}/_manifest.avro", buf.getvalue())
                return version
            except ObjectAlreadyExistsError:
                self.lost_races += 1
            except ObjectNotFoundError:  # pragma: no cover - a state listed, then gone
                self.lost_races += 1


@dataclass
class Jvm053Log:
    """IndexTables4Spark 0.5.3's log in version-file mode (``transaction/TransactionLog.scala``), as far
    as these tests need it. ``append`` commits by a version file, one past the newest version file
    (it looks at version files only). ``checkpoint`` is its CHECKPOINT: the live files as ``jvm_read``
    sees them, written as a compacted state at the newest version file's number, every entry added
    at that number; if a state of that number exists, at the next number without a state manifest,
    as ``StateWriter.writeStateWithRetry`` / ``findNextAvailableVersion`` do."""

    uri: str
    options: dict[str, Any]

    def append(self, path: str, records: int = 5) -> int:
        store = open_store(self.uri, **self.options)
        add = {"add": {"path": path, "partitionValues": {}, "size": 100, "modificationTime": 0, "dataChange": True,
                       "numRecords": records}}  # fmt: skip
        while True:
            version = _newest_version_file(store) + 1
            try:
                store.put_if_absent(f"{LOG}/{version:020d}.json", (json.dumps(add) + "\n").encode())
                return version
            except ObjectAlreadyExistsError:
                continue

    def checkpoint(self, missing: tuple[str, ...] = ()) -> int:
        """``missing``: files its listing lost (0.5.3's ``listFiles`` reads ``_last_checkpoint`` twice, for
        the state and for the version to replay from, and misses what landed between the two reads)."""
        store = open_store(self.uri, **self.options)
        current = _newest_version_file(store)
        files = {p: f for p, f in jvm_read(self.uri, **self.options).files.items() if p not in missing}
        version = current
        while store.exists(f"{LOG}/state-v{version:020d}/_manifest.avro"):
            version += 1
        now = int(time.time() * 1000)
        entries = [_file_entry(p, int(f.get("numRecords") or 0), current, now) for p, f in sorted(files.items())]
        manifest = f"manifests/manifest-{uuid.uuid4().hex[:8]}.avro"
        buf = io.BytesIO()
        fastavro.writer(buf, fastavro.parse_schema(jvm_file_entry_schema()), entries, codec="zstandard")
        store.put(f"{LOG}/{manifest}", buf.getvalue())
        info = {"path": manifest, "numEntries": len(entries), "minAddedAtVersion": current,
                "maxAddedAtVersion": current, "partitionBounds": None, "tombstoneCount": 0,
                "liveEntryCount": -1}  # fmt: skip
        state = {"formatVersion": 1, "stateVersion": version, "createdAt": now, "numFiles": len(entries),
                 "totalBytes": 100 * len(entries), "manifests": [info], "tombstones": [], "schemaRegistry": {},
                 "protocolVersion": 4, "metadata": None}  # fmt: skip
        buf = io.BytesIO()
        fastavro.writer(buf, fastavro.parse_schema(jvm_state_schema()), [state], codec="zstandard")
        store.put_if_absent(f"{LOG}/state-v{version:020d}/_manifest.avro", buf.getvalue())
        return version


def _newest_version_file(store: ObjectStore) -> int:
    return max(int(m.group(1)) for o in store.list(f"{LOG}/0", recursive=False) if (m := _VERSION.match(o.key)))


def _file_entry(path: str, records: int, version: int, now: int) -> dict[str, Any]:
    return {
        "path": path,
        "partitionValues": {},
        "size": 100,
        "modificationTime": now,
        "dataChange": True,
        "stats": None,
        "minValues": None,
        "maxValues": None,
        "numRecords": records,
        "footerStartOffset": None,
        "footerEndOffset": None,
        "hasFooterOffsets": False,
        "splitTags": None,
        "numMergeOps": None,
        "docMappingRef": None,
        "uncompressedSizeBytes": None,
        "addedAtVersion": version,
        "addedAtTimestamp": now,
        "companionSourceFiles": None,
        "companionDeltaVersion": None,
        "companionFastFieldMode": None,
    }
