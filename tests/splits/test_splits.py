"""Split files: bundle layout, writer, searcher (this project's splits and IndexTables4Spark's)."""

from __future__ import annotations

import dataclasses
import json
import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import executor_lib
from executor_lib.cache.split_cache import SplitCache
from executor_lib.cli import main as cli_main
from executor_lib.format.quickwit.bundle import read_footer
from executor_lib.protocol.actions import AddAction
from executor_lib.splits.doc_mapping import mapping_for
from executor_lib.splits.rows.doc_store_rows import DocStoreRows
from executor_lib.splits.search.searcher import SplitSearcher
from executor_lib.splits.search.table_search import search_table
from executor_lib.splits.write.writer import write_split
from executor_lib.storage import open_store
from indextables_contract.errors import ConfigError, CorruptSplitError, InvalidDataError, QueryError
from tests.conftest import COMPAT_ROOT, requires_compat

TABLES = sorted(p.name for p in COMPAT_ROOT.iterdir()) if COMPAT_ROOT.is_dir() else []
DATA = pa.table(
    {
        "id": pa.array(range(20), pa.int64()),
        "title": [f"item {i} {'red' if i % 2 else 'blue'} widget" for i in range(20)],
        "tag": [f"t{i % 4}" for i in range(20)],
        "score": [i / 2 for i in range(20)],
    }
)
OPTIONS = {"spark.indextables.indexing.typemap.title": "text"}


@pytest.fixture
def split(tmp_path: Path) -> SplitSearcher:
    written = write_split(DATA, mapping_for(DATA.schema, OPTIONS), tmp_path)
    return SplitSearcher(written.path, tmp_path / "work", DATA.schema, None)


def test_written_split_records_stats_and_footer(tmp_path: Path) -> None:
    written = write_split(DATA, mapping_for(DATA.schema, OPTIONS), tmp_path)
    assert written.num_records == 20
    assert written.min_values == {"id": "0", "title": "item 0 blue widget", "tag": "t0", "score": "0.0"}
    assert written.max_values["id"] == "19" and written.max_values["tag"] == "t3"
    footer = read_footer(written.path)
    assert (footer.footer_start, footer.footer_end) == (written.footer.footer_start, written.path.stat().st_size)
    assert json.loads(written.doc_mapping_json)[1] == {
        "fast": False,
        "indexed": True,
        "name": "title",
        "stored": True,
        "tokenizer": "default",
        "type": "text",
    }


def test_queries_on_this_projects_splits(split: SplitSearcher) -> None:
    assert split.search("tag:t1", ["id"]).column("id").to_pylist() == [1, 5, 9, 13, 17]
    assert split.count("title:red") == 10  # tokenized text
    assert split.count("tag:t") == 0  # raw string: exact match only
    assert sorted(split.search("id:[3 TO 6]", ["id"]).column("id").to_pylist()) == [3, 4, 5, 6]
    assert split.search("score:[9.0 TO *] AND tag:t2", ["id"]).column("id").to_pylist() == [18]
    assert split.search("*", limit=5).num_rows == 5
    assert split.search(None).num_rows == 20
    assert split.search("red AND widget", ["id"]).num_rows == 10  # bare terms search all string fields


def test_bad_queries_and_columns_are_named(split: SplitSearcher) -> None:
    with pytest.raises(QueryError, match=r"query 'title:\(red' does not parse"):
        split.search("title:(red")
    with pytest.raises(QueryError, match="columns \\['nope'\\] are not in the split"):
        split.search("*", ["nope"])


def test_bad_mapping_options_fail_before_writing(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"typemap\.id=text: column type int64 is not a string"):
        mapping_for(DATA.schema, {"spark.indextables.indexing.typemap.id": "text"})
    with pytest.raises(ConfigError, match="fastfields: columns \\['nope'\\]"):
        mapping_for(DATA.schema, {"spark.indextables.indexing.fastfields": "id,nope"})
    with pytest.raises(ConfigError, match=r"tokenizer\.title='klingon'"):
        mapping_for(DATA.schema, {"spark.indextables.indexing.tokenizer.title": "klingon"})
    assert not list(tmp_path.iterdir())


def test_corrupt_splits_are_named(tmp_path: Path) -> None:
    written = write_split(DATA, mapping_for(DATA.schema, OPTIONS), tmp_path)
    data = written.path.read_bytes()
    truncated = tmp_path / "truncated.split"
    truncated.write_bytes(data[:-10])
    with pytest.raises(CorruptSplitError, match=r"truncated\.split"):
        read_footer(truncated)
    garbage = tmp_path / "garbage.split"
    garbage.write_bytes(b"\x00" * 100)
    with pytest.raises(CorruptSplitError, match=r"garbage\.split"):
        read_footer(garbage)


def test_table_search_through_the_store(table: tuple[str, dict[str, Any]], tmp_path: Path) -> None:
    """Splits uploaded to the table's store (local or S3) are fetched and searched with partitions."""
    uri, options = table
    schema = pa.schema([*DATA.schema, pa.field("day", pa.string())])
    log = executor_lib.create_table(uri, schema, ["day"], **options)
    store = open_store(uri, **options)
    mapping = mapping_for(DATA.schema, OPTIONS)
    adds = []
    for day, rows in (("2024-01-01", DATA.slice(0, 8)), ("2024-01-02", DATA.slice(8))):
        written = write_split(rows, mapping, tmp_path / "out")
        key = f"day={day}/splits/{written.path.name}"
        store.put(key, written.path.read_bytes())
        adds.append(
            AddAction(
                key,
                {"day": day},
                written.path.stat().st_size,
                1,
                True,
                num_records=written.num_records,
                doc_mapping_json=written.doc_mapping_json,
                has_footer_offsets=True,
                footer_start_offset=written.footer.footer_start,
                footer_end_offset=written.footer.footer_end,
            )
        )
    log.commit(adds)
    snap = executor_lib.open_log(uri, **options).snapshot()
    rows = search_table(store, snap, "tag:t0", SplitCache(tmp_path / "work"), ["id", "day"])
    assert sorted(zip(rows.column("id").to_pylist(), rows.column("day").to_pylist(), strict=True)) == [
        (0, "2024-01-01"),
        (4, "2024-01-01"),
        (8, "2024-01-02"),
        (12, "2024-01-02"),
        (16, "2024-01-02"),
    ]
    assert search_table(store, snap, "*", SplitCache(tmp_path / "work"), limit=11).num_rows == 11
    with pytest.raises(QueryError, match="columns \\['nope'\\] are not in the table"):
        search_table(store, snap, "*", SplitCache(tmp_path / "work"), ["nope"])


