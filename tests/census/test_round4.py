"""The fourth census's cases (issue 70), each reproduced: what a crash, a hostile log line or a pasted
credential did, and what the table does now. The crash cases (N1) run a real Spark job in
``tests/spark/test_commit_crashes.py``; PURGE of a nested table (N3) in ``tests/log/maintenance/test_purge_nested.py``."""

from __future__ import annotations

import random
import string
from typing import Any

import connect_plugin
from indextables_contract.redaction import redact_uri

_SECRET_ALPHABET = string.ascii_letters + string.digits + "/+=@:%-_.!*~$&"
# Every statement form that names a table by its URI and that explain() can describe without running it.
_STATEMENTS = (
    "MERGE SPLITS '{uri}' TARGET SIZE 100M",
    "MERGE SPLITS indextables.`{uri}` WHERE day = '2024-01-01'",
    "PURGE INDEXTABLE '{uri}' OLDER THAN 7 DAYS DRY RUN",
    "PURGE INDEXTABLE '{uri}'",
    "CHECKPOINT INDEXTABLES '{uri}'",
    "DROP INDEXTABLES PARTITIONS FROM '{uri}' WHERE day = '2024-01-01'",
    "DESCRIBE INDEXTABLES STATE '{uri}'",
    "DESCRIBE INDEXTABLES TRANSACTION LOG '{uri}'",
    "TRUNCATE INDEXTABLES TIME TRAVEL '{uri}' DRY RUN",
    "PREWARM INDEXTABLES CACHE '{uri}'",
    "BUILD INDEXTABLES COMPANION FOR PARQUET '{uri}/src' AT LOCATION '{uri}'",
)


