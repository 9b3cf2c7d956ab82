"""The ``indextables`` command: describe, history, checkpoint, cleanup, search, cache, and a small demo.

Storage options are passed as ``-o key=value`` (e.g. ``-o endpoint_url=http://127.0.0.1:9000``);
S3 credentials may also come from the usual AWS environment variables. Output never
contains credentials.
"""

from __future__ import annotations

import argparse
import difflib
import json
import shlex
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from executor_lib.log.maintenance.describe import describe_json
from executor_lib.storage.base import redact_uri
from indextables_contract import settings as S
from indextables_contract.errors import IndexTablesError, QueryError
from indextables_contract.version import VERSION

if TYPE_CHECKING:
    from executor_lib.cache.split_cache import SplitCache
    from executor_lib.log.snapshot import Snapshot
    from executor_lib.protocol.actions import AddAction
    from executor_lib.storage.base import ObjectStore


def option_names() -> frozenset[str]:
    """The keys ``-o key=value`` takes: the log's settings and the storage options."""
    from executor_lib.log.config import OPTION_NAMES
    from executor_lib.storage import STORAGE_OPTION_NAMES

    return frozenset({S.PREFIX + name for name in OPTION_NAMES} | set(STORAGE_OPTION_NAMES))


def _options(pairs: Sequence[str]) -> dict[str, str]:
    """``-o key=value`` pairs. A key no log or storage setting has is an error naming the closest one
    (the library ignores unknown ``spark.indextables.*`` keys, as Spark sessions pass every setting to
    every operation, but a key typed on a command line is meant for this command)."""
    known = option_names()
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"indextables: option {pair!r} must look like key=value")
        if key not in known:
            from indextables_contract import settings

            if (settings.lookup(key) or settings.Setting("", "", "", "")).status == settings.NO_EFFECT:
                settings.warn_no_effect(key)  # a JVM-only key (from a spark-defaults.conf): one warning
                continue
            close = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise SystemExit(f"indextables: unknown option {key!r}{hint}")
        out[key] = value
    return out


def _print_describe(doc: dict[str, Any]) -> None:
    print(f"table:             {doc['table']}")
    print(f"version:           {doc['version']} (built from {doc['builtFrom']})")
    print(f"table id:          {doc['tableId']}")
    p = doc["protocol"]
    print(f"protocol:          reader v{p['minReaderVersion']}, writer v{p['minWriterVersion']}")
    print(f"partition columns: {', '.join(doc['partitionColumns']) or '(none)'}")
    cols = ", ".join(
        f"{f['name']}:{f['type'] if isinstance(f['type'], str) else f['type']['type']}" for f in doc["schema"]["fields"]
    )
    print(f"schema:            {cols}")
    print(f"files:             {doc['numFiles']}")
    print(f"records:           {doc['numRecords']}")
    print(f"size:              {doc['sizeInBytes']} bytes")
    if doc["stateFormat"] == "avro-state":
        print(
            f"state:             {doc['stateDir']} ({doc['numManifests']} manifests, {doc['numTombstones']} tombstones)"
        )


def cmd_describe(args: argparse.Namespace) -> int:
    from executor_lib.log.tables import open_log

    log = open_log(args.table, **_options(args.option))
    snapshot = log.snapshot(version=args.version, timestamp_ms=args.timestamp)
    doc = describe_json(snapshot)
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        _print_describe(doc)
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    from executor_lib.log.tables import open_log

    log = open_log(args.table, **_options(args.option))
    entries = log.history(limit=args.limit)
    if args.json:
        print(json.dumps([e.to_json() for e in entries], indent=2))
        return 0
    columns = f"{'+files':>7} {'-files':>7} {'+records':>9} {'-records':>9}"
    print(f"{'version':>8}  {'timestamp':<24} {'operation':<14} {columns}")
    for e in entries:
        ts = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(e.timestamp_ms / 1000)) if e.timestamp_ms else "-"
        removed = _removed_records(log, e.version) if e.num_removed_files else "0"
        print(
            f"{e.version:>8}  {ts:<24} {e.operation or '-':<14} {e.num_added_files:>7} "
            f"{e.num_removed_files:>7} {e.num_added_records:>9} {removed:>9}"
        )
    return 0


def _removed_records(log: Any, version: int) -> str:
    """Records of the files ``version`` removed, from the previous version's adds; '?' when that
    version can no longer be read (e.g. its log files were cleaned up)."""
    from executor_lib.log.state.version_files import read_version_actions
    from executor_lib.protocol.actions import RemoveAction

    try:
        removed = {a.path for a in read_version_actions(log.store, version) if isinstance(a, RemoveAction)}
        before = log.snapshot(version=version - 1)
    except IndexTablesError:
        return "?"
    import pyarrow as pa
    import pyarrow.compute as pc

    files = before.file_columns(["path", "num_records"])  # no object per live file
    chosen = files.filter(pc.is_in(files.column("path"), value_set=pa.array(sorted(removed), pa.string())))
    return str(int(pc.sum(chosen.column("num_records")).as_py() or 0))


