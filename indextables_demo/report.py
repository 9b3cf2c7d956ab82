"""What the demo job measured, and the short report it prints at the end."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SMALL_ROWS = 1_000_000  # below this, fixed per-query costs dominate the speed-ups


@dataclass
class QueryResult:
    """One example search: hits and best latency on the index and on the Parquet baseline."""

    name: str
    where: str  # the indexed SQL WHERE clause
    baseline: str  # what Spark runs on Parquet
    hits: int
    index_s: float
    parquet_s: float | None = None
    parquet_hits: int | None = None

    @property
    def speedup(self) -> float | None:
        return None if self.parquet_s is None else self.parquet_s / self.index_s


@dataclass
class Report:
    """Everything the job measured; ``format()`` is the text printed at the end."""

    table: str
    rows: int
    parquet: str | None = None
    state: dict[str, Any] = field(default_factory=dict)  # DESCRIBE INDEXTABLES STATE, values decoded
    generate_s: float = 0.0
    index_s: float = 0.0
    splits_before_merge: int = 0
    splits_after_merge: int = 0
    merge_s: float = 0.0
    merged_splits: int = 0
    queries: list[QueryResult] = field(default_factory=list)
    aggregations: list[QueryResult] = field(default_factory=list)
    levels: dict[str, tuple[int, float]] = field(default_factory=dict)  # level -> (rows, avg latency_ms)
    purge_candidates: int = 0
    table_kept: bool = True
    spark_ui: str | None = None
    # the job's -o options the indextables command takes, credentials left out (their keys in hidden_options)
    cli_options: dict[str, str] = field(default_factory=dict)
    hidden_options: list[str] = field(default_factory=list)

    @property
    def overall_speedup(self) -> float | None:
        timed = [q for q in self.queries + self.aggregations if q.parquet_s is not None]
        if not timed:
            return None
        return sum(q.parquet_s or 0.0 for q in timed) / sum(q.index_s for q in timed)

    def format(self) -> str:
        return "\n".join(
            [
                "",
                "=" * 30 + " IndexTables demo: report " + "=" * 30,
                *self._table_lines(),
                *self._query_lines(),
                *self._end_lines(),
            ]
        )

    def _table_lines(self) -> list[str]:
        s = self.state
        rate = self.rows / self.index_s if self.index_s else 0.0
        lines = [
            f"table      {self.table}",
            f"           version {s.get('version')}, {s.get('numFiles')} splits, {_int(s.get('numRecords'))} rows, "
            f"{_bytes(s.get('sizeInBytes'))}, partitioned by {', '.join(s.get('partitionColumns') or []) or '-'}, "
            f"state {s.get('stateFormat', '?')}",
            f"ingest     {_int(self.rows)} rows generated in {self.generate_s:.1f} s, indexed in {self.index_s:.1f} s "
            f"({rate:,.0f} rows/s) into {self.splits_before_merge} splits; MERGE SPLITS made "
            f"{self.splits_after_merge} ({self.merged_splits} merged) in {self.merge_s:.1f} s",
        ]
        if self.parquet:
            lines.append(f"baseline   the same rows as Parquet: {self.parquet}")
        return lines

    def _query_lines(self) -> list[str]:
        lines = ["", f"{'example (best latency)':<44} {'hits':>9} {'indextables':>12} {'parquet':>9} {'speed-up':>9}"]
        for q in self.queries + self.aggregations:
            parquet = "-" if q.parquet_s is None else f"{q.parquet_s:.2f} s"
            speedup = "-" if q.speedup is None else f"{q.speedup:.1f}x"
            lines.append(f"  {q.name:<42} {q.hits:>9,} {q.index_s:>10.2f} s {parquet:>9} {speedup:>9}")
        for level, (n, avg) in sorted(self.levels.items(), key=lambda kv: -kv[1][0]):
            lines.append(f"    level {level:<6} {n:>10,} rows, avg latency {avg:,.0f} ms")
        return lines

    def _end_lines(self) -> list[str]:
        overall = self.overall_speedup
        lines = [""]
        if overall is not None:
            lines.append(f"speed-up   {overall:.1f}x over scanning Parquet (sum of the latencies above; same hits)")
            if self.rows < SMALL_ROWS:
                lines.append(
                    f"           at {_int(self.rows)} rows fixed per-query costs dominate; the ratios grow "
                    f"with --rows (try --rows {SMALL_ROWS:,} or more)"
                )
        reason = purge_reason(self)
        lines.append(f"purge      {self.purge_candidates} files to delete (dry run{': ' + reason if reason else ''})")
        if self.table_kept:
            storage = "".join(f" -o {shlex.quote(f'{k}={v}')}" for k, v in self.cli_options.items())
            lines.append(f"table at   {self.table}")
            lines.append(f"           inspect it with: {cli_command()} describe {shlex.quote(self.table)}{storage}")
            if self.hidden_options:
                given = " ".join(f"-o {k}=..." for k in self.hidden_options)
                lines.append(f"           (credentials are not printed: add {given}, or set them in the environment)")
        else:
            lines.append(f"table at   {self.table} (a temporary directory, removed at exit: --keep keeps it)")
        return lines

    def to_json(self) -> str:
        from dataclasses import asdict

        return json.dumps(asdict(self), indent=2, default=str)


def cli_options(options: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The job's ``options`` the ``indextables`` command takes (``-o``: storage and log options; the
    indexing and read options it would refuse are left out), and apart the keys of those holding
    credentials, which are never printed."""
    from executor_lib.cli import option_names
    from executor_lib.storage import is_secret_option

    taken = option_names()
    shown = {k: v for k, v in options.items() if k in taken and not is_secret_option(k)}
    return shown, [k for k in options if k in taken and is_secret_option(k)]


def purge_reason(report: Report) -> str:
    """Why a dry-run PURGE found nothing, when the 24-hour minimum retention is the reason."""
    if report.purge_candidates == 0 and report.merged_splits > 0:
        return "the merged-away splits are younger than the 24-hour minimum retention"
    return ""


def cli_command() -> str:
    """The ``indextables`` command as it can be pasted: this environment's script by its path
    (a venv's ``bin`` is not on PATH unless the venv is activated), else the bare name."""
    script = Path(sys.executable).parent / "indextables"
    return shlex.quote(str(script)) if script.is_file() else "indextables"


def _int(value: Any) -> str:
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return str(value)


def _bytes(value: Any) -> str:
    """Decimal units, as their names say: 357,731,571 bytes is ``357.7 MB`` (1 MB = 10**6 bytes)."""
    try:
        n = float(value)
    except (TypeError, ValueError):
        return f"{value} bytes"
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:,.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1000
    return f"{n:,.1f} GB"