def _secrets(seed: int, n: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        secret = "".join(rng.choice(_SECRET_ALPHABET) for _ in range(rng.randint(8, 40)))
        out.append(("AKIA" + "".join(rng.choice(string.ascii_uppercase) for _ in range(12)), secret))
    return out


def test_n6_explain_never_prints_a_credential_written_in_a_table_uri(classic_spark: Any) -> None:
    """Before: 9 of 14 statements printed ``s3://KEY:SECRET@bucket/t`` as written."""
    described = 0
    for key, secret in _secrets(70, 8):
        uri = f"s3://{key}:{secret}@bucket/t"
        for statement in _STATEMENTS:
            text = statement.format(uri=uri)
            try:
                shown = connect_plugin.explain(classic_spark, text)
            except Exception as e:  # a statement explain refuses: its error must not show the secret either
                shown = str(e)
            else:
                described += 1
            assert secret not in shown and key not in shown, (text, shown)
            assert secret not in redact_uri(text)
    assert described >= len(_STATEMENTS)  # the statements were described, not all refused


def _table_with_a_deep_line(root: str) -> None:
    import pyarrow as pa

    import executor_lib
    from executor_lib.splits.doc_mapping import mapping_for
    from executor_lib.splits.write.publish import write_and_upload

    schema = pa.schema([("id", pa.int64()), ("msg", pa.string())])
    log = executor_lib.create_table(root, schema)
    log.commit([write_and_upload(log.store, pa.table({"id": [1], "msg": ["a"]}), mapping_for(schema, {}))])
    deep = '{"add": {"path": "x.split", "tags": ' + '{"a": ' * 100_000 + "1" + "}" * 100_000 + "}}"
    with open(f"{root}/_transaction_log/00000000000000000002.json", "w") as f:
        f.write(deep + "\n")


def test_med_a_log_line_nested_100000_deep_is_a_typed_error_everywhere(tmp_path: Any, capsys: Any) -> None:
    """Before: RecursionError in every reader, writer and the CLI."""
    import time

    import pyarrow as pa
    import pytest

    import executor_lib
    from executor_lib.cli import main as cli_main
    from executor_lib.log.maintenance.purge import purge_table
    from indextables_contract.errors import CorruptLogError

    root = str(tmp_path / "t")
    _table_with_a_deep_line(root)
    bad = "00000000000000000002.json: line 1: JSON nested too deep"
    readers = {
        "snapshot": lambda: executor_lib.open_log(root).snapshot(),
        "history": lambda: executor_lib.open_log(root).history(),
        "purge": lambda: purge_table(executor_lib.open_log(root)),
        "commit": lambda: executor_lib.open_log(root).commit(
            [
                executor_lib.write_and_upload(
                    executor_lib.open_log(root).store,
                    pa.table({"id": [2], "msg": ["b"]}),
                    executor_lib.mapping_for(pa.schema([("id", pa.int64()), ("msg", pa.string())]), {}),
                )
            ]
        ),
    }
    for name, run in readers.items():
        started = time.monotonic()
        with pytest.raises(CorruptLogError, match=bad):
            run()
        assert time.monotonic() - started < 10, name
    assert cli_main(["describe", root]) == 2
    assert bad in capsys.readouterr().err


def test_med_a_size_or_record_count_past_64_bits_is_a_typed_error(tmp_path: Any) -> None:
    """Before: CHECKPOINT and PURGE raised OverflowError (and the snapshot summed it silently)."""
    import json

    import pyarrow as pa
    import pytest

    import executor_lib
    from executor_lib.log.maintenance.purge import purge_table
    from executor_lib.protocol.files import decode_log_bytes
    from indextables_contract.errors import CorruptLogError

    root = str(tmp_path / "t")
    schema = pa.schema([("id", pa.int64()), ("msg", pa.string())])
    log = executor_lib.create_table(root, schema)
    log.commit(
        [
            executor_lib.write_and_upload(
                log.store, pa.table({"id": [1], "msg": ["a"]}), executor_lib.mapping_for(schema, {})
            )
        ]
    )
    with open(f"{root}/_transaction_log/00000000000000000001.json", "rb") as f:
        add = json.loads(decode_log_bytes(f.read(), "v1").splitlines()[-1])["add"]
    for field in ("size", "numRecords"):
        line = json.dumps({"add": {**add, "path": f"splits/huge-{field}.split", field: 10**40}})
        with open(f"{root}/_transaction_log/00000000000000000002.json", "w") as f:
            f.write(line + "\n")
        bad = f"line 1: add.{field} 1{'0' * 39} is outside the 64-bit integer range"
        for run in (
            lambda: executor_lib.open_log(root).snapshot(),
            lambda: executor_lib.open_log(root).checkpoint(),
            lambda: purge_table(executor_lib.open_log(root)),
        ):
            with pytest.raises(CorruptLogError, match=bad):
                run()


def test_n5_an_endpoint_written_with_userinfo_and_no_scheme_never_echoes_the_password() -> None:
    """Before: ``admin:PW@host:9000`` reached botocore, whose bare ValueError printed the password."""
    import pytest

    import executor_lib
    from indextables_contract.errors import ConfigError

    for user, secret in _secrets(5, 20):
        for endpoint in (f"{user}:{secret}@127.0.0.1:9000", f"http://{user}:{secret}@127.0.0.1:9000"):
            with pytest.raises(ConfigError) as raised:
                executor_lib.open_log("s3://bucket/t", endpoint_url=endpoint)
            shown = str(raised.value) + repr(raised.value.__cause__) + repr(raised.value.__context__)
            assert secret not in shown and "endpoint carries credentials" in shown
    with pytest.raises(ConfigError, match=r"endpoint_url='127.0.0.1:9000': the endpoint must be a URL"):
        executor_lib.open_log("s3://bucket/t", endpoint_url="127.0.0.1:9000")


def test_med_a_nul_byte_in_a_table_path_is_a_typed_error() -> None:
    """Before: a bare ValueError ("embedded null byte") from the OS, e.g. for MERGE SPLITS '/t\\x00x'."""
    import pytest

    import executor_lib
    from indextables_contract.errors import ConfigError

    for uri in ("/tmp/t\x00x", "s3://bucket/t\x00x", "abfss://c@account.dfs.core.windows.net/t\x00x"):
        with pytest.raises(ConfigError, match="holds a control character"):
            executor_lib.open_log(uri)


def test_n2_committing_a_live_add_again_is_refused_and_no_row_is_read_twice(table: Any, tmp_path: Any) -> None:
    """Before: a second commit of the same AddAction (a retry of a commit that had landed) was accepted,
    and every row of the split was then returned twice; in a full-URI spelling (N10) likewise."""
    import dataclasses

    import pyarrow as pa
    import pytest

    import executor_lib
    from executor_lib.cache.split_cache import SplitCache
    from executor_lib.splits.search.table_search import search_table
    from indextables_contract.errors import InvalidActionError

    uri, options = table
    schema = pa.schema([("id", pa.int64()), ("msg", pa.string())])
    log = executor_lib.create_table(uri, schema, **options)
    add = executor_lib.write_and_upload(
        log.store, pa.table({"id": [1, 2], "msg": ["a", "b"]}), executor_lib.mapping_for(schema, {})
    )
    log.commit([add])
    for again in (add, dataclasses.replace(add, path=f"{log.uri}/{add.path}")):
        with pytest.raises(InvalidActionError, match="already live"):
            executor_lib.open_log(uri, **options).commit([again])
    snapshot = executor_lib.open_log(uri, **options).snapshot()
    assert [a.path for a in snapshot.files] == [add.path] and snapshot.version == 1
    rows = search_table(log.store, snapshot, None, SplitCache(tmp_path / "cache"))
    assert sorted(rows.column("id").to_pylist()) == [1, 2]


def _long_wildcards(seed: int, n: int) -> list[str]:
    """Wildcard words of hundreds to thousands of characters, as the SQL fuzz drew them."""
    rng = random.Random(seed)
    out = ["a*" * 400, "*" + "ab?" * 300 + "*", "?" * 2000, "x" * 3000 + "*", "*a" * 1500]
    while len(out) < n:
        piece = "".join(rng.choice("ab*?") for _ in range(rng.randint(2, 6)))
        out.append(piece * rng.randint(100, 800))
    return out


def test_med_a_long_wildcard_in_sql_is_a_typed_query_error(classic_spark: Any, tmp_path: Any) -> None:
    """Before: 36 of 2,000 fuzzed SQL queries with long wildcards were a bare ValueError through
    ``connect_plugin.sql`` where ``search_table`` gave a typed QueryError."""
    import time

    import pyarrow as pa
    import pytest

    import executor_lib
    from indextables_contract.errors import QueryError

    schema = pa.schema([("id", pa.int64()), ("msg", pa.string())])
    uri = str(tmp_path / "t")
    log = executor_lib.create_table(uri, schema)
    mapping = executor_lib.mapping_for(schema, {"spark.indextables.indexing.typemap.msg": "text"})
    log.commit([executor_lib.write_and_upload(log.store, pa.table({"id": [1, 2], "msg": ["ab", "ba"]}), mapping)])
    count = f"SELECT count(*) FROM indextables.`{uri}` WHERE "
    assert connect_plugin.sql(classic_spark, count + "msg indexquery 'a*'").collect()[0][0] == 1  # warm
    for pattern in _long_wildcards(70, 8):
        for where in (f"msg indexquery '{pattern}'", f"_indexall indexquery 'msg:{pattern}'"):
            started = time.monotonic()
            with pytest.raises(QueryError, match="query"):
                connect_plugin.sql(classic_spark, count + where).collect()
            assert time.monotonic() - started < 10, where[:80]


def test_low_a_flipped_bit_in_the_checksum_members_name_is_a_corrupt_split(tmp_path: Any) -> None:
    """Before: a flipped bit in the footer's name of ``indextables.checksums.json`` made the split look
    written before member checksums: every other member went unchecked, silently. Every single-bit flip of
    that name is now a CorruptSplitError (most as a damaged name, the rest as a footer that does not parse),
    and a split without the member at all (IndexTables4Spark's, or this project's older ones) still reads."""
    from pathlib import Path

    import pyarrow as pa
    import pytest

    from executor_lib.format.quickwit.bundle import CHECKSUMS_MEMBER, read_footer, write_bundle
    from executor_lib.splits.doc_mapping import mapping_for
    from executor_lib.splits.write.writer import write_split
    from indextables_contract.errors import CorruptSplitError

    rows = pa.table({"id": pa.array([1, 2], pa.int64()), "msg": ["a", "b"]})
    split = Path(write_split(rows, mapping_for(rows.schema, {}), tmp_path / "o").path)
    data = split.read_bytes()
    footer = read_footer(split)
    at = data.index(CHECKSUMS_MEMBER.encode(), footer.footer_start)  # in the footer's JSON
    flipped = tmp_path / "flipped.split"
    for i in range(len(CHECKSUMS_MEMBER)):
        for bit in range(8):
            damaged = bytearray(data)
            damaged[at + i] ^= 1 << bit
            flipped.write_bytes(bytes(damaged))
            with pytest.raises(CorruptSplitError, match=str(flipped)):
                read_footer(flipped)
    older = {n: data[s:e] for n, (s, e) in footer.files.items() if n != CHECKSUMS_MEMBER}
    write_bundle(older, tmp_path / "older.split", checksums=False)
    assert CHECKSUMS_MEMBER not in read_footer(tmp_path / "older.split").files


def test_low_a_negative_size_or_record_count_is_a_corrupt_log(tmp_path: Any) -> None:
    """Before: a negative ``numRecords`` or ``size`` was trusted (summed into the totals, planned with). Now a
    version line holding one is CorruptLogError naming its version file, and an Avro manifest holding one
    is refused column-wise (one ``min`` per column) naming the manifest, whether read from its sidecar or
    decoded."""
    import dataclasses
    import hashlib
    import json

    import pyarrow as pa
    import pytest

    import executor_lib
    from executor_lib.log.config import LogConfig
    from executor_lib.log.files import file_table
    from executor_lib.log.state.avro_state import decode_manifest_chunk
    from executor_lib.log.state.manifest_columns import decode_sidecar, sidecar_key
    from executor_lib.log.state.state_writer import write_manifest
    from executor_lib.protocol.files import decode_log_bytes
    from indextables_contract.errors import CorruptLogError

    root = str(tmp_path / "t")
    schema = pa.schema([("id", pa.int64()), ("msg", pa.string())])
    log = executor_lib.create_table(root, schema)
    good = executor_lib.write_and_upload(
        log.store, pa.table({"id": [1], "msg": ["a"]}), executor_lib.mapping_for(schema, {})
    )
    log.commit([good])
    with open(f"{root}/_transaction_log/00000000000000000001.json", "rb") as f:
        add = json.loads(decode_log_bytes(f.read(), "v1").splitlines()[-1])["add"]
    for field in ("size", "numRecords"):
        with open(f"{root}/_transaction_log/00000000000000000002.json", "w") as f:
            f.write(json.dumps({"add": {**add, "path": f"splits/negative-{field}.split", field: -5}}) + "\n")
        for run in (lambda: executor_lib.open_log(root).snapshot(), lambda: executor_lib.open_log(root).checkpoint()):
            with pytest.raises(CorruptLogError, match=rf"00000000000000000002\.json.*add\.{field} -5 is negative"):
                run()
    store = log.store
    for field in ("size", "numRecords"):
        path = f"splits/negative-{field}.split"
        bad = (
            dataclasses.replace(good, path=path, size=-7)
            if field == "size"
            else dataclasses.replace(good, path=path, num_records=-7)
        )
        with pytest.MonkeyPatch.context() as patch:  # a writer refuses it too: write it as a hostile one would
            patch.setattr(file_table, "check_counts", lambda columns: None)
            info = write_manifest(store, [(good, 1, 0), (bad, 1, 0)], LogConfig())
        key = f"_transaction_log/{info.path}"
        data = store.read(key)
        with pytest.raises(CorruptLogError, match=rf"{info.path}.*add\.{field} -7 is negative.*negative-{field}"):
            decode_manifest_chunk(data, store.uri_of(key))
        assert store.exists(sidecar_key(key))  # a sidecar holding it is not used: the Avro's error is raised
        assert decode_sidecar(store.read(sidecar_key(key)), hashlib.sha256(data).hexdigest(), key) is None


def test_med_the_wildcard_bound_leaves_phrases_and_escaped_characters_alone() -> None:
    """The bound on wildcard words (``check_wildcard_sizes``) refuses only words Tantivy would build an
    automaton for: a long quoted URL with ``?`` in it, or escaped ``\\?``, is a phrase or a term."""
    import pytest

    from executor_lib.splits.query.syntax import WILDCARD_CHARS, check_wildcard_sizes
    from indextables_contract.errors import QueryError

    url = '"https://example.com/' + "a" * 300 + '?x=1"'
    for fine in (url, f"msg:{url}", "ab\\?" * 100, "a*" * (WILDCARD_CHARS // 2), "word " * 1000):
        check_wildcard_sizes(fine)
    for text in ("a*" * 200, "msg:(" + "a?" * 200 + ")", url + " " + "*b" * 200):
        with pytest.raises(QueryError, match=r"the wildcard at position \d+ is \d+ characters long"):
            check_wildcard_sizes(text)


def test_med_the_wildcard_bound_holds_on_every_path_to_a_search() -> None:
    """``compile_query`` itself refuses a wildcard word past the bound (every search compiles through
    it, also those no driver-side ``check_query`` saw first), before Tantivy builds an automaton."""
    import pyarrow as pa
    import pytest
    import tantivy

    import executor_lib
    from executor_lib.splits.query.check import tantivy_schema
    from executor_lib.splits.query.compile import compile_query
    from executor_lib.splits.tokenizers import register
    from indextables_contract import filters
    from indextables_contract.errors import QueryError

    mapping = executor_lib.mapping_for(
        pa.schema([("msg", pa.string())]), {"spark.indextables.indexing.typemap.msg": "text"}
    )
    index = register(tantivy.Index(tantivy_schema(mapping)), mapping.fields)
    compile_query(index, mapping, filters.QueryString("conn*", "msg"), [])
    for plan in (False, True):
        with pytest.raises(QueryError, match=r"the wildcard at position 0 is 400 characters long"):
            compile_query(index, mapping, filters.QueryString("a*" * 200, "msg"), [], plan=plan)


def test_n2_a_reader_refuses_a_log_adding_a_live_split_again_or_a_file_outside_the_table(
    table: Any, tmp_path: Any
) -> None:
    """Before: a version file (or checkpoint, or Avro state) adding a live split again under another
    spelling (the table root's full URI joined with its path) was replayed as a second file: every row
    of the split was read twice; a ``..`` path or another location's URI reached the store. Now each is a
    CorruptLogError naming the version file (checkpoint, state manifest) and the path; the same spelling
    again is still a replacement (Delta's rule), read once."""
    import json

    import pyarrow as pa
    import pytest

    import executor_lib
    from executor_lib.cache.split_cache import SplitCache
    from executor_lib.log.config import LogConfig
    from executor_lib.log.state.state_writer import build_compacted_state, put_state
    from executor_lib.protocol.actions import AddAction
    from executor_lib.protocol.files import decode_log_bytes
    from executor_lib.splits.search.table_search import search_table
    from indextables_contract.errors import CorruptLogError

    uri, options = table
    schema = pa.schema([("id", pa.int64()), ("msg", pa.string())])
    rows = pa.table({"id": [1, 2], "msg": ["a", "b"]})
    for n, (spelling, where) in enumerate(
        (s, w)
        for s in ("full URI", "dot-dot", "outside", "another table's URI", "same")
        for w in ("version", "checkpoint", "state")
        if (s, w) != ("same", "state")  # one path twice in one state: not a question of spellings
    ):
        root = f"{uri}/{n}"
        log = executor_lib.create_table(root, schema, **options)
        store = log.store
        good = executor_lib.write_and_upload(store, rows, executor_lib.mapping_for(schema, {}))
        log.commit([good])
        lines = [decode_log_bytes(store.read(f"_transaction_log/{v:020d}.json"), "v").splitlines() for v in (0, 1)]
        add = json.loads(lines[1][-1])["add"]
        path = {
            "full URI": f"{log.uri}/{add['path']}",
            "dot-dot": f"x/../{add['path']}",
            "outside": f"../other/{add['path']}",
            "another table's URI": f"{log.uri}-other/{add['path']}",
            "same": add["path"],
        }[spelling]
        again = json.dumps({"add": {**add, "path": path}})
        if where == "version":
            source = "_transaction_log/00000000000000000002.json"
            store.put(source, (again + "\n").encode())
        elif where == "checkpoint":
            source = "_transaction_log/00000000000000000002.checkpoint.json"
            store.put(source, ("\n".join([*lines[0], lines[1][-1], again]) + "\n").encode())
        else:
            snap = log.snapshot()
            hostile = AddAction.from_json_dict(json.loads(again)["add"])
            manifest = build_compacted_state(
                store, 2, [*snap.files, hostile], snap.metadata, dict(snap.schema_registry), LogConfig()
            )
            put_state(store, manifest, snap.protocol, LogConfig())
            source = f"_transaction_log/state-v{2:020d}"
        read = executor_lib.open_log(root, **options)
        if spelling == "same":
            snapshot = read.snapshot()
            assert [a.path for a in snapshot.files] == [add["path"]], where
            found = search_table(store, snapshot, None, SplitCache(tmp_path / "cache"))
            assert sorted(found.column("id").to_pylist()) == [1, 2], where
            continue
        with pytest.raises(CorruptLogError) as raised:
            read.snapshot()
        message = str(raised.value)
        assert source in message and repr(path) in message, (spelling, where, message)
        if spelling == "full URI":
            assert "already live" in message, message