@pytest.mark.parametrize("name", TABLES)
def test_indextables_search_on_every_jvm_table(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = COMPAT_ROOT / name
    snap = executor_lib.open_log(str(table)).snapshot()
    work = ["--cache-dir", str(tmp_path)]
    assert cli_main(["search", str(table), "*", "--json", *work]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == snap.num_records
    # every file's min/max id (written by the JVM) is found by a term query on that value
    for add in snap.files[:3]:
        if not add.min_values or "id" not in add.min_values:
            continue
        wanted = int(add.min_values["id"])
        assert cli_main(["search", str(table), f"id:{wanted}", "--json", *work]) == 0
        hits = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert wanted in {h["id"] for h in hits}
        for column, value in add.partition_values.items():
            assert all(h[column] == value for h in hits if h["id"] == wanted)
    text_column = next(
        f.name for f in snap.arrow_schema() if pa.types.is_string(f.type) and f.name not in snap.partition_columns
    )
    sample = rows[0][text_column]
    assert cli_main(["search", str(table), f'{text_column}:"{sample}"', "--json", *work]) == 0
    assert sample in {json.loads(line)[text_column] for line in capsys.readouterr().out.splitlines()}


def test_write_upload_merge_and_commit(table: tuple[str, dict[str, Any]], tmp_path: Path) -> None:
    from executor_lib.protocol.actions import RemoveAction
    from executor_lib.splits.write.publish import merge_splits, write_and_upload

    uri, options = table
    schema = pa.schema([*DATA.schema, pa.field("day", pa.string())])
    log = executor_lib.create_table(uri, schema, ["day"], **options)
    store = open_store(uri, **options)
    mapping = mapping_for(DATA.schema, OPTIONS)
    parts = [write_and_upload(store, DATA.slice(i, 5), mapping, {"day": "2024-01-01"}) for i in range(0, 20, 5)]
    assert parts[0].path.startswith("day=2024-01-01/splits/split-") and parts[0].num_records == 5
    log.commit(parts)
    snap = log.snapshot()
    cache = SplitCache(tmp_path / "w")
    merged = merge_splits(store, snap.files, DATA.schema, {a.path: snap.doc_mapping(a) for a in snap.files}, cache)
    assert (merged.num_records, merged.num_merge_ops, merged.data_change) == (20, 1, False)
    # a local table's splits are merged where they lie; an S3 table's through the node's split cache
    assert cache.describe()["splitsCached"] == (0 if store.local_path(parts[0].path) else len(parts))
    assert (merged.min_values["id"], merged.max_values["id"]) == ("0", "19")
    log.commit(
        [
            merged,
            *(
                RemoveAction(a.path, 1, data_change=False, partition_values=a.partition_values, size=a.size)
                for a in snap.files
            ),
        ]
    )
    after = executor_lib.open_log(uri, **options).snapshot()
    assert [f.path for f in after.files] == [merged.path]
    rows = search_table(store, after, "*", SplitCache(tmp_path / "work2"), ["id"])
    assert sorted(rows.column("id").to_pylist()) == list(range(20))
    with pytest.raises(ConfigError, match="at least two splits"):
        merge_splits(store, after.files, DATA.schema, {}, SplitCache(tmp_path / "w"))


@requires_compat
def test_merging_jvm_splits(tmp_path: Path) -> None:
    import shutil

    from executor_lib.splits.write.publish import merge_splits

    table = tmp_path / "02_five_appends"  # a copy: nothing is ever written into the shared compat tables
    shutil.copytree(COMPAT_ROOT / "02_five_appends", table)
    snap = executor_lib.open_log(str(table)).snapshot()
    store = open_store(str(table))
    sources = snap.files[:3]
    merged = merge_splits(
        store,
        sources,
        snap.arrow_schema(),
        {a.path: snap.doc_mapping(a) for a in sources},
        SplitCache(tmp_path / "work"),
    )
    assert merged.num_records == sum(a.num_records or 0 for a in sources)
    assert store.exists(merged.path) and merged.path.startswith("splits/split-")


def test_aggregations_on_fast_fields(split: SplitSearcher) -> None:
    result = split.aggregate(
        {
            "total": {"sum": {"field": "id"}},
            "mean": {"avg": {"field": "score"}},
            "low": {"min": {"field": "id"}},
            "tags": {"terms": {"field": "tag"}},
            "hist": {"histogram": {"field": "score", "interval": 5}},
            "ranges": {"range": {"field": "id", "ranges": [{"to": 10}, {"from": 10}]}},
        }
    )
    assert result["total"]["value"] == sum(range(20)) and result["low"]["value"] == 0
    assert result["mean"]["value"] == sum(i / 2 for i in range(20)) / 20
    assert {b["key"]: b["doc_count"] for b in result["tags"]["buckets"]} == {"t0": 5, "t1": 5, "t2": 5, "t3": 5}
    assert [b["doc_count"] for b in result["hist"]["buckets"]] == [10, 10]
    assert [b["doc_count"] for b in result["ranges"]["buckets"]] == [10, 10]
    assert split.aggregate({"n": {"sum": {"field": "id"}}}, query="tag:t1")["n"]["value"] == 1 + 5 + 9 + 13 + 17
    with pytest.raises(QueryError, match="column 'title' is not a fast field"):
        split.aggregate({"t": {"terms": {"field": "title"}}})
    with pytest.raises(QueryError, match="column 'nope' is not in the split"):
        split.aggregate({"x": {"max": {"field": "nope"}}})


def test_fastfields_is_the_exact_list_of_fast_fields(tmp_path: Path) -> None:
    """By default numbers and exact strings are fast (aggregates push down with no options);
    ``fastfields`` names exactly the fast ones: it narrows (tag, score no longer fast) and widens
    (the tokenized title becomes fast)."""
    default = {f.name: f.fast for f in mapping_for(DATA.schema, OPTIONS).fields}
    assert default == {"id": True, "title": False, "tag": True, "score": True}
    narrowed = mapping_for(DATA.schema, {**OPTIONS, "spark.indextables.indexing.fastfields": "id, title"})
    assert {f.name: f.fast for f in narrowed.fields} == {"id": True, "title": True, "tag": False, "score": False}
    written = write_split(DATA, narrowed, tmp_path)
    split = SplitSearcher(written.path, tmp_path / "work", DATA.schema, None)
    assert split.aggregate({"total": {"sum": {"field": "id"}}})["total"]["value"] == sum(range(20))
    with pytest.raises(QueryError, match="column 'tag' is not a fast field"):
        split.aggregate({"t": {"terms": {"field": "tag"}}})
    assert sorted(split.search("tag:t1", ["id"]).column("id").to_pylist()) == [1, 5, 9, 13, 17]  # still indexed


def test_structured_filters(split: SplitSearcher) -> None:
    from indextables_contract import filters as f

    def ids(flt: f.Filter) -> list[int]:
        return sorted(split.search(flt, ["id"]).column("id").to_pylist())

    assert ids(f.Term("tag", "t1")) == [1, 5, 9, 13, 17]
    assert ids(f.Term("id", 7)) == [7]
    assert ids(f.TermIn("tag", ("t0", "t3"))) == [0, 3, 4, 7, 8, 11, 12, 15, 16, 19]
    assert ids(f.And((f.Between("id", lower=3, lower_inclusive=False), f.Between("id", upper=6)))) == [4, 5, 6]
    assert ids(f.Between("score", 8.5, None)) == [17, 18, 19]
    assert ids(f.Prefix("tag", "t2")) == [2, 6, 10, 14, 18]
    assert ids(f.Contains("tag", "3")) == [3, 7, 11, 15, 19]
    assert ids(f.Regex("tag", "t[01]")) == [0, 1, 4, 5, 8, 9, 12, 13, 16, 17]
    assert ids(f.Or((f.Term("id", 1), f.Term("id", 2)))) == [1, 2]
    assert ids(f.And((f.Not(f.Term("tag", "t0")), f.Between("id", upper=4)))) == [1, 2, 3]
    assert ids(f.And((f.QueryString("red", "title"), f.Term("tag", "t1")))) == [1, 5, 9, 13, 17]
    assert ids(f.QueryString("blue")) == list(range(0, 20, 2))
    assert ids(f.Exists("id")) == list(range(20))
    assert split.count(f.Term("tag", "t1")) == 5
    with pytest.raises(QueryError, match="equality on tokenized text column 'title'"):
        split.search(f.Term("title", "red"))
    with pytest.raises(QueryError, match="range on column 'tag' of type text"):
        split.search(f.Between("tag", "a", "b"))
    with pytest.raises(QueryError, match="prefix on column 'title': needs an exact"):
        split.search(f.Prefix("title", "it"))
    with pytest.raises(QueryError, match="column 'nope' is not in the split"):
        split.search(f.Term("nope", 1))


def test_nulls_dates_and_binary_columns(tmp_path: Path) -> None:
    import datetime

    from indextables_contract import filters as f

    rows = pa.table(
        {
            "id": pa.array([1, None, 3], pa.int64()),
            "name": ["a", None, "c"],
            "day": pa.array([None, datetime.date(2024, 1, 2), datetime.date(2024, 1, 3)], pa.date32()),
            "blob": pa.array([b"x", b"y", None], pa.binary()),
        }
    )
    written = write_split(rows, mapping_for(rows.schema, {}), tmp_path)
    assert (written.min_values["day"], written.max_values["day"]) == ("2024-01-02", "2024-01-03")
    assert "blob" not in written.min_values
    searcher = SplitSearcher(written.path, tmp_path / "w", rows.schema, None)
    assert searcher.search("*").to_pylist() == rows.to_pylist(), "the columnar copy keeps nulls, dates and bytes"
    assert searcher.search(f.Term("day", datetime.date(2024, 1, 3)), ["name"]).column("name").to_pylist() == ["c"]
    assert searcher.count(f.Exists("id")) == 2
    with pytest.raises(QueryError, match="range on column 'blob' of type bytes"):
        searcher.search(f.Between("blob", b"a", b"z"))


def test_json_fields_and_date_histograms(tmp_path: Path) -> None:
    import datetime

    rows = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "attrs": pa.array([{"color": "red", "size": 1}, {"color": "blue", "size": 2}, {"color": "red", "size": 3}]),
            "at": pa.array([datetime.datetime(2024, 1, d, 12) for d in (1, 1, 2)], pa.timestamp("us")),
        }
    )
    mapping = mapping_for(rows.schema, {})
    assert [f.type for f in mapping.fields] == ["i64", "json", "datetime"]
    searcher = SplitSearcher(write_split(rows, mapping, tmp_path).path, tmp_path / "w", rows.schema, None)
    assert sorted(searcher.search("attrs.color:red", ["id"]).column("id").to_pylist()) == [1, 3]
    assert searcher.search("*", ["attrs"]).column("attrs").to_pylist()[1] == {"color": "blue", "size": 2}
    days = searcher.aggregate({"d": {"date_histogram": {"field": "at", "fixed_interval": "1d"}}})
    assert [b["doc_count"] for b in days["d"]["buckets"]] == [2, 1]


