"""Census summary plugin (registered by tests/conftest.py): counts the census cases and prints
``census: N cases, N passed`` in the terminal summary (one line, also under pytest-xdist: the controller receives every worker's reports)."""

from __future__ import annotations

from typing import Any

import pytest

_OUTCOMES: dict[str, str] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if "tests/census/" not in report.nodeid:
        return
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        outcome = "xfailed" if hasattr(report, "wasxfail") and report.outcome == "skipped" else report.outcome
        if hasattr(report, "wasxfail") and report.outcome == "passed":
            outcome = "xpassed"
        _OUTCOMES[report.nodeid] = outcome


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _OUTCOMES:
        return
    counts = {k: sum(1 for v in _OUTCOMES.values() if v == k) for k in ("passed", "failed", "xfailed", "xpassed")}
    extra = "".join(f", {counts[k]} {k}" for k in ("failed", "xfailed", "xpassed") if counts[k])
    terminalreporter.write_line(f"census: {len(_OUTCOMES)} cases, {counts['passed']} passed{extra}")
