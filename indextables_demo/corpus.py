"""The demo corpus: application logs generated inside Spark (``spark.range`` + SQL expressions).

Every random choice is a hash of the row id (``xxhash64(id, <salt>)`` mapped to [0, 1)), so a
given ``rows``/``days`` gives the same rows on every run, with no per-row Python code.

* ``message``: an event template (which also sets the level: INFO-heavy) followed by 4-12
  words drawn from a few hundred log words with a Zipf distribution (rank r with probability
  about 1/r: index ``floor(N ** u)`` for uniform ``u``); about 1 row in 10,000 also carries the
  rare word ``kraken`` (the "needle"), so selective queries exist;
* ``service`` (Zipf over a dozen services), ``host`` (``<service>-<n>``), ``trace_id`` (32 hex),
  ``latency_ms`` (log-normal, slower for WARN and ERROR), ``ts`` spread over ``days`` days from
  ``START_DAY`` (UTC) and ``day`` (``yyyy-MM-dd`` of ``ts``, the partition column).
"""

from __future__ import annotations

import datetime
from typing import Any

START_DAY = datetime.date(2024, 5, 1)
NEEDLE = "kraken"
NEEDLE_EVERY = 10_000

# (level, template, weight): the level mix is about INFO 80%, WARN 12%, ERROR 6%, DEBUG 2%.
EVENTS: list[tuple[str, str, float]] = [
    ("INFO", "request completed", 30.0),
    ("INFO", "user login succeeded", 12.0),
    ("INFO", "cache hit for key", 12.0),
    ("INFO", "published event to topic", 10.0),
    ("INFO", "scheduled job finished", 8.0),
    ("INFO", "health check passed", 8.0),
    ("WARN", "slow query detected", 4.0),
    ("WARN", "retrying request after backoff", 3.0),
    ("WARN", "cache miss for key", 3.0),
    ("WARN", "connection pool nearly exhausted", 2.0),
    ("ERROR", "upstream timeout after retry", 2.0),
    ("ERROR", "connection reset by peer", 1.5),
    ("ERROR", "payment declined by processor", 1.0),
    ("ERROR", "deadlock detected in transaction", 0.5),
    ("ERROR", "unhandled exception in handler", 1.0),
    ("DEBUG", "parsed request headers", 1.0),
    ("DEBUG", "opened tracing span", 1.0),
]

SERVICES = [
    "checkout",
    "search",
    "auth",
    "payments",
    "catalog",
    "inventory",
    "shipping",
    "gateway",
    "recommendations",
    "notifications",
    "billing",
    "profile",
]

# Ordered by how common they are (rank 1 first): the Zipf draw favours the front of the list.
VOCABULARY = """
the to for of and in on with from user request id session at by status ok service response
client server retry cache key value time ms bytes query database table row index order item
cart price total account token header path method get post put delete api version node pod
region zone queue topic partition offset consumer producer batch size limit count page result
error warning failed success started stopped elapsed duration thread worker pool connection
socket port host address network latency timeout upstream downstream backend frontend proxy
balancer route handler middleware filter policy rule config setting flag feature experiment
variant metric counter gauge histogram trace span parent child event message payload schema
field column record document shard replica leader follower election heartbeat lease lock
mutex semaphore deadline context cancel abort commit rollback transaction isolation snapshot
checkpoint journal segment block chunk buffer stream file directory bucket object blob upload
download sync async callback promise future job task schedule cron interval window tumbling
sliding watermark late early drop accept reject allow deny grant revoke role permission scope
audience issuer subject claim signature certificate cipher hash salt digest nonce entropy
random seed sample ratio percent quota budget cost invoice refund charge card wallet currency
exchange rate tax discount coupon promotion campaign banner email sms push template locale
language translation timezone calendar holiday weekend morning evening night daily weekly
monthly quarterly yearly archive backup restore migrate upgrade downgrade deploy release
rollout canary blue green shadow mirror replay debug verbose tracing info notice alert critical
emergency panic fatal overflow underflow saturation throttle backpressure circuit breaker
bulkhead fallback degrade recover heal restart crash oom gc pause compaction vacuum analyze
reindex warmup prefetch evict expire stale fresh dirty clean valid invalid malformed corrupt
truncated duplicate missing unknown unexpected
""".split()  # noqa: SIM905 (a list literal of 300 words is harder to read)