def test_ip_columns_answer_address_queries_and_keep_their_strings(tmp_path: Path) -> None:
    from executor_lib.splits.query.pushdown import Support, leaf_support
    from indextables_contract import filters as f

    rows = pa.table(
        {
            "id": pa.array([1, 2, 3, 4], pa.int64()),
            "ip": ["10.0.0.1", "10.1.2.3", "192.168.1.9", "::1"],
            "host": ["web", "db", "web", "10.0.0.1"],
        }
    )
    options = {"spark.indextables.indexing.typemap.ip": "ip"}
    mapping = mapping_for(rows.schema, options)
    assert mapping.field("ip") is not None and mapping.field("ip").type == "ip"  # type: ignore[union-attr]
    searcher = SplitSearcher(write_split(rows, mapping, tmp_path).path, tmp_path / "w", rows.schema, None)

    def ids(query: str | f.Filter) -> list[int]:
        return sorted(searcher.search(query, ["id"]).column("id").to_pylist())

    assert ids("ip:[10.0.0.0 TO 10.255.255.255]") == [1, 2]  # address order, not string order
    assert ids("ip:192.168.1.9") == [3]
    assert ids('ip:"::1"') == [4]
    assert ids(f.Term("ip", "10.1.2.3")) == [2]
    assert ids(f.TermIn("ip", ("10.0.0.1", "::1"))) == [1, 4]
    assert ids('"10.0.0.1"') == [4], "bare terms search the string fields, not the ip field"
    assert searcher.search("ip:10.0.0.1", ["ip"]).column("ip").to_pylist() == ["10.0.0.1"]
    # Spark compares strings: the index narrows an equality, the rows decide it
    assert leaf_support(f.Term("ip", "10.0.0.1"), [mapping], rows.schema) == (
        Support.SUPERSET,
        f.Term("ip", "10.0.0.1"),
    )
    assert leaf_support(f.Between("ip", "10", "11"), [mapping], rows.schema)[0] is Support.NONE
    with pytest.raises(ConfigError, match=r"typemap\.id=ip: column type int64 is not a string"):
        mapping_for(rows.schema, {"spark.indextables.indexing.typemap.id": "ip"})


