"""``IndexTable``: the table API (Delta Lake's ``DeltaTable`` is the model).

Every method builds Spark work over the ``indextables`` data source (a read with a
``command`` option, or for merges a read of the plan written back with ``command=merge``),
so it runs on the cluster; nothing here imports tantivy or touches storage.

No surprises, as in ``DeltaTable``:

* a method with a side effect (``checkpoint``, ``merge_splits``, ``purge``, ``truncate_time_travel``,
  ``drop_partitions``, ``prewarm``, ``flush_cache``, ``build_companion``) runs at once, exactly once,
  and returns its result rows (a small local DataFrame: showing or collecting it runs nothing again);
  the destructive ones say what their dry run does;
* a read (``to_df``, ``search``, ``group_by``, ``history``, ``describe_state``) is a lazy DataFrame,
  run when an action asks for rows; ``count`` and ``aggregate`` return values;
* a row condition is called ``where`` everywhere (filter nodes, their JSON form, or SQL predicate
  text); ``query`` is only ever Tantivy query-string text (``search``, ``count``, ``aggregate``).

    t = IndexTable.for_path(spark, "s3://bucket/logs")
    t.search("message:timeout", columns=["ts", "message"], limit=20).show()
    t.merge_splits(target_size="1G").show()
    t.purge(older_than_hours=168, dry_run=True).show()
"""

from __future__ import annotations

import json
import uuid
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from connect_plugin import session as _plugin
from connect_plugin.failures import project_error_first
from connect_plugin.grammar import parse_measure
from connect_plugin.plan import command_frame, local_frame
from connect_plugin.settings import merged_options
from connect_plugin.where import Where
from connect_plugin.where import to_filter as _where
from indextables_contract import FORMAT
from indextables_contract import commands as C
from indextables_contract import filters as F
from indextables_contract.errors import ConfigError, IndexTablesSQLError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from connect_plugin.merge_into import MergeBuilder


