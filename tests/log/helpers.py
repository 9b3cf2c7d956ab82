"""Small builders shared by the log tests."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pyarrow as pa

import executor_lib
from executor_lib.log.transaction_log import TransactionLog
from executor_lib.protocol.actions import AddAction

SCHEMA = pa.schema([("id", pa.int64()), ("date", pa.string()), ("message", pa.string())])


def make_table(uri: str, options: dict[str, Any], partitioned: bool = True, **log_options: Any) -> TransactionLog:
    return executor_lib.create_table(uri, SCHEMA, ["date"] if partitioned else [], **options, **log_options)


def add(date: str | None = "2024-01-01", records: int = 10, doc_mapping: str | None = None) -> AddAction:
    prefix = f"date={date}/" if date is not None else ""
    return AddAction(
        path=f"{prefix}splits/split-{uuid.uuid4()}.split",
        partition_values={"date": date} if date is not None else {},
        size=1000 + records,
        modification_time=int(time.time() * 1000),
        data_change=True,
        num_records=records,
        doc_mapping_json=doc_mapping,
    )