def test_a_bad_ip_value_is_named_before_anything_is_written(tmp_path: Path) -> None:
    from indextables_contract.errors import InvalidDataError

    rows = pa.table({"ip": ["10.0.0.1", "not-an-ip"]})
    mapping = mapping_for(rows.schema, {"spark.indextables.indexing.typemap.ip": "ip"})
    with pytest.raises(InvalidDataError, match=r"row 1 .*not-an-ip"):
        write_split(rows, mapping, tmp_path / "out")
    assert not list((tmp_path / "out").glob("*.split"))


@pytest.mark.parametrize("record", ["basic", "freq", "position"])
def test_index_record_option(record: str, tmp_path: Path) -> None:
    rows = pa.table({"id": pa.array([1, 2], pa.int64()), "body": ["quick brown fox", "brown quick fox"]})
    options = {
        "spark.indextables.indexing.typemap.body": "text",
        "spark.indextables.indexing.indexrecordoption.body": record,
    }
    mapping = mapping_for(rows.schema, options)
    field = json.loads(mapping.to_json())[1]
    assert field.get("record", "position") == record and ("record" in field) == (record != "position")
    searcher = SplitSearcher(write_split(rows, mapping, tmp_path).path, tmp_path / "w", rows.schema, None)
    assert searcher.count("body:quick AND body:fox") == 2
    if record == "position":
        assert searcher.search('body:"quick brown"', ["id"]).column("id").to_pylist() == [1]
    else:
        with pytest.raises(QueryError, match="does not have positions indexed"):
            searcher.search('body:"quick brown"')


def test_bad_index_record_options_are_named() -> None:
    with pytest.raises(ConfigError, match=r"indexrecordoption\.title='sometimes'"):
        mapping_for(DATA.schema, {**OPTIONS, "spark.indextables.indexing.indexrecordoption.title": "sometimes"})
    with pytest.raises(ConfigError, match=r"indexrecordoption\.id='basic'.*column 'id' is i64"):
        mapping_for(DATA.schema, {"spark.indextables.indexing.indexrecordoption.id": "basic"})


def _stored_docs(searcher: SplitSearcher) -> dict[int, dict[str, Any]]:
    """Each document's stored values (decoded from the split's doc store), by id."""
    assert isinstance(searcher.rows, DocStoreRows), "the rows are read from the doc stores"
    return {d["id"]: d for d in searcher.rows.read_all().to_pylist()}


def test_native_writer_indexes_every_scalar_type_as_written(tmp_path: Path) -> None:
    """Rows indexed by the native writer (Arrow batches in Rust): every scalar type's stored values
    come back exactly, each query finds the rows a pyarrow filter over the same rows finds, fast
    fields aggregate the same values, and a timestamp outside Tantivy's dates names its row."""
    import datetime

    import pyarrow.compute as pc

    from indextables_contract import filters as f

    utc = datetime.timezone.utc
    strings = ['say "hi"', "back\\slash", "new\nline\ttab\x01ctl", "ünïcødé 😀", None, "", "plain"]
    n = len(strings)
    times = [
        datetime.datetime(2024, 1, 2, 3, 4, 5, 123456, utc),
        None,
        datetime.datetime(1969, 12, 31, 23, 59, tzinfo=utc),
    ]
    times += [datetime.datetime(y, 1, 2, tzinfo=utc) for y in (2024, 2262, 1900, 2025)]
    rows = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "s": pa.array(strings),
            "text": pa.array([x if x is None else f"{x} words here" for x in strings]),
            "big": pa.array([2**63 - 1, -(2**63), 0, None, 5, 6, 7], pa.int64()),
            "u": pa.array([2**64 - 1, 0, 1, 2, None, 3, 4], pa.uint64()),
            "x": pa.array([1e300, -0.0, 5e-324, 0.1, 3.0, None, -2.5]),
            "ok": pa.array([True, False, None, True, True, False, True]),
            "ts": pa.array(times, pa.timestamp("us", "UTC")),
            "day": pa.array(
                [datetime.date(2024, 1, 3), None, datetime.date(1970, 1, 1)] + [datetime.date(2000, 2, 28)] * 4
            ),
        }
    )
    options = {"spark.indextables.indexing.typemap.text": "text"}
    written = write_split(rows, mapping_for(rows.schema, options), tmp_path / "split")
    searcher = SplitSearcher(written.path, tmp_path / "w", rows.schema, None)
    assert searcher.rows.read_all().equals(rows), "stored exactly as written"
    assert [_stored_docs(searcher)[i] for i in range(n)] == rows.to_pylist()
    year = (
        pa.scalar(datetime.datetime(2024, 1, 1, tzinfo=utc)),
        pa.scalar(datetime.datetime(2024, 12, 31, tzinfo=utc)),
    )
    for query, expected in [
        ('s:"say \\"hi\\""', pc.equal(rows["s"], 'say "hi"')),
        ("text:ünïcødé", pc.starts_with(rows["text"], "ünïcødé")),
        ("text:ctl", pc.match_substring(rows["text"], "ctl")),
        ("u:18446744073709551615", pc.equal(rows["u"], pa.scalar(2**64 - 1, pa.uint64()))),
        ("big:[* TO 0]", pc.less_equal(rows["big"], 0)),
        ("x:[-1 TO 1]", pc.and_(pc.greater_equal(rows["x"], -1), pc.less_equal(rows["x"], 1))),
        ("ok:true", rows["ok"]),
        (
            "ts:[2024-01-01T00:00:00Z TO 2024-12-31T00:00:00Z]",
            pc.and_(pc.greater_equal(rows["ts"], year[0]), pc.less_equal(rows["ts"], year[1])),
        ),
        ('day:"2024-01-03T00:00:00Z"', pc.equal(rows["day"], pa.scalar(datetime.date(2024, 1, 3)))),
        ("s:plain", pc.equal(rows["s"], "plain")),
    ]:
        want = sorted(rows.filter(pc.fill_null(expected, False))["id"].to_pylist())
        assert sorted(searcher.search(query, ["id"]).column("id").to_pylist()) == want, query
        assert want, query
    assert searcher.count(f.Exists("big")) == n - 1
    stats = searcher.aggregate({"m": {"stats": {"field": "big"}}})["m"]
    assert (stats["count"], stats["min"], stats["max"]) == (n - 1, float(-(2**63)), float(2**63 - 1))
    ancient = pa.table({"id": [1], "ts": pa.array([datetime.datetime(1, 1, 1)], pa.timestamp("us"))})
    with pytest.raises(InvalidDataError, match=r"row 0 of the batch cannot be indexed: column ts: .*1677"):
        write_split(ancient, mapping_for(ancient.schema, {}), tmp_path / "ancient")


