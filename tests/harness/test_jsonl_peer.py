"""``harness.jsonl_peer``, the transport of both peers, on a small Python child: a job and its answer,
and the caller's error (with the caller's words) when the child is silent or exits."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from harness.jsonl_peer import JsonLines

CHILD = """
import json, sys, time
for line in sys.stdin:
    job = json.loads(line)
    if job["op"] == "exit":
        sys.exit(0)
    if job["op"] == "sleep":
        time.sleep(30)
    print(json.dumps({"ok": True, "echo": job}), flush=True)
"""


class PeerError(RuntimeError):
    pass


@pytest.fixture
def channel() -> Iterator[JsonLines]:
    proc = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    yield JsonLines(
        proc,
        error=PeerError,
        no_answer=lambda what, timeout: f"no answer to {what} in {timeout} s",
        exited=lambda what: f"exited during {what}",
    )
    proc.kill()
    proc.wait()


def test_a_job_gets_its_answer_in_order(channel: JsonLines) -> None:
    assert channel.ask({"op": "a", "n": 1}, 30) == {"ok": True, "echo": {"op": "a", "n": 1}}
    assert channel.ask({"op": "b"}, 30)["echo"]["op"] == "b"


def test_silence_and_exit_raise_the_callers_error(channel: JsonLines) -> None:
    with pytest.raises(PeerError, match=r"^no answer to sleep in 0.5 s$"):
        channel.ask({"op": "sleep"}, 0.5)
    channel.proc.kill()
    with pytest.raises(PeerError, match=r"^exited during start$"):
        channel.receive(30, "start")
