"""The bit-flip sweeps in CI (issue 50, item 8): single bits flipped at seeded random positions of every
member of a split (read whole and by the piece), of the node cache's whole splits and pieces, and of
manifest column sidecars. Every flip must give the right answer or this project's typed error naming the
split: never a different answer (``silent``), a bare exception, a cache that keeps failing once the
source is intact (``stuck``), or a crashed process. Each sweep runs in a worker process
(``tests/census/sweeps.py``); a worker that dies counts a ``crash`` and the sweep resumes after that flip.

CI runs each sweep at seed ``INDEXTABLES_SWEEP_SEED`` (50) for ``INDEXTABLES_SWEEP_SECONDS`` (5) of flips.
The soak (``-m slow``: ``test_sweep_soak``) runs each for ``INDEXTABLES_SWEEP_SECONDS`` (default 120) at
a random seed (printed) unless ``INDEXTABLES_SWEEP_SEED`` is set. Each sweep prints one line of counts.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import executor_lib
from executor_lib.splits.doc_mapping import mapping_for
from executor_lib.splits.write.publish import write_and_upload
from tests.census.sweeps import OUTCOMES, rows
from tests.conftest import BUCKET, s3_options

SEED = int(os.environ.get("INDEXTABLES_SWEEP_SEED", "50"))
SECONDS = float(os.environ.get("INDEXTABLES_SWEEP_SECONDS", "5"))
SOAK_SECONDS = float(os.environ.get("INDEXTABLES_SWEEP_SECONDS", "120"))
_REPO = Path(__file__).parents[2]
# sweep -> (worker sweep, where its tables live, their row layouts (True: a columnar copy), commits each)
SWEEPS: dict[str, tuple[str, str, tuple[bool, ...], int]] = {
    "split members, read whole": ("members", "local", (False, True), 1),
    "split members, read by the piece": ("members", "s3", (False, True), 1),
    "cached whole splits": ("cache", "local", (False, True), 1),
    "cached pieces": ("cache", "s3", (False, True), 1),
    "manifest column sidecars": ("sidecars", "local", (False,), 3),
}


def _tables(where: str, layouts: tuple[bool, ...], commits: int, root: Path, moto: Any) -> tuple[list[str], dict]:
    """Tables of ``layouts``, ``commits`` splits each (local, or on the moto S3 server)."""
    storage = s3_options(moto) if where == "s3" else {}
    uris = []
    for t, with_copy in enumerate(layouts):
        uri = f"s3://{BUCKET}/sweeps/{uuid.uuid4().hex}" if where == "s3" else str(root / f"table-{t}")
        data = rows(0, with_copy)
        mapping = mapping_for(data.schema, {"spark.indextables.indexing.typemap.msg": "text"})
        log = executor_lib.create_table(uri, data.schema, **storage)
        for c in range(commits):
            log.commit([write_and_upload(log.store, rows(c * 100, with_copy), mapping)])
        uris.append(uri)
    return uris, storage


def run_sweep(name: str, seed: int, seconds: float, work: Path, moto: Any) -> tuple[Counter[str], dict[str, list[str]]]:
    """Run sweep ``name`` for ``seconds`` of flips in workers; a worker that dies (or hangs) counts a
    ``crash`` at its last flip and the next starts after it."""
    sweep, where, layouts, commits = SWEEPS[name]
    work.mkdir(parents=True, exist_ok=True)
    uris, storage = _tables(where, layouts, commits, work, moto)
    env = {**os.environ, "PYTHONPATH": str(_REPO), "INDEXTABLES_MANIFEST_CACHE_DIR": "off"}
    counts: Counter[str] = Counter()
    examples: dict[str, list[str]] = {}
    deadline, skip = time.monotonic() + seconds, 0
    while True:
        left = max(0.5, deadline - time.monotonic())
        args = {"sweep": sweep, "name": name, "seed": seed, "skip": skip, "tables": uris, "storage": storage}
        args |= {"work": str(work), "seconds": left}
        try:
            done = subprocess.run(
                [sys.executable, "-m", "tests.census.sweeps", json.dumps(args)],
                cwd=_REPO,
                env=env,
                capture_output=True,
                text=True,
                timeout=left + 240,
            )
            stdout, stderr, status = done.stdout, done.stderr, f"exit {done.returncode}"
        except subprocess.TimeoutExpired as e:
            stdout, stderr, status = _text(e.stdout), _text(e.stderr), "hung"
        result = [line for line in stdout.splitlines() if line.startswith("R ")]
        if result:
            found = json.loads(result[-1][2:])
            counts.update(found["counts"])
            for outcome, cases in found["examples"].items():
                examples.setdefault(outcome, []).extend(cases)
            return counts, examples
        flips = [int(line[2:]) for line in stdout.splitlines() if line.startswith("F ")]
        last = flips[-1] if flips else skip
        counts["crash"] += 1
        examples.setdefault("crash", []).append(f"flip {last}: {status}: {stderr[-1500:]}")
        if counts["crash"] > 5 or time.monotonic() > deadline:
            return counts, examples
        skip = last + 1


def _text(data: bytes | str | None) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else data or ""


def summary(name: str, seed: int, counts: Counter[str]) -> str:
    total = sum(counts.values())
    return f"sweep {name!r} seed {seed}: {total} flips: " + ", ".join(f"{counts[o]} {o}" for o in OUTCOMES)


def _check(name: str, seed: int, counts: Counter[str], examples: dict[str, list[str]], record: Any) -> None:
    line = summary(name, seed, counts)
    print(line)
    record("sweep_summary", line)
    bad = {o: examples.get(o, [])[:3] for o in ("silent", "bare", "crash", "stuck", "unnamed") if counts[o]}
    assert not bad, f"{line}\n" + "\n".join(f"{o}: {cases}" for o, cases in bad.items())
    assert counts["right"] + counts["typed"] >= 3, f"too few flips to mean anything: {line}"


@pytest.mark.s3
@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", list(SWEEPS))
def test_sweep(name: str, moto_server: Any, tmp_path: Path, record_property: Any) -> None:
    counts, examples = run_sweep(name, SEED, SECONDS, tmp_path, moto_server)
    _check(name, SEED, counts, examples, record_property)


@pytest.mark.s3
@pytest.mark.slow
@pytest.mark.timeout(7200)
@pytest.mark.parametrize("name", list(SWEEPS))
def test_sweep_soak(name: str, moto_server: Any, tmp_path: Path, record_property: Any) -> None:
    seed = SEED if "INDEXTABLES_SWEEP_SEED" in os.environ else random.SystemRandom().randrange(1 << 31)
    print(f"sweep {name!r}: seed {seed} (INDEXTABLES_SWEEP_SEED={seed} repeats it)")
    counts, examples = run_sweep(name, seed, SOAK_SECONDS, tmp_path, moto_server)
    _check(name, seed, counts, examples, record_property)