_BOUNDED_WRITE = """
import sys, tracemalloc
from pathlib import Path
import pyarrow as pa
from executor_lib.splits.doc_mapping import mapping_for
from executor_lib.splits.search.searcher import SplitSearcher
from executor_lib.splits.write.writer import SplitBuilder

rows, batch = 200_000, 10_000
words = " ".join(f"word{i}" for i in range(60))  # ~500-byte messages: ~110 MB of rows in all
def make(start):
    ids = pa.array(range(start, start + batch), pa.int64())
    return pa.record_batch({"id": ids, "message": pa.array([f"{words} {i}" for i in range(start, start + batch)])})
mapping = mapping_for(make(0).schema, {"spark.indextables.indexing.typemap.message": "text"})
tracemalloc.start()
builder = SplitBuilder(mapping, Path(sys.argv[1]), heap_bytes=50_000_000, threads=1)
for start in range(0, rows, batch):
    builder.add(make(start))
written = builder.finish()
python_peak = tracemalloc.get_traced_memory()[1]
arrow_peak = pa.default_memory_pool().max_memory()
searcher = SplitSearcher(written.path, Path(sys.argv[1]) / "work", make(0).schema, None)
assert searcher.num_docs == rows and searcher.count("message:word7") == rows, searcher.num_docs
assert searcher.rows.take(pa.array([rows - 1], pa.uint64())).column("id").to_pylist() == [rows - 1]
print(python_peak, arrow_peak, written.path.stat().st_size)
"""


