"""The add tags that pin a companion split's source files (size and time, Parquet footer CRC32), read
by the companion's sync and kept by MERGE SPLITS (``splits.write.publish``): below both layers."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from executor_lib.protocol.actions import AddAction

SOURCE_IDENTITIES_TAG = "indextables.companion.sourceIdentities"  # add tag: {path: [size, modified ms]}
SOURCE_FOOTER_CRCS_TAG = "indextables.companion.sourceFooterCrcs"  # add tag: {path: Parquet footer CRC32}


def merged_pin_tags(sources: Sequence[AddAction]) -> dict[str, str]:
    """The pin tags of a split merged from ``sources``: each file's pins as its source split recorded
    them (a merged split without them would be compared by nothing at the next sync).

    Example: ``merged_pin_tags([a, b])[SOURCE_IDENTITIES_TAG]`` holds the pins of a's and b's files."""
    tags = {}
    for tag in (SOURCE_IDENTITIES_TAG, SOURCE_FOOTER_CRCS_TAG):
        pins: dict[str, Any] = {}
        for add in sources:
            pins.update(recorded_pins(add, tag))
        if pins:
            tags[tag] = json.dumps(dict(sorted(pins.items())))
    return tags


def recorded_pins(add: AddAction, tag: str) -> dict[str, Any]:
    """The pins ``add`` records under ``tag`` ({} if none or unreadable)."""
    try:
        recorded = json.loads((add.tags or {}).get(tag) or "{}")
    except ValueError:
        return {}
    return recorded if isinstance(recorded, dict) else {}