def cmd_checkpoint(args: argparse.Namespace) -> int:
    from executor_lib.log.tables import open_log

    info = open_log(args.table, **_options(args.option)).checkpoint()
    print(json.dumps({"version": info.version, "format": info.format, "numFiles": info.num_files}))
    return 0


def cmd_cleanup(args: argparse.Namespace) -> int:
    from executor_lib.log.tables import open_log

    report = open_log(args.table, **_options(args.option)).cleanup(dry_run=args.dry_run)
    print(json.dumps(report.to_json(), indent=2))
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    from executor_lib.log.tables import open_log
    from executor_lib.splits.search.table_search import search_table

    log = open_log(args.table, **_options(args.option))
    columns = [c.strip() for c in args.columns.split(",")] if args.columns else None
    snapshot, cache = log.snapshot(), _cache(args)
    query, files = _partition_parts(snapshot, args.query)
    scored = query is not None and query.strip() not in ("", "*")  # a query's matches come best first, with _score
    rows = search_table(log.store, snapshot, query, cache, columns, args.limit, scored=scored, files=files)
    if args.json:
        for row in rows.to_pylist():
            print(json.dumps(row, default=str))
    else:
        print("\t".join(rows.column_names))
        for row in rows.to_pylist():
            print("\t".join("" if v is None else str(v) for v in row.values()))
        total = _count_hits(log.store, snapshot, query, cache, files)
        print(f"({rows.num_rows} rows shown of {total} hits)")
    return 0


def _partition_parts(snapshot: Snapshot, query: str) -> tuple[str | None, list[AddAction]]:
    """The query the splits' indexes answer and the live splits to search: parts of ``query`` on
    partition columns choose the splits by their partition values (``splits.search.partition_query``);
    a field that is no column of the table is a QueryError naming it."""
    from executor_lib.splits.search.partition_query import partition_files, query_fields, split_query

    schema = snapshot.arrow_schema()
    # a column, or a path into one (a struct's field, a JSON field's key)
    unknown = sorted(f for f in query_fields(query) if f not in schema.names and f.split(".")[0] not in schema.names)
    if unknown:
        close = difflib.get_close_matches(unknown[0], schema.names, n=1)
        hint = f"did you mean {close[0]!r}?; " if close else ""
        raise QueryError(
            f"query {query!r}: field {unknown[0]!r} is not a column of the table ({hint}its columns: "
            f"{', '.join(schema.names)})"
        )
    parts = split_query(query, snapshot.partition_columns)
    return parts.query, partition_files(snapshot, parts.filters)


def _count_hits(
    store: ObjectStore,
    snapshot: Snapshot,
    query: str | None,
    cache: SplitCache,
    files: Sequence[AddAction] | None = None,
) -> int:
    """Every live split's (or ``files``') hit count for ``query`` (Tantivy counts; no documents are
    read), through the searchers the search just kept open."""
    from executor_lib.protocol.actions import parquet_table_root
    from executor_lib.splits.search.split_opening import open_searcher

    schema, root = snapshot.arrow_schema(), parquet_table_root(snapshot.metadata.configuration)
    return sum(
        open_searcher(
            cache, store, add.path, schema, snapshot.doc_mapping(add), add.size, add.footer_start_offset, root
        ).count(query)
        for add in (snapshot.files if files is None else files)
    )


def _cache(args: argparse.Namespace) -> Any:
    from executor_lib.cache.split_cache import SplitCache, default_cache

    return SplitCache(Path(args.cache_dir)) if args.cache_dir else default_cache()


def cmd_cache(args: argparse.Namespace) -> int:
    cache = _cache(args)
    if args.action == "flush":
        cache.flush()
    print(json.dumps(cache.describe(), indent=2))
    return 0


_DEMO_WORDS = ("timeout", "retry", "connection", "reset", "upstream", "declined", "cache", "miss", "slow", "ok")
_DEMO_DAYS = ("2024-01-01", "2024-01-02", "2024-01-03")
DEMO_ROWS_PER_DAY = 1000


