"""Schema deduplication hashes, checked against the hashes IndexTables4Spark wrote."""

from __future__ import annotations

import json
from pathlib import Path

from executor_lib.log.state.avro_state import read_state_manifest
from executor_lib.protocol.files import parse_state_dir
from executor_lib.protocol.schema_registry import (
    configuration_with_registry,
    doc_mapping_hash,
    registry_from_configuration,
    renormalize,
    without_registry,
)
from executor_lib.storage import open_store

MAPPING = (
    '[{"fast":true,"indexed":true,"name":"id","stored":true,"type":"i64"},'
    '{"fast":true,"indexed":true,"name":"text","stored":true,"tokenizer":"raw","type":"text"}]'
)


def test_hash_matches_every_registry_entry_written_by_the_jvm(compat_root: Path) -> None:
    checked = 0
    for table in sorted(compat_root.iterdir()):
        store = open_store(str(table))
        for state in (table / "_transaction_log").glob("state-v*"):
            version = parse_state_dir(state.name)
            assert version is not None
            manifest = read_state_manifest(store, version)
            assert manifest is not None
            for ref, schema in manifest.schema_registry.items():
                assert doc_mapping_hash(schema) == ref, f"{state}: {ref}"
                checked += 1
    assert checked >= 13


def test_hash_ignores_key_and_field_order() -> None:
    fields = json.loads(MAPPING)
    shuffled = json.dumps([dict(reversed(list(f.items()))) for f in reversed(fields)], indent=2)
    assert doc_mapping_hash(shuffled) == doc_mapping_hash(MAPPING) == "gC45RGOqJ_Grt0xH"
    assert doc_mapping_hash(MAPPING.replace("i64", "u64")) != doc_mapping_hash(MAPPING)


def test_registry_round_trip_and_renormalize() -> None:
    config = configuration_with_registry({"owner": "me"}, {"abc": MAPPING})
    assert config == {"owner": "me", "docMappingSchema.abc": MAPPING}
    assert registry_from_configuration(config) == {"abc": MAPPING}
    assert without_registry(config) == {"owner": "me"}
    registry, remap = renormalize({"raw-1": MAPPING, "raw-2": json.dumps(json.loads(MAPPING), indent=1)}, ["raw-1"])
    assert registry == {"gC45RGOqJ_Grt0xH": MAPPING}
    assert remap == {"raw-1": "gC45RGOqJ_Grt0xH", "raw-2": "gC45RGOqJ_Grt0xH"}
