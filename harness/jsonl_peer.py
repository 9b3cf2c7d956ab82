"""The transport both peers use (``harness.jvm_peer``, ``harness.tantivy4java_peer``): a child process that
reads one JSON job per line on stdin and writes one JSON answer per line on stdout, one job at a time.

``JsonLines(proc, ...)`` reads the child's stdout on a daemon thread into a queue, so a wait for an answer
has a timeout and a child that exits is noticed; the errors it raises are the caller's class, with the
caller's wording (``no_answer``, ``exited``) and the tail of the child's log.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from collections.abc import Callable
from typing import Any


class JsonLines:
    """Jobs to ``proc`` (started with text-mode ``stdin``/``stdout`` pipes) and its answers.

    Args:
        proc: the child process.
        error: the exception class raised when the child does not answer in time or exits.
        no_answer: the message when nothing came in ``timeout`` seconds, from (what was asked, timeout).
        exited: the message when the child's stdout ended, from what was asked.
        name: the reader thread's name.
    """

    def __init__(
        self,
        proc: subprocess.Popen[str],
        *,
        error: type[Exception],
        no_answer: Callable[[str, float], str],
        exited: Callable[[str], str],
        name: str = "jsonl-peer",
    ) -> None:
        self.proc = proc
        self._error = error
        self._no_answer = no_answer
        self._exited = exited
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True, name=name).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def receive(self, timeout: float, what: str) -> dict[str, Any]:
        """The next answer; ``error`` when none comes within ``timeout`` seconds or the child exited."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise self._error(self._no_answer(what, timeout)) from None
        if line is None:
            raise self._error(self._exited(what))
        answer: dict[str, Any] = json.loads(line)
        return answer

    def ask(self, job: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send ``job`` (its ``op`` names it in errors) and wait for its answer."""
        self.send(job)
        return self.receive(timeout, str(job["op"]))
