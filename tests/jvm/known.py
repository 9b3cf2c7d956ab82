"""IndexTables4Spark 0.5.3's own differences, found by the jvm tests beside it: each (direction, scenario,
comparison) here is left out of its scenario's comparison and checked on its own as a strict xfail
(``test_known_jvm_difference`` in each test file), so a fix upstream, or a change of ours that makes the
answers agree, turns it into a failure to look at. PROTOCOL.md's "Known differences" lists them.

Source references are IndexTables4Spark's, at tag v0.5.3 (commit f04aca35)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

WE_WRITE = "we write, the JVM reads"
JVM_WRITES = "the JVM writes, we read"

IN_STRING_ORDER = (
    "0.5.3 skips splits for an IN list by the list's min/max taken in string order "
    "(stats/FilterExpressionCache.scala:168, nonNullValues.map(_.toString).sorted): for IN (1, 5, 9, 50, 1000) "
    "it keeps only splits overlapping ['1', '9'] and misses id 50"
)
NULL_GROUP = (
    "0.5.3's pushed-down GROUP BY (core/IndexTables4SparkGroupByAggregateScan.scala, a Tantivy terms "
    "aggregation) has no bucket for documents without the field: the NULL group is dropped"
)
PARTITION_FROM_DOCUMENT = (
    "0.5.3 fills partition columns from the AddAction's partitionValues only for companion splits "
    "(core/IndexTables4SparkPartitions.scala:383, if (isCompanionSplit && ...)); otherwise from the split's "
    "documents, which ours do not store the partition column in: it reads NULL"
)
NARROW_TYPES = (
    "0.5.3 has no Tantivy field type for byte, short and decimal columns "
    "(search/IndexTablesDirectInterface.scala:278, 'Unsupported field type'): it refuses to write them and "
    "reads them from our splits as NULL"
)
RANGE_BUCKETS = (
    "0.5.3's indextables_range puts every row into one NULL bucket, on its own tables as on ours: the range "
    "names come back NULL (core/IndexTables4SparkGroupByAggregateScan.scala:1185 executeRangeAggregationInternal, "
    ":1629 processRangeResult)"
)
S3_MOCK_FLATTENING = (
    "0.5.3 takes any S3 endpoint containing 'localhost' or '127.0.0.1' for S3Mock and flattens the split's key "
    "('a/b/c.split' -> 'a___b___c.split': io/CloudStorageProvider.scala:966-976, "
    "io/S3CloudStorageProvider.scala:81), so on the moto server it cannot open any split, its own included"
)
RANGE_NOT_FAST = (
    "0.5.3 sends a range filter on a column it indexed but did not make a fast field (indexing.fastfields leaves "
    "f32 and d out) to Quickwit as a range query, which needs a fast field: f32 > 5.5, and d = DATE'2024-01-02' "
    "(a date equality is the range [d, d + 1 day): core/FiltersToQueryConverter.scala:1552), fail on its own "
    "table ('Field ... is not configured as fast field'; the fast-field checks of FiltersToQueryConverter.scala, "
    "e.g. :1749-1772, do not keep them back); this project answers both from the index"
)


def strict_xfails(known: Mapping[tuple[str, str], str]) -> list[Any]:
    """One pytest param per known difference ``(scenario, comparison) -> reason``: a strict xfail, so a
    difference that went away (a JVM fixed, a layout changed) fails the run until it is taken off the list."""
    return [
        pytest.param(s, c, marks=pytest.mark.xfail(strict=True, reason=why), id=f"{s}: {c}")
        for (s, c), why in known.items()
    ]
