"""The bit-flip sweeps of issue 50 (item 8): what one sweep flips, how a flip's outcome is judged, and the
worker process that runs a sweep (``python -m tests.census.sweeps '<json>'``) so a native crash ends the
worker, not pytest. ``test_sweeps.py`` builds the tables, runs the workers and adds up their counts.

A flip is one bit at a seeded random position of a target (a split's member, a cached file, a sidecar);
its outcome is one of:

* ``right``: every query answered as before the flip;
* ``typed``: this project's typed error (``indextables_contract.errors``) naming the split (or table);
* ``unnamed``: a typed error that names neither;
* ``silent``: an answer that differs (the worst: a wrong answer nobody is told about);
* ``bare``: any other exception (a Python error, a Rust panic);
* ``stuck``: (cache sweeps) the source is intact, but the next read after the flip still fails;
* ``crash``: the worker died (counted by ``test_sweeps.run_sweep``, which resumes after that flip).

The worker prints ``F <i>`` before flip ``i`` (flushed: the last one names a crash's flip) and a final
``R <json counts>``. Flips are drawn from ``random.Random(f"{seed}:{sweep}")`` in order, so a worker
started at flip ``i`` draws the same flips as one that ran through ``i``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import struct
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

import executor_lib
from executor_lib.cache.split_cache import SplitCache
from executor_lib.cache.split_pieces import PIECES_DIR, STATE_FILE
from executor_lib.format.quickwit.bundle import read_footer
from indextables_contract import errors

OUTCOMES = ("right", "typed", "unnamed", "silent", "bare", "stuck", "crash")
# What each flip is judged by: all rows (the doc store or the columnar copy), a term (postings), a
# phrase (positions), a range (fast fields), a raw string term, and a count of everything.
QUERIES = ("*", "msg:alpha", 'msg:"beta gamma"', "id:[5 TO 17]", "tag:t3")
ROWS = 40


def rows(offset: int, with_copy: bool) -> pa.Table:
    """A table's rows: ``with_copy`` adds a list column, whose rows a split keeps in a columnar copy
    (otherwise they are kept in its zstd doc stores)."""
    ids = list(range(offset, offset + ROWS))
    words = ["alpha", "beta gamma", "delta", "gamma beta"]
    data: dict[str, Any] = {
        "id": pa.array(ids, pa.int64()),
        "msg": [f"{words[i % 4]} row {i}" for i in ids],
        "tag": [f"t{i % 5}" for i in ids],
    }
    if with_copy:
        data["labels"] = pa.array([[f"l{i % 3}"] for i in ids], pa.list_(pa.string()))
    return pa.table(data)


def answers(log: executor_lib.TransactionLog, cache: SplitCache) -> list[pa.Table]:
    from executor_lib.splits.search.table_search import search_table

    snapshot = log.snapshot()
    return [search_table(log.store, snapshot, q, cache).sort_by("id") for q in QUERIES]


def judge(run: Callable[[], list[pa.Table]], expected: list[pa.Table], names: list[str]) -> tuple[str, str]:
    """The outcome of ``run()`` against ``expected`` (module docstring), with a detail for the report."""
    try:
        got = run()
    except errors.IndexTablesError as e:
        text = str(e)
        return ("typed", "") if any(n in text for n in names) else ("unnamed", f"{type(e).__name__}: {text[:300]}")
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # a bare error, or a Rust panic (pyo3's PanicException is a BaseException)
        return "bare", f"{type(e).__module__}.{type(e).__name__}: {str(e)[:300]}"
    if len(got) == len(expected) and all(g.equals(x) for g, x in zip(got, expected, strict=True)):
        return "right", ""
    differing = [q for q, g, x in zip(QUERIES, got, expected, strict=True) if not g.equals(x)]
    return "silent", f"queries {differing} answered differently"


def flip_bytes(data: bytes, offset: int, bit: int) -> bytes:
    flipped = bytearray(data)
    flipped[offset] ^= 1 << bit
    return bytes(flipped)


def flip_in_place(path: Path, offset: int, bit: int) -> None:
    """Flip one bit of a file where it lies (as bit rot does: never truncated, so a process that maps the
    file never sees it shorter, which would be a torn write, not a flipped bit)."""
    with open(path, "r+b", buffering=0) as f:
        (byte,) = os.pread(f.fileno(), 1, offset)
        os.pwrite(f.fileno(), bytes([byte ^ (1 << bit)]), offset)


def regions(split: Path) -> list[tuple[str, int, int]]:
    """Every region of a split file: each member, the bundle footer, the hotcache, its length."""
    footer = read_footer(split)
    size = split.stat().st_size
    (hot_len,) = struct.unpack("<I", split.read_bytes()[-4:])
    out = [(name, s, e) for name, (s, e) in sorted(footer.files.items()) if e > s]
    out += [("(bundle footer)", footer.footer_start, size - 4 - hot_len), ("(hotcache)", size - 4 - hot_len, size - 4)]
    return [*out, ("(hotcache length)", size - 4, size)]


# ---------------------------------------------------------------------------------------------
# The sweeps: each yields once set up, then per flip (target, outcome, detail); ``args``: the test's JSON.


def _open(args: dict[str, Any], uri: str) -> executor_lib.TransactionLog:
    return executor_lib.open_log(uri, **args.get("storage", {}))


def _put(log: executor_lib.TransactionLog, key: str, data: bytes) -> None:
    """Replace the object at ``key`` (a local table's file written in place: no fsync per flip)."""
    local = log.store.local_path(key)
    if local is not None:
        Path(local).write_bytes(data)
    else:
        log.store.put(key, data)


def sweep_members(args: dict[str, Any], rng: random.Random, skip: int) -> Iterator[tuple[str, str, str]]:
    """Flips in every region of the tables' splits (``regions``) at their source, each read afresh:
    local tables through the whole-split path, tables on S3 (``storage``) by the piece."""
    logs = [_open(args, uri) for uri in args["tables"]]
    cache = SplitCache(Path(args["work"]) / "cache")
    targets = []
    for t, log in enumerate(logs):
        for s, add in enumerate(sorted(log.snapshot().files, key=lambda a: a.path)):
            local = Path(args["work"]) / f"pristine-{t}-{s}.split"
            if not local.exists():
                local.write_bytes(log.store.read(add.path))
            _put(log, add.path, local.read_bytes())  # a crash's flip undone
            targets += [(log, add.path, local, r) for r in regions(local)]
    expected = {id(log): answers(log, cache) for log in logs}
    yield "", "", ""  # set up
    order: list[int] = []
    for i in range(10**9):
        if not order:  # every region once, in a random order, then again
            order = rng.sample(range(len(targets)), len(targets))
        log, path, local, (name, start, end) = targets[order.pop()]
        offset, bit = rng.randrange(start, end), rng.randrange(8)
        if i < skip:
            continue
        good = local.read_bytes()
        _put(log, path, flip_bytes(good, offset, bit))
        cache.flush()
        try:
            outcome, detail = judge(lambda log=log: answers(log, cache), expected[id(log)], [path])
        finally:
            _put(log, path, good)
        yield f"{name}@{offset - start}.{bit}", outcome, detail


def _cache_files(entry: Path) -> list[Path]:
    return sorted(p for p in entry.rglob("*") if p.is_file() and not p.name.endswith(".lock"))


def sweep_cache(args: dict[str, Any], rng: random.Random, skip: int) -> Iterator[tuple[str, str, str]]:
    """Flips in the node cache's copy of a split (the split intact at its source): a whole split's
    ``data.split``, extracted index and ``checksums.json`` (local table), or the fetched ranges of a
    split fetched by the piece, its stand-ins and ``pieces.json`` (table on S3). Each flip's read must
    be right or fail loudly, and the read after it right (the cache healed)."""
    logs = [_open(args, uri) for uri in args["tables"]]
    cache = SplitCache(Path(args["work"]) / "cache", in_place=False)  # a local table's split copied whole
    cache.flush()
    expected = [answers(log, cache) for log in logs]
    paths = [[a.path for a in log.snapshot().files] for log in logs]
    entries = [(t, cache._entry_dir(log.store.uri_of(p))) for t, log in enumerate(logs) for p in paths[t]]
    yield "", "", ""  # set up
    for i in range(10**9):
        t, entry = entries[rng.randrange(len(entries))]
        log = logs[t]
        choice = rng.random()
        pieces = entry / STATE_FILE
        if pieces.exists() and choice < 0.8:  # a byte of a fetched range
            state = json.loads(pieces.read_text())
            name = rng.choice(sorted(n for n, rs in state["present"].items() if rs))
            start, stop = rng.choice(state["present"][name])
            target, offset = entry / PIECES_DIR / name, rng.randrange(start, stop)
        else:
            files = [p for p in _cache_files(entry) if p.stat().st_size]
            target = files[rng.randrange(len(files))]
            offset = rng.randrange(target.stat().st_size)
        bit = rng.randrange(8)
        if i < skip:
            continue
        if not target.exists() or target.stat().st_size <= offset:  # (the entry was made again since)
            answers(log, cache)
            continue
        flip_in_place(target, offset, bit)
        label = f"{target.relative_to(entry)}@{offset}.{bit}"
        outcome, detail = judge(lambda log=log: answers(log, cache), expected[t], paths[t])
        if outcome in ("right", "typed"):
            after, after_detail = judge(lambda log=log: answers(log, cache), expected[t], paths[t])
            if after != "right":
                outcome, detail = ("stuck" if after in ("typed", "unnamed") else after), f"next read: {after_detail}"
        yield label, outcome, detail


SIDECAR_GLOB = "*.columns-*.arrow"


def sweep_sidecars(args: dict[str, Any], rng: random.Random, skip: int) -> Iterator[tuple[str, str, str]]:
    """Flips in a table's manifest column sidecars (``log/state/manifest_columns.py``), each snapshot read
    afresh (no manifest cache): its files must be those of the intact table, or the read a typed error."""
    from executor_lib.log.state.manifest_cache import MANIFEST_CACHE

    root = Path(args["tables"][0])
    manifests = root / "_transaction_log" / "manifests"
    pristine = Path(args["work"]) / "sidecars"
    if not pristine.exists():
        pristine.mkdir()
        for sidecar in manifests.glob(SIDECAR_GLOB):
            shutil.copy(sidecar, pristine / sidecar.name)
    for saved in pristine.iterdir():  # a crash's flip undone
        shutil.copy(saved, manifests / saved.name)
    sidecars = sorted(manifests.glob(SIDECAR_GLOB))

    def files() -> list[Any]:  # every field of every add action
        MANIFEST_CACHE.clear()
        return sorted(executor_lib.open_log(str(root)).snapshot().files, key=lambda a: a.path)

    expected = files()
    yield "", "", ""  # set up
    for i in range(10**9):
        sidecar = sidecars[rng.randrange(len(sidecars))]
        good = (pristine / sidecar.name).read_bytes()
        offset, bit = rng.randrange(len(good)), rng.randrange(8)
        if i < skip:
            continue
        sidecar.write_bytes(flip_bytes(good, offset, bit))
        try:
            outcome, detail = judge(lambda: [pa.table({"f": [repr(files())]})], [pa.table({"f": [repr(expected)]})], [])
        finally:
            sidecar.write_bytes(good)
        if outcome == "unnamed":  # a sidecar is checked, never trusted: any typed error is loud here
            outcome = "typed"
        yield f"{sidecar.name}@{offset}.{bit}", outcome, detail


SWEEPS = {"members": sweep_members, "cache": sweep_cache, "sidecars": sweep_sidecars}


def main(argv: list[str]) -> int:
    """Run one sweep (``argv[0]``: JSON with ``sweep``, ``seed``, ``seconds``, ``skip`` and the sweep's
    own keys) until its time is spent; print ``F <i>`` per flip and ``R <counts>`` at the end."""
    args = json.loads(argv[0])
    rng = random.Random(f"{args['seed']}:{args['sweep']}:{args.get('name', '')}")
    counts: Counter[str] = Counter()
    examples: dict[str, list[str]] = {}
    i = int(args.get("skip", 0))
    out = sys.stdout
    sweep = SWEEPS[args["sweep"]](args, rng, i)
    print(f"F {i}", file=out, flush=True)
    next(sweep)  # the tables read once, as they are: the flips' time starts after
    deadline = time.monotonic() + float(args["seconds"])
    while time.monotonic() < deadline:
        print(f"F {i}", file=out, flush=True)
        try:
            target, outcome, detail = next(sweep)
        except StopIteration:
            break
        counts[outcome] += 1
        if outcome != "right" and outcome != "typed":
            examples.setdefault(outcome, []).append(f"{target}: {detail}")
        i += 1
    print("R " + json.dumps({"counts": counts, "examples": examples, "next": i}), file=out, flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("INDEXTABLES_MANIFEST_CACHE_DIR", "off")
    sys.exit(main(sys.argv[1:]))
