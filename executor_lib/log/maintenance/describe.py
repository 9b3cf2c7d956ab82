"""What ``describe`` shows of a snapshot: version, protocol, schema, files, and how the state is stored.

One JSON document, shared by ``indextables describe --json`` and the Spark ``describe_state`` command.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from executor_lib.log.snapshot import Snapshot


def describe_json(snapshot: Snapshot, files: bool = True) -> dict[str, Any]:
    """The ``indextables describe --json`` document of a snapshot (also the rows of ``DESCRIBE INDEXTABLES STATE``,
    which leaves out the ``files`` list: ``files=False`` builds no object per file)."""
    doc = _summary(snapshot)
    if files:
        columns = snapshot.file_columns(["path", "size", "num_records", "partition_values", "modification_time"])
        doc["files"] = [
            {
                "path": f["path"],
                "size": f["size"],
                "numRecords": f["num_records"],
                "partitionValues": dict(f["partition_values"] or ()),
                "modificationTime": f["modification_time"],
            }
            for f in columns.sort_by("path").to_pylist()
        ]
    return doc


def _summary(snapshot: Snapshot) -> dict[str, Any]:
    meta = snapshot.metadata
    protocol = snapshot.protocol
    return {
        "table": snapshot.table_uri,
        "version": snapshot.version,
        "builtFrom": snapshot.base,
        "tableId": meta.id,
        "name": meta.name,
        "partitionColumns": list(meta.partition_columns),
        "schema": json.loads(meta.schema_string),
        "protocol": {
            "minReaderVersion": protocol.min_reader_version if protocol else None,
            "minWriterVersion": protocol.min_writer_version if protocol else None,
            "readerFeatures": sorted(protocol.reader_features or ()) if protocol else None,
            "writerFeatures": sorted(protocol.writer_features or ()) if protocol else None,
        },
        "numFiles": snapshot.num_files,
        "numRecords": snapshot.num_records,
        "sizeInBytes": snapshot.size_in_bytes,
        "numDocMappings": len(snapshot.schema_registry),
        **_state_json(snapshot),
    }


def _state_json(snapshot: Snapshot) -> dict[str, Any]:
    """How the snapshot's state is stored: Avro state, JSON checkpoint or log replay only."""
    manifest = snapshot.state_manifest
    if manifest is not None:
        return {
            "stateFormat": "avro-state",
            "stateDir": manifest.source.rsplit("/", 2)[-2],
            "stateVersion": manifest.state_version,
            "numManifests": len(manifest.manifests),
            "numTombstones": len(manifest.tombstones),
        }
    fmt = "json-checkpoint" if snapshot.base.startswith("checkpoint") else "log"
    return {"stateFormat": fmt, "stateDir": None, "stateVersion": None, "numManifests": 0, "numTombstones": 0}