def test_a_large_write_stays_within_its_memory_bound(tmp_path: Path) -> None:
    """200k rows of ~500 bytes (~110 MB as Arrow, several times that as Python dicts) stream through a
    ``SplitBuilder``: peak Python and Arrow memory stay at a few batches, however many rows the split has
    (Tantivy's own memory is bounded by its heap setting)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run(
        [sys.executable, "-c", _BOUNDED_WRITE, str(tmp_path)], capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr
    python_peak, arrow_peak, split_size = map(int, done.stdout.split())
    assert split_size > 5_000_000, "the split holds every row (compressed columnar copy and doc store)"
    # the peak is finish()'s SSTable conversion of one segment's dictionaries (200K unique ids and
    # 200K unique message numbers: ~40 MB, 39.6 MB with the columnar copy, 40.5 MB without __row),
    # not the rows, which stream through a batch at a time (~5 MB before finish)
    assert python_peak < 44_000_000, f"Python objects peaked at {python_peak:,} bytes"
    assert arrow_peak < 40_000_000, f"Arrow buffers peaked at {arrow_peak:,} bytes"


@pytest.mark.parametrize("columnar_copy", [True, None], ids=["columnar-copy", "doc-store-rows"])
def test_merge_combines_segments_and_maps_rows_through_offsets(tmp_path: Path, columnar_copy: bool | None) -> None:
    """A merge copies the sources' segments (no re-indexing): with columnar copies it records each
    segment's row offset; with rows in the doc stores a row is a document ordinal. Every query answers
    exactly as on the concatenated rows, including merges of merged splits and sources with several
    segments."""
    from executor_lib.format.quickwit.bundle import ROWS_IN_STORE_MEMBER, read_footer
    from executor_lib.splits.write.merge import MergeSource, merge_sources
    from executor_lib.splits.write.writer import SEGMENTS_MEMBER
    from indextables_contract import filters as f

    mapping = mapping_for(DATA.schema, OPTIONS)
    big = pa.concat_tables([DATA] * 500).set_column(0, "id", pa.array(range(10_000), pa.int64()))
    in_store = columnar_copy is None

    def open_split(written: Any, name: str) -> SplitSearcher:
        return SplitSearcher(written.path, tmp_path / f"w-{name}", DATA.schema, None)

    parts = [
        write_split(big.slice(i, 2_500), mapping, tmp_path / f"p{i}", threads=2, columnar_copy=columnar_copy)
        for i in range(0, 10_000, 2_500)
    ]
    searchers = [open_split(w, str(i)) for i, w in enumerate(parts)]
    assert sum(s.searcher.num_segments for s in searchers) > 4, "multi-threaded sources have several segments"

    def merge(inputs: list[SplitSearcher], name: str) -> SplitSearcher:
        sources = [MergeSource.from_bundle(Path(s.split)) for s in inputs]  # read in place, as MERGE SPLITS does
        written = merge_sources([s for s in sources if s is not None], mapping, tmp_path / name)
        files = read_footer(written.path).files
        assert (SEGMENTS_MEMBER in files, ROWS_IN_STORE_MEMBER in files) == (not in_store, in_store)
        merged = open_split(written, name)
        assert merged.searcher.num_segments == sum(s.searcher.num_segments for s in inputs), "re-indexed"
        assert written.num_records == sum(s.num_docs for s in inputs)
        return merged

    first, second = merge(searchers[:2], "m1"), merge(searchers[2:], "m2")
    merged = merge([first, second], "m12")  # offsets of merged sources compose
    ids = merged.rows.read_all().column("id").to_pylist()
    assert (sorted(ids) if in_store else ids) == list(range(10_000))  # doc-store rows: in document order
    # a scored search's best rows (rows_at): fast fields read by segment and doc where rows are document
    # ordinals, across the merged segments' boundaries, the same values as the rows'
    picked = pa.array(sorted({*random.Random(3).sample(range(10_000), 300), 0, 2_499, 2_500, 9_999}), pa.uint64())
    assert merged.fast_columns(["id", "title"]) == ["id"]
    assert merged.rows_at(picked, ["id", "title"]).equals(merged.rows.take(picked).select(["id", "title"]))
    for query in ["title:red", "tag:t1", f.Between("id", 4_990, 5_010), f.TermIn("tag", ("t0", "t3")), None]:
        expected = [i for i in range(10_000) if _matches(big.slice(i, 1).to_pylist()[0], query)]
        found = merged.search(query, ["id"]).column("id").to_pylist()
        assert sorted(found) == expected, query
        rows = merged.row_ids(query).to_pylist()
        assert rows == sorted(rows), "row ids ascend"
        assert sorted(merged.rows.take(pa.array(rows, pa.uint64())).column("id").to_pylist()) == expected
        limited = merged.row_ids(query, limit=7).to_pylist()
        if not in_store:
            assert limited == rows[:7], "a limit keeps the first rows"
        assert len(limited) == min(7, len(expected)) and set(limited) <= set(rows)
        assert merged.count(query) == len(expected)
    assert merged.aggregate({"s": {"stats": {"field": "id"}}})["s"]["sum"] == sum(range(10_000))
    source = MergeSource.from_bundle(Path(first.split))
    assert source is not None
    doubled = merge_sources([source] * 2, mapping, tmp_path / "d")
    assert SEGMENTS_MEMBER not in read_footer(doubled.path).files, "the same segment twice: re-indexed instead"
    again = open_split(doubled, "d")
    assert again.count("tag:t1") == 2 * first.count("tag:t1") and again.num_docs == 2 * first.num_docs


def test_a_merge_source_whose_parts_disagree_is_named(tmp_path: Path) -> None:
    """A split whose index and columnar copy disagree is not merged (its rows would be misnumbered):
    CorruptSplitError names the split; MERGE SPLITS drops its cached copy (splits.write.publish)."""
    from executor_lib.format.quickwit.bundle import read_footer, read_member, write_bundle
    from executor_lib.splits.write.merge import MergeSource
    from executor_lib.splits.write.writer import COLUMNS_MEMBER

    written = write_split(DATA, mapping_for(DATA.schema, OPTIONS), tmp_path / "s", columnar_copy=True)
    footer = read_footer(written.path)
    members: dict[str, Any] = {name: read_member(written.path, footer, name) for name in footer.files}
    copy = pa.ipc.open_file(pa.py_buffer(members[COLUMNS_MEMBER])).read_all().slice(0, 19)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, copy.schema) as ipc:
        ipc.write_table(copy)
    members[COLUMNS_MEMBER] = sink.getvalue().to_pybytes()
    bad = tmp_path / "bad.split"
    write_bundle(members, bad)
    with pytest.raises(CorruptSplitError, match=r"bad\.split: the index has 20 documents, its columnar copy 19"):
        MergeSource.from_bundle(bad)
    assert MergeSource.from_bundle(written.path).rows.num_rows == 20


def test_the_columnar_copy_is_written_in_fixed_compressed_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows fed as Spark's small batches land in a columnar copy of zstd-compressed batches of one
    fixed size (recorded in its schema), in a new split and in a merged one; searches take their
    rows batch by batch."""
    from executor_lib.format.quickwit.bundle import read_footer
    from executor_lib.splits.rows import columnar as columnar_copy
    from executor_lib.splits.rows.take import take_rows
    from executor_lib.splits.write.merge import MergeSource, merge_sources
    from executor_lib.splits.write.writer import SplitBuilder, columns_members

    monkeypatch.setattr(columnar_copy, "MAX_BATCH_ROWS", 3_000)
    monkeypatch.setattr(columnar_copy, "COPY_BATCH_BYTES", 1 << 30)
    rows = pa.concat_tables([DATA] * 500).set_column(0, "id", pa.array(range(10_000), pa.int64()))
    mapping = mapping_for(DATA.schema, OPTIONS)

    def built(name: str) -> SplitSearcher:
        builder = SplitBuilder(mapping, tmp_path / name, columnar_copy=True)
        for batch in rows.to_batches(max_chunksize=100):
            builder.add(batch)
        return SplitSearcher(builder.finish().path, tmp_path / f"w-{name}", DATA.schema, None)

    def copy_batches(split: Path, part: int = 0) -> tuple[list[int], bytes | None, int]:
        footer = read_footer(split)
        start, end = footer.files[(columns_members(footer) or [""])[part]]
        with pa.memory_map(str(split)) as mapped:
            mapped.seek(start)
            reader = pa.ipc.open_file(mapped.read_buffer(end - start))
            sizes = [reader.get_batch(i).num_rows for i in range(reader.num_record_batches)]
            return sizes, (reader.schema.metadata or {}).get(b"indextables.batchRows"), end - start

    a, b = built("a"), built("b")
    sizes, recorded, member_bytes = copy_batches(a.split)
    assert sizes == [3_000, 3_000, 3_000, 1_000] and recorded == b"3000", "100 batches of 100 rows"
    assert member_bytes < rows.nbytes / 4, f"copy of {member_bytes} bytes: not compressed ({rows.nbytes} raw)"
    assert a.rows.read_all().equals(rows)
    ids = a.row_ids("tag:t1")
    assert take_rows(a.rows, ids).equals(rows.take(ids)) and len(ids) == 2_500

    merged_split = merge_sources(
        [MergeSource.from_bundle(a.split), MergeSource.from_bundle(b.split)], mapping, tmp_path / "m"
    )
    merged = SplitSearcher(merged_split.path, tmp_path / "w-m", DATA.schema, None)
    assert merged.rows.read_all().equals(pa.concat_tables([rows, rows]))
    # the sources' compressed copies are the merged split's parts, as they were
    assert [copy_batches(merged_split.path, k) for k in (0, 1)] == [copy_batches(a.split), copy_batches(b.split)]
    assert merged.search("tag:t1", ["id"]).num_rows == 5_000


