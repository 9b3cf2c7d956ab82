"""Streaming transaction identifiers: which micro-batch of which streaming query a table holds.

A streaming write commits each micro-batch as one version and must never commit the same batch
twice (a query restarted from its checkpoint replays the batch it was writing when it stopped).
As Delta's ``txn`` action does, the table records per application id (by default the streaming
query's id) the highest batch id committed. This project keeps that record where IndexTables4Spark
0.5.x readers never trip over it (PROTOCOL.md §5, "Streaming transaction identifiers"):

* in the version file, as a split tag ``indextables.streamingTxn:<batchId>:<appId>`` on every add
  of the batch (``splitTags`` is a field every JVM reader knows; no new action line);
* in every state this project writes, as the Avro file-metadata entry ``indextables.streamingTxns``:
  the whole map ``appId -> {"batchId", "version"}``, carried forward by each state write, so it
  survives checkpoints, log cleanup and compaction (merged splits drop the tags; the map keeps them).

The map at version N is the map of the newest state at or before N that this project wrote, advanced
by the tags of the version files after it. Pure functions over actions; no storage access here.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from executor_lib.protocol.actions import Action, AddAction
from indextables_contract.errors import BatchAlreadyCommittedError, CorruptLogError, InvalidActionError

TAG_PREFIX = "indextables.streamingTxn:"
METADATA_KEY = "indextables.streamingTxns"


@dataclass(frozen=True)
class StreamingTxn:
    """One micro-batch of one streaming query: ``app_id`` (the query's id) and its ``batch_id``."""

    app_id: str
    batch_id: int

    def __post_init__(self) -> None:
        if not self.app_id:
            raise InvalidActionError("a streaming transaction needs a non-empty application id")
        if self.batch_id < 0:
            raise InvalidActionError(f"streaming batch id {self.batch_id} of {self.app_id!r} is negative")

    @property
    def tag(self) -> str:
        """The split tag that marks the adds of this batch."""
        return f"{TAG_PREFIX}{self.batch_id}:{self.app_id}"


@dataclass(frozen=True)
class TxnRecord:
    """The last batch an application committed, and the version that holds it."""

    batch_id: int
    version: int

    def to_json(self) -> dict[str, int]:
        return {"batchId": self.batch_id, "version": self.version}


TxnMap = Mapping[str, TxnRecord]


def parse_tag(tag: str) -> StreamingTxn | None:
    """The transaction a split tag names, None for any other tag (or a malformed one)."""
    if not tag.startswith(TAG_PREFIX):
        return None
    batch, sep, app_id = tag[len(TAG_PREFIX) :].partition(":")
    if not sep or not app_id or not batch.isdigit():
        return None
    return StreamingTxn(app_id, int(batch))


def txns_of(actions: Iterable[Action]) -> dict[str, int]:
    """``appId -> batch id`` of the streaming batches whose adds are among ``actions``."""
    found: dict[str, int] = {}
    for a in actions:
        if isinstance(a, AddAction) and a.split_tags:
            for tag in a.split_tags:
                txn = parse_tag(tag)
                if txn is not None and txn.batch_id >= found.get(txn.app_id, -1):
                    found[txn.app_id] = txn.batch_id
    return found


def advance(txns: TxnMap, versions: Iterable[tuple[int, Iterable[Action]]]) -> dict[str, TxnRecord]:
    """``txns`` moved past the ``(version, actions)`` that follow it (a batch id never goes back)."""
    out = dict(txns)
    for version, actions in versions:
        for app_id, batch_id in txns_of(actions).items():
            known = out.get(app_id)
            if known is None or batch_id > known.batch_id:
                out[app_id] = TxnRecord(batch_id, version)
    return out


def encode(txns: TxnMap) -> str:
    """The file-metadata value: compact JSON, applications sorted."""
    return json.dumps({k: txns[k].to_json() for k in sorted(txns)}, separators=(",", ":"))


def decode(text: str | None, source: str) -> dict[str, TxnRecord]:
    """The map recorded with a state (empty if the state records none); CorruptLogError naming ``source``."""
    if not text:
        return {}
    try:
        doc = json.loads(text)
        if not isinstance(doc, dict):
            raise TypeError("not a JSON object")
        out = {}
        for app_id, record in doc.items():
            batch, version = record["batchId"], record["version"]
            if not isinstance(batch, int) or not isinstance(version, int) or isinstance(batch, bool):
                raise TypeError(f"{app_id!r}: batchId and version must be integers")
            out[str(app_id)] = TxnRecord(batch, version)
        return out
    except (json.JSONDecodeError, TypeError, KeyError, AttributeError, RecursionError) as e:
        raise CorruptLogError(f"{source}: recorded {METADATA_KEY} is invalid: {e}") from e


def tagged(actions: list[Action], txn: StreamingTxn) -> list[Action]:
    """The adds marked with the streaming transaction's split tag (PROTOCOL.md §5)."""
    out: list[Action] = []
    for a in actions:
        if isinstance(a, AddAction):
            a = dataclasses.replace(a, split_tags=frozenset(a.split_tags or ()) | {txn.tag})
        out.append(a)
    if not any(isinstance(a, AddAction) for a in out):
        raise InvalidActionError(f"streaming batch {txn.batch_id} of {txn.app_id!r}: a batch commit needs adds")
    return out


def check_winner_txn(txn: StreamingTxn, version: int, actions: Sequence[Action], uri: str) -> None:
    """A version committed while this batch's commit retried holds the same application's batch (a
    restarted query racing its predecessor): this batch is committed there (or superseded)."""
    found = txns_of(actions).get(txn.app_id)
    if found is not None and found >= txn.batch_id:
        raise BatchAlreadyCommittedError(
            f"{uri}: streaming batch {txn.batch_id} of {txn.app_id!r} was committed concurrently (version {version} "
            f"holds batch {found}); skipped"
        )
