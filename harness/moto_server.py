"""An S3 API on 127.0.0.1: moto's server with conditional writes made atomic.

moto checks ``If-None-Match`` and stores the object without a lock in between, so two
concurrent put-if-absent calls on one key can both succeed (see PROTOCOL.md §13,
"Testing against moto"). ``patch_moto_atomic()`` wraps moto's
object-writing handlers with one shared lock, which makes check+write atomic as on
real S3. ``widen_race_window(ms)`` inserts a delay between check and write — used by the
self-test that proves the log-level checker detects lost commits on unpatched moto.
``count_traffic()`` counts requests and response bytes by method, server side (so bytes every
client moved are seen: Spark's Python workers, pyarrow's S3 filesystem); ``traffic(url)`` reads
the counts and ``traffic(url, reset=True)`` zeroes them (``GET``/``DELETE /_indextables/traffic``).

Run: ``python -m harness.moto_server --port 0 [--host 0.0.0.0] [--unpatched] [--widen-ms 5] [--detached]
[--count-traffic]``; it
prints ``READY <port>`` on stdout when listening and stops on SIGTERM/SIGINT (and, unless
``--detached``, when the process that started it exits).

It needs only moto and the standard library at import time: the docker backend's S3 image
(``docker/Dockerfile.s3``) holds moto and ``harness/`` but not ``executor_lib``.
"""

from __future__ import annotations

import argparse
import functools
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from harness import child

_LOCKED_HANDLERS = ("put_object", "copy_object", "_key_response_post", "delete_object")


def patch_moto_atomic() -> None:
    """Serialize moto's object-writing handlers with one re-entrant lock."""
    from moto.s3.responses import S3Response

    lock = threading.RLock()
    for name in _LOCKED_HANDLERS:
        original = getattr(S3Response, name)

        @functools.wraps(original)
        def locked(self: Any, *args: Any, __original: Any = original, **kwargs: Any) -> Any:
            with lock:
                return __original(self, *args, **kwargs)

        setattr(S3Response, name, locked)


def widen_race_window(delay_ms: float) -> None:
    """Sleep between moto's existence check and its write of a conditional PutObject."""
    from moto.s3 import models

    backend_cls = models.S3Backend
    original = backend_cls.put_object

    @functools.wraps(original)
    def slow_put(self: Any, *args: Any, **kwargs: Any) -> Any:
        time.sleep(delay_ms / 1000.0)
        return original(self, *args, **kwargs)

    backend_cls.put_object = slow_put  # type: ignore[method-assign]


TRAFFIC_PATH = "/_indextables/traffic"


def count_traffic() -> None:
    """Count every request by method and the bytes of every response body (what clients downloaded),
    answered as JSON at ``TRAFFIC_PATH`` (``GET``; ``DELETE`` resets the counts)."""
    import json

    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    lock = threading.Lock()
    counts: dict[str, Any] = {"requests": {}, "bytes_out": 0}
    original = DomainDispatcherApplication.__call__

    def counted(self: Any, environ: dict[str, Any], start_response: Any) -> Any:
        method = str(environ.get("REQUEST_METHOD", ""))
        if environ.get("PATH_INFO") == TRAFFIC_PATH:
            with lock:
                body = json.dumps(counts).encode()
                if method == "DELETE":
                    counts.update(requests={}, bytes_out=0)
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body]
        with lock:
            counts["requests"][method] = counts["requests"].get(method, 0) + 1
        return _counting(original(self, environ, start_response), counts, lock)

    DomainDispatcherApplication.__call__ = counted  # type: ignore[method-assign]


def _counting(chunks: Any, counts: dict[str, Any], lock: threading.Lock) -> Any:
    try:
        for chunk in chunks:
            with lock:
                counts["bytes_out"] += len(chunk)
            yield chunk
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()


def traffic(endpoint_url: str, reset: bool = False) -> dict[str, Any]:
    """The counts of a server started with ``--count-traffic``: ``{"requests": {method: n}, "bytes_out": n}``
    (those before the reset, with ``reset``)."""
    import json
    import urllib.request

    request = urllib.request.Request(endpoint_url + TRAFFIC_PATH, method="DELETE" if reset else "GET")
    with urllib.request.urlopen(request, timeout=30) as response:
        return dict(json.loads(response.read()))


def serve(
    port: int, patched: bool, widen_ms: float, detached: bool = False, host: str = "127.0.0.1", counted: bool = False
) -> None:
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    if counted:
        count_traffic()
    if widen_ms > 0:
        widen_race_window(widen_ms)
    if patched:
        patch_moto_atomic()
    server = ThreadedMotoServer(ip_address=host, port=port, verbose=False)
    server.start()
    actual_port = server._server.server_port if server._server else port
    print(f"READY {actual_port}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    parent = os.getppid()
    while not stop.wait(1.0):
        if not detached and os.getppid() != parent:  # the process that started us is gone: do not linger
            break
    server.stop()


class MotoServerProcess:
    """A moto server in a child process (so every test process can share one S3)."""

    def __init__(self, patched: bool = True, widen_ms: float = 0.0, count_traffic: bool = False) -> None:
        self.patched = patched
        self.widen_ms = widen_ms
        self.count_traffic = count_traffic
        self.proc: subprocess.Popen[str] | None = None
        self.port: int | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> MotoServerProcess:
        from executor_lib.spark.connect_server import free_port  # not at the top: see the module docstring

        cmd = [sys.executable, "-m", "harness.moto_server", "--port", str(free_port())]
        if not self.patched:
            cmd.append("--unpatched")
        if self.widen_ms:
            cmd += ["--widen-ms", str(self.widen_ms)]
        if self.count_traffic:
            cmd.append("--count-traffic")
        started = child.start_announcing(cmd, timeout)
        if started is None:
            raise RuntimeError("moto server did not start")
        self.proc, self.port = started
        return self

    def stop(self) -> None:
        child.stop(self.proc, 10)
        self.proc = None

    def __enter__(self) -> MotoServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0 in a container)")
    parser.add_argument("--unpatched", action="store_true", help="keep moto's non-atomic conditional writes")
    parser.add_argument("--widen-ms", type=float, default=0.0, help="delay between check and write")
    parser.add_argument("--detached", action="store_true", help="keep running after the parent exits (stop by pid)")
    parser.add_argument("--count-traffic", action="store_true", help=f"count requests and bytes (at {TRAFFIC_PATH})")
    args = parser.parse_args(argv)
    if not args.port:
        from executor_lib.spark.connect_server import free_port  # not at the top: see the module docstring

        args.port = free_port()
    serve(
        args.port,
        patched=not args.unpatched,
        widen_ms=args.widen_ms,
        detached=args.detached,
        host=args.host,
        counted=args.count_traffic,
    )


if __name__ == "__main__":
    main()