def _matches(row: dict[str, Any], query: Any) -> bool:
    from indextables_contract import filters as f

    if query is None:
        return True
    if query == "title:red":
        return "red" in row["title"]
    if query == "tag:t1":
        return bool(row["tag"] == "t1")
    if isinstance(query, f.Between):
        return bool(query.lower <= row["id"] <= query.upper)
    return bool(row["tag"] in query.values)


def test_store_only_and_index_only_columns_skip_the_work_they_name(tmp_path: Path) -> None:
    """A store-only text column is not indexed (not in the Tantivy index; its values come from the
    columnar copy); an index-only column is indexed but not copied (it reads as null, a filter the index
    answers exactly still finds its rows, one left for the rows is a clear error); a merge keeps both."""
    from executor_lib.format.quickwit.bundle import read_member
    from executor_lib.splits.query.pushdown import FilterPlan
    from executor_lib.splits.search.table_search import scan_split
    from executor_lib.splits.write.merge import MergeSource, merge_sources
    from executor_lib.splits.write.writer import COLUMNS_MEMBER
    from indextables_contract import filters as f

    options = {
        **OPTIONS,
        "spark.indextables.indexing.storeonly": "title",
        "spark.indextables.indexing.indexonly": "tag",
    }
    mapping = mapping_for(DATA.schema, options)
    written = write_split(DATA, mapping, tmp_path / "s")
    searcher = SplitSearcher(written.path, tmp_path / "w", DATA.schema, None)
    meta = json.loads((searcher.index_dir / "meta.json").read_text())
    assert {field["name"] for field in meta["schema"]} == {"id", "tag", "score", "__row"}, "title is not indexed"
    copy = pa.ipc.open_file(pa.py_buffer(read_member(written.path, written.footer, COLUMNS_MEMBER))).read_all()
    assert copy.column_names == ["id", "title", "score"], "tag's values are not copied"
    assert searcher.search(None, ["id", "title", "tag"]).to_pylist()[1] == {
        "id": 1,
        "title": DATA["title"][1].as_py(),
        "tag": None,
    }
    assert searcher.count("tag:t1") == 5 and searcher.count(f.Term("tag", "t1")) == 5
    with pytest.raises(QueryError, match="'title' is not an indexed field"):
        from executor_lib.splits.query.check import check_query

        check_query(f.QueryString("red", "title"), mapping)
    with pytest.raises(QueryError, match=r"columns \['tag'\] are index-only"):
        scan_split(searcher, FilterPlan(None, f.Prefix("tag", "t")), ["id"])
    rows = scan_split(searcher, FilterPlan(f.Term("tag", "t2"), f.Contains("title", "blue")), ["id", "tag"])
    assert rows.to_pylist() == [{"id": i, "tag": None} for i in (2, 6, 10, 14, 18)]
    other = SplitSearcher(write_split(DATA, mapping, tmp_path / "s2").path, tmp_path / "w2", DATA.schema, None)
    merged = merge_sources(
        [MergeSource.from_bundle(Path(s.split)) for s in (searcher, other)],  # type: ignore[misc]
        mapping,
        tmp_path / "m",
    )
    after = SplitSearcher(merged.path, tmp_path / "wm", DATA.schema, None)
    assert after.count("tag:t3") == 10 and after.search("tag:t3", ["tag"]).column("tag").null_count == 10
    assert "tag" not in merged.min_values and merged.min_values["title"] == written.min_values["title"]
    assert written.min_values["tag"] == "t0", "statistics still cover index-only columns"


@pytest.mark.parametrize("columnar_copy", [True, None], ids=["columnar-copy", "doc-store-rows"])
def test_a_merge_copies_the_sources_compressed_copies_and_merges_their_statistics(
    tmp_path: Path, columnar_copy: bool | None
) -> None:
    """MERGE SPLITS keeps the sources' compressed rows as they are (columnar copies as parts, or the
    segments' doc stores; nothing decoded) and takes the merged min/max values from the sources'
    recorded ones: equal to computing them from the rows, for every type with statistics (NaN,
    truncated strings, time zones, a column null in one source)."""
    import datetime

    from executor_lib.format.quickwit.bundle import read_footer
    from executor_lib.splits.write.merge import MergeSource, merge_sources
    from executor_lib.splits.write.writer import _stats, column_part_member

    utc = datetime.timezone.utc

    def rows(k: int) -> pa.Table:
        n = 50
        return pa.table(
            {
                "id": pa.array([k * 1_000 - i for i in range(n)], pa.int64()),
                "score": pa.array([float("nan") if k == 1 and i == 3 else k + i / 7 for i in range(n)], pa.float64()),
                "name": pa.array([("z" * 40 if k == 2 else "m") + str(i) for i in range(n)]),
                "ts": pa.array(
                    [datetime.datetime(2024, 1, 1 + k, 0, 0, i, 1234, tzinfo=utc) for i in range(n)],
                    pa.timestamp("us", tz="UTC"),
                ),
                "day": pa.array([datetime.date(2024, 2, 1 + k)] * n, pa.date32()),
                "rare": pa.array([None] * n if k != 0 else [f"r{i}" for i in range(n)], pa.string()),
            }
        )

    tables = [rows(k) for k in range(3)]
    mapping = mapping_for(tables[0].schema, {})
    splits = [write_split(t, mapping, tmp_path / f"s{k}", columnar_copy=columnar_copy) for k, t in enumerate(tables)]

    def sources(with_stats: bool) -> list[MergeSource]:
        out = []
        for s in splits:
            source = MergeSource.from_bundle(s.path)
            assert source is not None
            out.append(dataclasses.replace(source, stats=(s.min_values, s.max_values)) if with_stats else source)
        return out

    expected = _stats(pa.concat_tables(tables), mapping)
    assert "rare" in expected[0] and "rare" not in splits[1].min_values, "a column null in one source"
    for with_stats in (True, False):
        merged = merge_sources(sources(with_stats), mapping, tmp_path / f"m-{with_stats}")
        files = read_footer(merged.path).files
        parts = [True, True, True, False] if columnar_copy else [False] * 4
        assert [column_part_member(k) in files for k in range(4)] == parts
        got = (merged.min_values, merged.max_values)
        # a source without a column's statistic: none for the merge (fewer files pruned)
        without_rare = tuple({c: v for c, v in side.items() if c != "rare"} for side in expected)
        want = without_rare if with_stats else expected
        assert got == want, with_stats
        searcher = SplitSearcher(merged.path, tmp_path / f"w-{with_stats}", tables[0].schema, None)
        read, written_rows = searcher.rows.read_all(), pa.concat_tables(tables)
        assert read.drop_columns(["score"]).equals(written_rows.drop_columns(["score"]))
        np.testing.assert_array_equal(read.column("score").to_numpy(), written_rows.column("score").to_numpy())


