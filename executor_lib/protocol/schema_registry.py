"""Schema deduplication (protocol V3+): doc-mapping hashes and the registry. Standard library only.

A doc mapping (the Tantivy field list of a split, JSON) is stored once in the table
metadata's configuration under ``docMappingSchema.<hash>`` and referenced from each add
action's ``docMappingRef``. The hash is SHA-256 over a canonical JSON form (object keys
sorted, arrays of named objects sorted by ``name``, compact separators), URL-safe base64
without padding, first 16 characters — the same recipe as IndexTables4Spark.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from executor_lib.protocol.actions import Action, AddAction, MetadataAction, ProtocolAction

REGISTRY_PREFIX = "docMappingSchema."
HASH_LENGTH = 16


def _canonical(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _canonical(node[k]) for k in sorted(node)}
    if isinstance(node, list):
        items = [_canonical(x) for x in node]
        if items and all(isinstance(x, dict) and "name" in x for x in items):
            items.sort(key=lambda x: x["name"] if isinstance(x["name"], str) else json.dumps(x["name"]))
        return items
    return node


def canonical_json(doc_mapping_json: str) -> str:
    """Canonical form used for hashing; a string that is not JSON is returned unchanged."""
    try:
        parsed = json.loads(doc_mapping_json)
    except (json.JSONDecodeError, TypeError):
        return doc_mapping_json
    return json.dumps(_canonical(parsed), separators=(",", ":"), ensure_ascii=False)


def doc_mapping_hash(doc_mapping_json: str) -> str:
    """The 16-character reference of a doc mapping."""
    digest = hashlib.sha256(canonical_json(doc_mapping_json).encode("utf-8")).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")[:HASH_LENGTH]


def registry_from_configuration(configuration: Mapping[str, str]) -> dict[str, str]:
    """``{hash: doc mapping JSON}`` from metadata configuration (``docMappingSchema.<hash>`` keys)."""
    return {k[len(REGISTRY_PREFIX) :]: v for k, v in configuration.items() if k.startswith(REGISTRY_PREFIX)}


def configuration_with_registry(configuration: Mapping[str, str], registry: Mapping[str, str]) -> dict[str, str]:
    """``configuration`` plus ``docMappingSchema.<hash>`` entries for ``registry``."""
    merged = dict(configuration)
    for ref, schema in registry.items():
        merged[REGISTRY_PREFIX + ref] = schema
    return merged


def without_registry(configuration: Mapping[str, str]) -> dict[str, str]:
    """The configuration minus the schema registry entries (what a "real" metadata change touches)."""
    return {k: v for k, v in configuration.items() if not k.startswith(REGISTRY_PREFIX)}


def renormalize(registry: Mapping[str, str], refs_in_use: Iterable[str]) -> tuple[dict[str, str], dict[str, str]]:
    """Re-hash every schema canonically; returns ``(new registry, {old ref: new ref})``.

    Older writers hashed the raw string, so one schema may sit under several refs; after
    renormalization each distinct schema has exactly one ref.
    """
    new_registry: dict[str, str] = {}
    remap: dict[str, str] = {}
    for old_ref, schema in registry.items():
        new_ref = doc_mapping_hash(schema)
        new_registry.setdefault(new_ref, schema)
        remap[old_ref] = new_ref
    for ref in refs_in_use:
        remap.setdefault(ref, ref)
    return new_registry, remap


def register_doc_mappings(actions: list[Action], head_metadata: MetadataAction | None) -> list[Action]:
    """A commit's actions with each add's inline doc mapping replaced by its reference in the table's
    registry (``head_metadata``'s, or the commit's own metadata's), a metaData line first when the
    registry grows or the commit changes the metadata, then the protocol line first of all."""
    user_meta = next((a for a in actions if isinstance(a, MetadataAction)), None)
    base_meta = user_meta or head_metadata
    registry = registry_from_configuration(base_meta.configuration) if base_meta else {}
    if head_metadata is not None and user_meta is not None:
        registry = {**registry_from_configuration(head_metadata.configuration), **registry}
    new_entries: dict[str, str] = {}
    out: list[Action] = []
    for a in actions:
        if isinstance(a, AddAction) and a.doc_mapping_json is not None:
            ref = doc_mapping_hash(a.doc_mapping_json)
            if ref not in registry:
                new_entries[ref] = a.doc_mapping_json
                registry[ref] = a.doc_mapping_json
            a = dataclasses.replace(a, doc_mapping_ref=ref, doc_mapping_json=None)
        if not isinstance(a, MetadataAction):
            out.append(a)
    if base_meta is None:
        return out
    if user_meta is not None or new_entries:
        meta = base_meta.with_configuration(configuration_with_registry(base_meta.configuration, registry))
        out.insert(0, meta)
    protocol = next((a for a in actions if isinstance(a, ProtocolAction)), None)
    if protocol is not None:
        out.remove(protocol)
        out.insert(0, protocol)
    return out
