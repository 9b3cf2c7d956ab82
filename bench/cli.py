"""The command line the Spark benchmark modules share: their ``run`` parameters as integer flags
(``--rows``, ``--repeat``, ...; defaults from ``run``), ``--workdir`` and ``--out``; runs the
benchmark, prints its results and writes them as JSON."""

from __future__ import annotations

import argparse
import inspect
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def benchmark_main(
    argv: Sequence[str] | None,
    doc: str | None,
    run: Callable[..., dict[str, Any]],
    print_results: Callable[[dict[str, Any]], None],
    out: str,
) -> int:
    """``python -m bench.<name>``: parse, run, print, write ``--out`` (default ``out``); returns 0."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    sizes = {name: p.default for name, p in inspect.signature(run).parameters.items() if name != "workdir"}
    for name, default in sizes.items():
        parser.add_argument(f"--{name.replace('_', '-')}", dest=name, type=int, default=default)
    parser.add_argument("--out", default=out, help=f"where the JSON goes (default {out})")
    parser.add_argument("--workdir", default=None, help="where the tables are written (default: a temp dir, removed)")
    args = parser.parse_args(argv)
    results = run(**{name: getattr(args, name) for name in sizes}, workdir=args.workdir)
    print_results(results)
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(f"numbers written to {args.out}")
    return 0