def test_float_values_are_indexed_and_stored_exactly(tmp_path: Path) -> None:
    """Floats reach Tantivy exactly (the native writer hands it the Arrow values): as JSON numbers about
    one float64 in nine was a unit in the last place off, so an equality query on it found nothing
    (17 of 200 such queries before) and its stored, fast and indexed values differed from the row's."""
    values = np.random.default_rng(1).lognormal(3, 1, 2_000)
    rows = pa.table({"i": pa.array(range(2_000), pa.int64()), "x": pa.array(values)})
    searcher = SplitSearcher(
        write_split(rows, mapping_for(rows.schema, {}), tmp_path).path, tmp_path / "w", rows.schema, None
    )
    assert [searcher.count(f"x:{float(v)!r}") for v in values[:300]] == [1] * 300
    assert searcher.rows.read_all().equals(rows)
    stats = searcher.aggregate({"s": {"stats": {"field": "x"}}})["s"]
    assert (stats["min"], stats["max"]) == (values.min(), values.max())


def test_large_string_and_binary_columns_are_written(tmp_path: Path) -> None:
    """Arrow's large types (as pyarrow and pandas make them) index and read back like the small ones."""
    rows = pa.table(
        {
            "name": pa.array(["x y", "z", None], pa.large_string()),
            "body": pa.array(["quick fox", "lazy dog", "fox"], pa.large_string()),
            "raw": pa.array([b"1", None, b"3"], pa.large_binary()),
        }
    )
    options = {"spark.indextables.indexing.typemap.body": "text"}
    written = write_split(rows, mapping_for(rows.schema, options), tmp_path)
    searcher = SplitSearcher(written.path, tmp_path / "w", rows.schema, None)
    assert searcher.rows.read_all().equals(rows)
    assert sorted(map(str, searcher.search("body:fox", ["name"]).column("name").to_pylist())) == ["None", "x y"]
    assert searcher.count("body:fox") == 2 and searcher.search("body:dog", ["name"]).column("name").to_pylist() == ["z"]


def test_statistics_are_written_as_indextables4spark_reads_them(tmp_path: Path) -> None:
    """Found running IndexTables4Spark 0.5.3 beside this project: it parses a timestamp's statistic as
    a Long (microseconds since the epoch) and failed on the ISO text this project wrote; it compares a
    byte or short column's statistics as text (so ``"10" < "9"`` skipped files wrongly), and writes
    none for them itself. Now: timestamps as microseconds, dates as ISO days, no byte/short statistics."""
    import datetime

    utc = datetime.timezone.utc
    rows = pa.table(
        {
            "ts": pa.array(
                [datetime.datetime(2024, 1, 1, tzinfo=utc), datetime.datetime(2024, 1, 1, 0, 59, 59, 59, tzinfo=utc)],
                pa.timestamp("us", tz="UTC"),
            ),
            "naive": pa.array([datetime.datetime(1969, 12, 31, 23, 59, 59, 999_999)] * 2, pa.timestamp("us")),
            "day": pa.array([datetime.date(2024, 1, 2)] * 2, pa.date32()),
            "b": pa.array([9, 10], pa.int8()),
            "s": pa.array([9, 10], pa.int16()),
            "i": pa.array([9, 10], pa.int32()),
        }
    )
    written = write_split(rows, mapping_for(rows.schema, {}), tmp_path)
    assert (written.min_values["ts"], written.max_values["ts"]) == ("1704067200000000", "1704070799000059")
    assert (written.min_values["naive"], written.max_values["naive"]) == ("-1", "-1")
    assert written.min_values["day"] == "2024-01-02"
    assert (written.min_values["i"], written.max_values["i"]) == ("9", "10")
    assert "b" not in written.min_values and "s" not in written.max_values


def test_a_merge_reads_timestamp_statistics_of_either_form(tmp_path: Path) -> None:
    """A merge's statistics come from its sources' (``merge._merged_stats``): a source written before
    (ISO text) and one written now (microseconds) merge to microseconds, with no rows read."""
    import datetime

    from executor_lib.splits.write.merge import _merged_stats
    from executor_lib.splits.write.writer import stat_values

    t = pa.timestamp("us", tz="UTC")
    old = ({"ts": "2024-01-01T00:00:00+00:00"}, {"ts": "2024-01-01T00:59:59.000059+00:00"})
    new = ({"ts": "1704070800000000"}, {"ts": "1704074400000000"})
    mapping = mapping_for(pa.schema([("ts", t)]), {})
    merged = _merged_stats([old, new], mapping, pa.schema([("ts", t)]))
    assert merged == ({"ts": "1704067200000000"}, {"ts": "1704074400000000"})
    utc = datetime.timezone.utc
    assert stat_values(["1704067200000000", "2024-01-01T01:00:00+00:00"], t).to_pylist() == [
        datetime.datetime(2024, 1, 1, tzinfo=utc),
        datetime.datetime(2024, 1, 1, 1, tzinfo=utc),
    ]


def test_a_binary_column_is_indexed_as_indextables4spark_indexes_it(tmp_path: Path) -> None:
    """Found running IndexTables4Spark 0.5.3 beside this project: its ``indexqueryall`` searches every
    indexed field of its doc mapping, and failed on this project's splits ("Field bin is not indexed")
    because binary columns were stored only. They are indexed now (as the JVM does): a term finds them."""
    from indextables_contract import filters as f

    rows = pa.table({"id": pa.array([1, 2], pa.int64()), "blob": pa.array([b"x", b"yz"], pa.binary())})
    mapping = mapping_for(rows.schema, {})
    assert mapping.field("blob").indexed and "blob" not in mapping.default_query_fields()
    written = write_split(rows, mapping, tmp_path)
    assert {m["name"]: m["indexed"] for m in json.loads(written.doc_mapping_json)}["blob"] is True
    searcher = SplitSearcher(written.path, tmp_path / "w", rows.schema, None)
    assert searcher.search(f.Term("blob", b"yz"), ["id"]).column("id").to_pylist() == [2]