class IndexTable:
    """One table: its reads (pushed to the executors), pushed aggregates and maintenance commands.
    Each method builds Spark work that runs on the cluster; reads are lazy DataFrames, commands run
    at once and return their result rows as DataFrames with the schemas of ``indextables_contract.commands``.

    Example: ``IndexTable.for_path(spark, "s3://b/logs").search("message:timeout", limit=10).show()``
    """

    def __init__(self, spark: SparkSession, path: str, options: Mapping[str, Any] | None = None) -> None:
        self.spark = spark
        self.path = path
        self.options = dict(options or {})

    @classmethod
    def for_path(cls, spark: SparkSession, path: str, options: Mapping[str, Any] | None = None) -> IndexTable:
        """The table at ``path``; ``options`` (storage settings, ...) go with every read and command.

        Example: ``t = IndexTable.for_path(spark, "s3://b/logs", {"spark.indextables.aws.region": "eu-west-1"})``
        """
        _plugin.install(spark)
        return cls(spark, path, options)

    @classmethod
    def for_name(cls, spark: SparkSession, name: str, options: Mapping[str, Any] | None = None) -> IndexTable:
        """The table a name stands for (``spark.indextables.table.<name>``, see ``register_table``).

        Raises:
            UnknownTableError: the name is not defined.

        Example: ``IndexTable.for_name(spark, "logs").count()``
        """
        return cls.for_path(spark, _plugin.resolve_table(spark, name), options)

    # -- data --

    def to_df(
        self,
        columns: Iterable[str] | None = None,
        where: Where | None = None,
        limit: int | None = None,
        version_as_of: int | None = None,
        timestamp_as_of: str | None = None,
        *,
        filter: Where | None = None,
    ) -> DataFrame:
        """The table's rows as a lazy DataFrame: only ``columns``, only rows matching ``where`` (a filter
        tree, or SQL predicate text as in a WHERE clause), at most ``limit`` — all pushed to the executors.
        ``filter`` is the old name of ``where`` (deprecated: a DeprecationWarning).

        Raises:
            ConfigError: both ``where`` and ``filter`` given.
            FilterError / IndexTablesSQLError: a malformed condition (on the client, before anything runs).

        Example: ``t.to_df(columns=["id", "level"], where="level = 'ERROR' AND latency > 100", limit=10)``
        """
        where = _renamed(self.to_df, "filter", filter, where)
        return _plugin.read(
            self.spark,
            self.path,
            columns=columns,
            limit=limit,
            filter=None if where is None else _where(where),
            version_as_of=version_as_of,
            timestamp_as_of=timestamp_as_of,
            options=self.options,
        )

    def group_by(self, columns: Iterable[str], measures: Mapping[str, str], where: Where | None = None) -> DataFrame:
        """``SELECT columns..., measures... [WHERE where] GROUP BY columns`` run on the executors (Tantivy
        aggregations where the index answers exactly, Arrow otherwise) — the plan ``sql`` pushes.

        ``measures``: output name -> ``count(*)``, ``count(col)``, ``sum(col)``, ``avg(col)``, ``min(col)`` or
        ``max(col)``. Example: ``t.group_by(["level"], {"n": "count(*)", "p50": "avg(latency)"})``
        """
        from connect_plugin.plan import AggregateRead, OutputColumn, options_tuple
        from indextables_contract.aggregate import AggregatePlan

        group = tuple(columns)
        parsed = [parse_measure(text) for text in measures.values()]
        outputs = [OutputColumn(c, group=i) for i, c in enumerate(group)]
        outputs += [OutputColumn(name, measure=i) for i, name in enumerate(measures)]
        filter_json = None if where is None else F.to_text(_where(where))
        plan = AggregateRead(
            self.path,
            AggregatePlan(group, tuple(parsed), filter_json),
            tuple(outputs),
            options=options_tuple(self.options),
        )
        with project_error_first():
            df = plan.run(self.spark)
        if df is None:
            wanted = list(measures.values())
            raise IndexTablesSQLError(f"group_by on {self.path}: {wanted} cannot be typed as Spark does")
        return df

    def search(
        self,
        query: str,
        columns: Iterable[str] | None = None,
        limit: int | None = None,
        snippets: Iterable[str] = (),
        snippet_tags: tuple[str, str] | None = None,
    ) -> DataFrame:
        """Rows matching a Tantivy query over every text field (``field:term`` syntax works too), best
        first: ordered by their BM25 score, ``_score`` (a float, the last column), scored with the
        statistics of every split the query reads (as one index over the table would score them).
        With ``limit``, each task returns only its best ``limit`` rows. ``snippets``: text columns whose
        fragment around the matches to add as ``_snippet_<column>`` (matches between ``snippet_tags``,
        default ``("<b>", "</b>")``).

        Raises:
            QueryError (when the query runs): a query the table's fields cannot answer.

        Example: ``t.search("message:timeout AND level:ERROR", columns=["ts", "message"], limit=20)``
        """
        from connect_plugin.plan import TableRead, options_tuple
        from indextables_contract.read import SCORE_COLUMN, SNIPPET_PREFIX, SNIPPET_TAGS, ReadPlan

        added = (SCORE_COLUMN, *(SNIPPET_PREFIX + c for c in snippets))
        wanted = None if columns is None else tuple(c for c in columns if c.lower() not in added)
        if wanted:
            plan = ReadPlan(columns=(*wanted, *added), filter=F.QueryString(query), top_k=limit)
        else:
            plan = ReadPlan(required_columns=("*", *added), filter=F.QueryString(query), top_k=limit)
        options = dict(self.options)
        if snippet_tags is not None:
            options[SNIPPET_TAGS] = json.dumps(list(snippet_tags))
        with project_error_first():
            df = TableRead(self.path, plan, options_tuple(options)).dataframe(self.spark)
            df = df.orderBy(SCORE_COLUMN, ascending=False)
            if limit is not None:
                df = df.limit(limit)
            if type(self.spark).__module__.startswith("pyspark.sql.connect"):
                df.columns  # noqa: B018  analysed here (a bad query fails now), as connect_plugin.read
            return df

    def count(self, query: str | None = None, where: Where | None = None) -> int:
        """Rows matching a Tantivy query string and/or a row condition ``where`` (no condition: all rows,
        counted from the transaction log, opening no split).

        Example: ``t.count()``, ``t.count("message:timeout")``, ``t.count(where="level = 'ERROR'")``
        """
        return int(self.group_by([], {"n": "count(*)"}, where=_both(query, where)).collect()[0][0])

    def aggregate(
        self,
        aggregations: Mapping[str, Any],
        query: str | F.Filter | Mapping[str, Any] | None = None,
        where: Where | None = None,
    ) -> dict[str, Any]:
        """Elasticsearch-style aggregations (count/sum/avg/min/max/stats; terms, histogram,
        date_histogram, range with sub-aggregations) over the rows matching ``query`` (a Tantivy
        query string over all fields) and ``where`` (a row condition the index answers exactly),
        computed by Tantivy on the executors. A filter tree given as ``query`` is deprecated (a
        DeprecationWarning): give it as ``where``.

        Raises:
            QueryError: an aggregation kind this client cannot merge, or a condition the index cannot
                answer exactly.

        Example: ``t.aggregate({"by_level": {"terms": {"field": "level"}}}, query="message:timeout")``
        """
        from connect_plugin.aggregate import merge_results

        if query is not None and not isinstance(query, str):
            where = _renamed(self.aggregate, "query (a filter tree)", query, where)
            query = None
        where = _both(query, where)
        with project_error_first():
            rows = self._command(
                C.Aggregate(aggregations=json.dumps(aggregations), filter=None if where is None else F.to_text(where))
            ).collect()
        return merge_results(aggregations, [json.loads(r["result"]) for r in rows])

    # -- commands --

    def _command(self, command: C.Command) -> DataFrame:
        return command_frame(self.spark, command, self.options, self.path)

    def history(self, limit: int | None = None) -> DataFrame:
        """The commits, newest first, as a lazy DataFrame (``DESCRIBE INDEXTABLES TRANSACTION LOG``).

        Example: ``t.history(5).show()``"""
        return self._command(C.History(limit=limit))

    def describe_state(self) -> DataFrame:
        """The latest version's state as property/value rows, a lazy DataFrame (``DESCRIBE INDEXTABLES STATE``).

        Example: ``dict(t.describe_state().collect())["numRecords"]``
        """
        return self._command(C.DescribeState())

    def checkpoint(self) -> DataFrame:
        """Consolidate the latest state (Avro state or JSON checkpoint) and clean up what expired, at once;
        returns the checkpoint's row (version, format, state directory, live files).

        Example: ``t.checkpoint().collect()[0]["version"]``
        """
        return _run_once(self._command(C.Checkpoint()))

    def purge(
        self, older_than_hours: float | None = None, tx_log_retention_hours: float | None = None, dry_run: bool = False
    ) -> DataFrame:
        """Delete split files no retained version needs (never younger than 24 hours), old log files and
        orphaned manifests, at once; ``dry_run`` lists them and deletes nothing. ``older_than_hours``
        defaults to the setting ``spark.indextables.purge.defaultRetentionHours``, as SQL ``PURGE INDEXTABLE``
        without ``OLDER THAN`` does.

        Raises:
            ConfigError: a retention that is negative or not finite (on the client, before anything runs).

        Example: ``t.purge(older_than_hours=72, dry_run=True).show()``
        """
        purge = C.Purge(
            retention_hours=older_than_hours, tx_log_retention_hours=tx_log_retention_hours, dry_run=dry_run
        )
        return _run_once(self._command(purge))

    def truncate_time_travel(self, dry_run: bool = False) -> DataFrame:
        """Checkpoint the latest version and delete the log files of every earlier one, at once: time travel
        to them is no longer possible. ``dry_run`` lists the files and neither checkpoints nor deletes.

        Example: ``t.truncate_time_travel(dry_run=True).show()``"""
        return _run_once(self._command(C.TruncateTimeTravel(dry_run=dry_run)))

    def delete(self, where: Where) -> DataFrame:
        """DELETE the rows ``where`` matches (a filter tree or SQL predicate text, as a read's WHERE:
        ``indexquery``, filters on any column), at once, in one commit that rewrites only the splits
        holding a match; returns one row (``ChangeResult``: rows deleted, splits removed and added,
        the version; a null version when nothing matched). See ``connect_plugin.row_changes``.

        Raises:
            ConfigError: an unknown column, a companion index, a table with index-only columns.
            CommitConflictError: a MERGE SPLITS, PURGE or row change removed one of its splits first.

        Example: ``IndexTable.for_path(spark, "/t").delete("user_id = 42 OR msg indexquery 'ssn'").show()``
        """
        from connect_plugin.row_changes import delete

        return delete(self, where)

    def update(self, where: Where | None = None, set: Mapping[str, Any] | None = None) -> DataFrame:
        """UPDATE: on the rows ``where`` matches (None: every row), set each column of ``set`` to its
        value, Spark SQL expression text over the row or a Column (``{"level": "upper(level)"}``),
        cast to the column's type; at once, in one commit rewriting only the splits holding a match.
        Returns one row as ``delete`` does.

        Raises:
            ConfigError: an unknown column or a value whose type does not fit (before anything is
                written), or as ``delete``.

        Example: ``t.update("id = 7", set={"level": "'WARN'", "latency": "latency * 2"}).show()``
        """
        from connect_plugin.row_changes import update

        return update(self, where, dict(set or {}))

    def merge(self, source: DataFrame, on: str) -> MergeBuilder:
        """MERGE INTO this table from ``source`` (called ``s``; the table ``t``) on ``on``, a conjunction
        of ``t.col = s.col``; add WHEN clauses, then ``execute()`` (one row as ``delete`` returns). See
        ``connect_plugin.merge_into``.

        Example: ``t.merge(df, "t.id = s.id").when_matched_update_all().when_not_matched_insert_all().execute()``
        """
        from connect_plugin.merge_into import merge

        return merge(self, source, on)

    def drop_partitions(self, where: Where) -> DataFrame:
        """Remove every file of the partitions matching ``where`` in one commit, at once (the files stay
        for time travel until PURGE). There is no dry run: ``t.to_df(where=...).count()`` shows the rows
        it would remove.

        Args:
            where: a condition on partition columns (filter nodes, their JSON form, or SQL text).

        Raises:
            ConfigError (on the cluster, at plan time): a condition on a column that is not a partition column.

        Example: ``t.drop_partitions("day < '2024-01-01'")``
        """
        return _run_once(self._command(C.DropPartitions(filter=F.to_text(_where(where)))))

    def merge_splits(
        self,
        where: Where | None = None,
        target_size: str | int | None = None,
        max_dest_splits: int | None = None,
        max_source_splits_per_merge: int | None = None,
        sort_key: str | None = None,
        min_splits_to_merge: int | None = None,
    ) -> DataFrame:
        """Merge small splits per partition (one commit for all merges); returns the merged splits.
        A partition with fewer than ``min_splits_to_merge`` candidates (default 2) is left alone; ``target_size``
        (bytes, or with a unit: ``"512M"``) defaults to ``indextables_contract.commands.MERGE_TARGET_SIZE``.

        With ``sort_key`` (or the session's ``spark.indextables.merge.sortKey``) the merge keeps the
        key's ranges apart (PROTOCOL.md, "Merge policy sorted by a key"): fresh splits and the sorted
        splits they overlap are rewritten sorted by the key and cut at ``target_size``, so a range
        query on the key reads few splits.

        Raises:
            ConfigError (on the cluster, at plan time): a sort key that is not a data column with
            statistics (numbers, strings, dates, timestamps).

        Example:
            >>> IndexTable.for_path(spark, "s3://bucket/logs").merge_splits(target_size="512M", sort_key="ts")
        """
        merge = C.Merge(merge_id=uuid.uuid4().hex)
        plan = self._command(
            C.MergePlan(
                filter=None if where is None else F.to_text(_where(where)),
                target_size=None if target_size is None else str(target_size),
                max_dest_splits=max_dest_splits,
                max_source_splits_per_merge=max_source_splits_per_merge,
                sort_key=sort_key,
                min_splits_to_merge=min_splits_to_merge,
            )
        )
        opts = merged_options(self.spark, self.options)
        plan.write.format(FORMAT).mode("append").options(**opts, **merge.to_options()).save(self.path)
        return _run_once(self._command(C.MergeResult(merge_id=str(merge.merge_id))))

    def build_companion(self, source_format: str, source: str, **clauses: Any) -> DataFrame:
        """BUILD INDEXTABLES COMPANION of this table over a source table (``delta``/``parquet``/``iceberg``):
        the first call builds the companion index here, later calls sync it (``connect_plugin.companion``
        names the clauses: ``indexing_modes``, ``include_columns``, ``where_filter``, ``dry_run``, ...).

        Raises:
            ConfigError, CompanionSourceError (from the cluster, at plan time): a clause that does not apply,
                unknown columns, a source that cannot be read.

        Example: ``IndexTable.for_path(spark, "/index/events").build_companion("delta", "/lake/events").show()``
        """
        from connect_plugin.companion import build_companion

        return build_companion(self.spark, source_format, source, self.path, options=self.options, **clauses)

    def prewarm(self, where: Where | None = None, footer_only: bool = False) -> DataFrame:
        """Copy the splits of the partitions matching ``where`` (default: all) into the executors' split
        caches, so the first queries do not wait for storage. Example: ``t.prewarm("day = '2024-05-01'")``"""
        where_json = None if where is None else F.to_text(_where(where))
        return _run_once(self._command(C.Prewarm(filter=where_json, footer_only=footer_only)))

    def describe_cache(self, tasks: int = 1) -> DataFrame:
        """The split cache of the executors ``tasks`` tasks land on. Example: ``t.describe_cache(tasks=4).show()``"""
        return _run_once(command_frame(self.spark, C.DescribeCache(tasks=tasks), self.options))

    def flush_cache(self, tasks: int = 1) -> DataFrame:
        """Empty the split cache of the executors ``tasks`` tasks land on. Example: ``t.flush_cache()``"""
        return _run_once(command_frame(self.spark, C.FlushCache(tasks=tasks), self.options))


def _renamed(method: Callable[..., Any], old: str, old_value: Any, value: Any) -> Any:
    """``value``, or ``old_value`` given to ``method`` under the deprecated name ``old`` (with a DeprecationWarning)."""
    name = method.__name__
    if old_value is None:
        return value
    if value is not None:
        raise ConfigError(f"IndexTable.{name}: give the condition as where=..., not also as {old}=...")
    warnings.warn(
        f"IndexTable.{name}({old}=...) is deprecated: the row condition is called where=... in every method",
        DeprecationWarning,
        stacklevel=3,
    )
    return old_value


def _both(query: str | None, where: Where | None) -> F.Filter | None:
    """The Tantivy query string and the row condition together (either may be absent)."""
    parts = [*([F.QueryString(query)] if query is not None else []), *([_where(where)] if where is not None else [])]
    return None if not parts else parts[0] if len(parts) == 1 else F.And(tuple(parts))


def _run_once(df: DataFrame) -> DataFrame:
    """Run a command with side effects exactly once and return its result rows as a DataFrame
    (re-evaluating the read would run the command again)."""
    with project_error_first():
        return local_frame(df.sparkSession, df.collect(), df.schema)