def demo_rows(day_index: int, rows: int = DEMO_ROWS_PER_DAY) -> Any:
    """One day of the demo table: ids ``day_index*rows ..``, a message of two words, a level."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ids = pa.array(range(day_index * rows, (day_index + 1) * rows), pa.int64())
    words = pa.array(_DEMO_WORDS)
    first = pc.take(words, pc.remainder(ids, len(_DEMO_WORDS)))
    second = pc.take(words, pc.remainder(pc.divide(ids, 10), len(_DEMO_WORDS)))
    message = pc.binary_join_element_wise("request", pc.cast(ids, pa.string()), first, second, " ")
    level = pc.if_else(pc.equal(pc.remainder(ids, 37), 0), "ERROR", "INFO")
    return pa.table({"id": ids, "message": message, "level": level})


def cmd_demo(args: argparse.Namespace) -> int:
    """A small table without Spark: three daily appends of real splits (indexed with Tantivy),
    then its description and a search. The main job, on Spark, is ``python -m indextables_demo``."""
    import pyarrow as pa

    from executor_lib.log.tables import create_table, open_log
    from executor_lib.splits.doc_mapping import mapping_for
    from executor_lib.splits.write.publish import write_and_upload

    path = args.path or tempfile.mkdtemp(prefix="indextables-demo-") + "/events"
    schema = pa.schema([("id", pa.int64()), ("message", pa.string()), ("level", pa.string()), ("date", pa.string())])
    log = create_table(path, schema, partition_columns=["date"], name="events")
    mapping = mapping_for(schema, {S.INDEXING_TYPEMAP.prefix + "message": "text"}, ["date"])
    for i, day in enumerate(_DEMO_DAYS):
        log.commit([write_and_upload(log.store, demo_rows(i), mapping, {"date": day})])
    print(f"demo table written to {path}\n")
    _print_describe(describe_json(open_log(path).snapshot()))
    query = "message:timeout AND level:ERROR"
    print(f"\nhits for {query!r}: {_count_hits(log.store, log.snapshot(), query, _cache(args))}")
    print(f"try: indextables search {shlex.quote(path)} {shlex.quote(query)} --limit 5")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="indextables", description="Inspect and maintain IndexTables tables.")
    parser.add_argument("--version", action="version", version=f"indextables {VERSION}", help="print the version")
    sub = parser.add_subparsers(dest="command", required=True)

    def table_command(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text)
        p.add_argument("table", help="table path or URI (local path, file://, s3://bucket/prefix, gs://bucket/prefix)")
        p.add_argument(
            "-o",
            "--option",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="storage or log option (repeatable)",
        )
        return p

    d = table_command("describe", "show a table's version, files and records")
    d.add_argument("--version", type=int, default=None, help="describe this version (time travel)")
    d.add_argument("--timestamp", type=int, default=None, help="newest version at or before this epoch-ms time")
    d.add_argument("--json", action="store_true", help="print one JSON object")
    d.set_defaults(func=cmd_describe)

    h = table_command("history", "list commits, newest first")
    h.add_argument("--limit", type=_non_negative_int, default=None)
    h.add_argument("--json", action="store_true")
    h.set_defaults(func=cmd_history)

    c = table_command("checkpoint", "write a checkpoint of the latest version")
    c.set_defaults(func=cmd_checkpoint)

    k = table_command("cleanup", "delete old states, unreferenced manifests and expired log files")
    k.add_argument("--dry-run", action="store_true", help="only report what would be deleted")
    k.set_defaults(func=cmd_cleanup)

    s = table_command(
        "search", "search a table's live splits in this process (Tantivy query syntax), best first by _score (BM25)"
    )
    s.add_argument("query", help="Tantivy query, e.g. 'message:error AND id:[1 TO 9]'; '*' matches all")
    s.add_argument("--columns", default=None, help="comma-separated columns to return (default: all)")
    s.add_argument("--limit", type=_non_negative_int, default=None, help="at most this many rows (>= 0)")
    s.add_argument("--json", action="store_true", help="one JSON object per row")
    s.add_argument("--cache-dir", default=None, help="split cache directory (default: INDEXTABLES_CACHE_DIR or tmp)")
    s.set_defaults(func=cmd_search)

    cache = sub.add_parser("cache", help="describe or flush this node's split cache")
    cache.add_argument("action", choices=["describe", "flush"])
    cache.add_argument("--cache-dir", default=None)
    cache.set_defaults(func=cmd_cache)

    demo = sub.add_parser("demo", help="create a small indexed table on the local filesystem (no Spark) and search it")
    demo.add_argument("--path", default=None, help="where to create it (default: a new temporary directory)")
    demo.add_argument("--cache-dir", default=None, help="split cache directory (default: INDEXTABLES_CACHE_DIR or tmp)")
    demo.set_defaults(func=cmd_demo)
    return parser


def _non_negative_int(text: str) -> int:
    """``--limit``: a whole number >= 0 (argparse reports the option and the value otherwise)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative; give a limit of 0 or more")
    return value


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse ``argv``; an unknown argument after a subcommand is reported with that subcommand's usage."""
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:
        subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        subparsers.choices[args.command].error(f"unrecognized arguments: {' '.join(extras)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    try:
        return int(args.func(args))
    except IndexTablesError as e:
        print(f"indextables: error: {redact_uri(str(e))}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