def _uniform(salt: str, extra: str = "") -> str:
    """SQL for a uniform double in [0, 1) from the row id and a salt."""
    args = f"id, '{salt}'" + (f", {extra}" if extra else "")
    return f"(pmod(xxhash64({args}), 1000000007) / 1000000007.0)"


def _array(values: list[str]) -> str:
    return "array(" + ", ".join(f"'{v}'" for v in values) + ")"


def _event_index() -> str:
    """SQL for a 1-based index into EVENTS, drawn by weight."""
    total = sum(w for _, _, w in EVENTS)
    cases, acc = [], 0.0
    for i, (_, _, weight) in enumerate(EVENTS[:-1], start=1):
        acc += weight / total
        cases.append(f"WHEN u_event < {acc:.6f} THEN {i}")
    return f"CASE {' '.join(cases)} ELSE {len(EVENTS)} END"


def _zipf_words() -> str:
    """SQL for 4-12 words, each ``VOCABULARY[floor(N ** u)]`` (rank r about 1/r likely)."""
    n = len(VOCABULARY)
    u = _uniform("word", "i")
    count = "4 + cast(pmod(xxhash64(id, 'nwords'), 9) as int)"
    pick = f"element_at(vocab, least(cast(pow({n}, {u}) as int), {n}))"
    return f"array_join(transform(sequence(1, {count}), i -> {pick}), ' ')"


def generate(spark: Any, rows: int, days: int = 4, partitions: int | None = None) -> Any:
    """The corpus as a DataFrame (columns: id, ts, day, level, service, host, trace_id, latency_ms, message)."""
    if rows < 1 or days < 1:
        raise ValueError(f"corpus: rows ({rows}) and days ({days}) must be at least 1")
    parts = partitions or max(2, min(8, rows // 250_000))
    start_ms = int(datetime.datetime.combine(START_DAY, datetime.time(), datetime.timezone.utc).timestamp() * 1000)
    offset = f"cast({_uniform('ts')} * {days * 86_400_000} as bigint)"
    base = spark.range(0, rows, 1, parts).selectExpr(
        "id",
        f"{offset} as offset_ms",
        f"{_uniform('event')} as u_event",
        f"{_uniform('lat1')} as u1",
        f"{_uniform('lat2')} as u2",
        f"{_array(VOCABULARY)} as vocab",
    )
    return base.selectExpr(
        "id",
        f"timestamp_millis({start_ms} + offset_ms) as ts",
        f"cast(date_add(DATE'{START_DAY.isoformat()}', cast(offset_ms div 86400000 as int)) as string) as day",
        f"element_at({_array([e[0] for e in EVENTS])}, {_event_index()}) as level",
        f"element_at({_array(SERVICES)}, least(cast(pow({len(SERVICES)}, {_uniform('svc')}) as int), "
        f"{len(SERVICES)})) as service",
        f"element_at({_array([e[1] for e in EVENTS])}, {_event_index()}) as template",
        "lower(concat(lpad(hex(xxhash64(id, 'trace1')), 16, '0'), lpad(hex(xxhash64(id, 'trace2')), 16, '0')))"
        " as trace_id",
        "u1",
        "u2",
        f"{_zipf_words()} as words",
        f"pmod(xxhash64(id, 'needle'), {NEEDLE_EVERY}) = 0 as needle",
        "pmod(xxhash64(id, 'host'), 8) as host_n",
    ).selectExpr(
        "id",
        "ts",
        "day",
        "level",
        "service",
        "concat(service, '-', cast(host_n as string)) as host",
        "trace_id",
        # log-normal latency (Box-Muller): median ~33 ms for INFO/DEBUG, ~150 ms WARN, ~670 ms ERROR
        "cast(exp(CASE level WHEN 'ERROR' THEN 6.5 WHEN 'WARN' THEN 5.0 ELSE 3.5 END"
        " + 0.8 * sqrt(-2 * ln(greatest(u1, 1e-9))) * cos(2 * pi() * u2)) as int) as latency_ms",
        f"concat(template, ' ', words, CASE WHEN needle THEN ' {NEEDLE}' ELSE '' END) as message",
    )
