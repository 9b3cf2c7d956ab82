"""What only the Google Cloud Storage backend has, against a real GCS API server (fake-gcs-server on
127.0.0.1): the server's own put-if-absent (``ifGenerationMatch=0``: one winner of racing creates),
writers committing to one table released at a barrier (nothing lost or duplicated, conflicts
detected), the endpoint from ``STORAGE_EMULATOR_HOST``, credentials from the options or
``GOOGLE_APPLICATION_CREDENTIALS`` and never in a message, the errors of a bad option, bucket name or
a missing bucket, retries against an endpoint that does not answer, and faults injected by a proxy in
front of the server (503s; an upload applied whose answer is lost: ambiguous, and a commit through it
lands once). The contract itself runs on
GCS in test_storage.py (the ``gcs`` param of ``backend``)."""

from __future__ import annotations

import socket
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

import executor_lib
from executor_lib.storage import open_store
from executor_lib.storage.gcs import GcsStore, parse_gcs_uri
from harness.log_checker import check_log, lost_commits
from indextables_contract.errors import (
    AmbiguousWriteError,
    ConfigError,
    ObjectAlreadyExistsError,
    ObjectNotFoundError,
    StorageError,
)
from tests.conftest import GCS_BUCKET, gcs_options
from tests.log.helpers import add, make_table

pytestmark = pytest.mark.gcs

SECRET = "ya29.SUPER-SECRET-GCS-TOKEN-789"


def test_the_server_honours_if_generation_match_zero(gcs_server: Any) -> None:
    """fake-gcs-server itself (the google-cloud-storage client, no store code): of 8 uploads with
    ifGenerationMatch=0 released together, exactly one creates the object and the others get 412;
    the object holds the winner's bytes. The store's put-if-absent is only as good as this."""
    from google.api_core.exceptions import PreconditionFailed
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    client = storage.Client(
        project="test", credentials=AnonymousCredentials(), client_options={"api_endpoint": gcs_server.endpoint}
    )
    bucket = client.bucket(GCS_BUCKET)
    prefix = f"raw-race/{uuid.uuid4().hex}"
    for r in range(10):
        barrier = threading.Barrier(8)
        winners: list[int] = []
        refused: list[int] = []
        errors: list[BaseException] = []

        def create(
            i: int,
            r: int = r,
            barrier: threading.Barrier = barrier,
            winners: list[int] = winners,
            refused: list[int] = refused,
            errors: list[BaseException] = errors,
        ) -> None:
            barrier.wait()
            try:
                bucket.blob(f"{prefix}/{r}").upload_from_string(f"w{i}".encode() * 500, if_generation_match=0)
                winners.append(i)
            except PreconditionFailed:
                refused.append(i)
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)

        threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors and len(winners) == 1 and len(refused) == 7, (r, winners, errors)
        assert bucket.blob(f"{prefix}/{r}").download_as_bytes() == f"w{winners[0]}".encode() * 500


def test_writers_released_at_a_barrier_commit_each_version_once(gcs_server: Any) -> None:
    """8 threads, each with its own log (and client) on one gs:// table, released together, 6 appends each:
    every acknowledged commit is in the log once, versions are contiguous, and the lost version races
    (conflicts the log detected and retried past) are counted."""
    uri, options = f"gs://{GCS_BUCKET}/race/{uuid.uuid4().hex}", gcs_options(gcs_server)
    make_table(uri, options)
    writers, appends = 8, 6
    barrier = threading.Barrier(writers)
    acknowledged: list[tuple[int, str]] = []
    conflicts: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def write() -> None:
        try:
            log = executor_lib.open_log(uri, **options)
            barrier.wait(timeout=60)
            for _ in range(appends):
                a = add()
                version = log.commit([a])
                with lock:
                    acknowledged.append((version, a.path))
            with lock:
                conflicts.append(log.commit_stats["lost_races"])
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=write) for _ in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    assert not errors, errors
    total = writers * appends
    assert sorted(v for v, _ in acknowledged) == list(range(1, total + 1)), "each commit got its own version"
    report = check_log(uri, **options)
    duplicated = report.duplicate_txn_ids + report.duplicate_adds
    lost = lost_commits(report, acknowledged)
    print(
        f"gcs barrier commits: {total} acknowledged, lost={len(lost)} duplicated={len(duplicated)} "
        f"conflicts={sum(conflicts)}"
    )
    assert report.versions == list(range(total + 1))
    assert lost == [] and duplicated == []
    assert sum(conflicts) > 0, "writers released together must have raced for versions"
    snapshot = executor_lib.open_log(uri, **options).snapshot()
    assert {f.path for f in snapshot.files} == {p for _, p in acknowledged}


def test_put_if_absent_keeps_metadata_and_refuses_a_second_create(gcs_server: Any) -> None:
    store = open_store(f"gs://{GCS_BUCKET}/meta/{uuid.uuid4().hex}", **gcs_options(gcs_server))
    assert isinstance(store, GcsStore)
    store.put_if_absent("_transaction_log/00000000000000000001.json", b"{}", metadata={"indextables-txn-id": "t1"})
    blob = store.bucket.get_blob(store._key("_transaction_log/00000000000000000001.json"))
    assert blob.metadata == {"indextables-txn-id": "t1"}
    with pytest.raises(ObjectAlreadyExistsError):
        store.put_if_absent("_transaction_log/00000000000000000001.json", b"other")


def test_storage_emulator_host_is_the_endpoint_without_options(gcs_server: Any, monkeypatch: Any) -> None:
    # host:port, as gcloud's emulator commands set it
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_server.endpoint.removeprefix("http://"))
    store = open_store(f"gs://{GCS_BUCKET}/emulator/{uuid.uuid4().hex}", shared_client=True)
    store.put("a", b"through STORAGE_EMULATOR_HOST")
    other = open_store(store.root_uri, **gcs_options(gcs_server))
    assert other.read("a") == b"through STORAGE_EMULATOR_HOST"
    assert store.cache_identity == other.cache_identity  # one endpoint, however it was given


def test_missing_bucket_and_bad_bucket_names_are_named(gcs_server: Any) -> None:
    options = gcs_options(gcs_server)
    store = open_store("gs://no-such-bucket-xyz/t", **options)
    for op in (lambda: store.read("k"), lambda: list(store.list("")), lambda: store.put("k", b"x")):
        with pytest.raises(StorageError, match="bucket 'no-such-bucket-xyz' does not exist") as err:
            op()
        assert not isinstance(err.value, ObjectNotFoundError) and not err.value.retryable
    with pytest.raises(ObjectNotFoundError):  # the bucket exists: a missing object is only that
        open_store(f"gs://{GCS_BUCKET}/t", **options).read("missing")
    for bad in ("gs://Upper/t", "gs://a/t", "gs:///t", "gs://bad..dots/t"):
        with pytest.raises(ConfigError, match="bucket"):
            open_store(bad, **options)
    assert parse_gcs_uri("gs://my-bucket/a/b/") == ("my-bucket", "a/b")
    assert open_store("GS://my-bucket/a/").root_uri == "gs://my-bucket/a"


def test_bad_gcs_options_name_the_option_and_never_the_credential(tmp_path: Path, gcs_server: Any) -> None:
    with pytest.raises(ConfigError, match=r"storage option spark.indextables.gcs.endpoint='127.0.0.1:1'"):
        open_store("gs://bkt/t", **{"spark.indextables.gcs.endpoint": "127.0.0.1:1"})
    with pytest.raises(ConfigError, match="unknown storage option 'gcs_project'"):
        open_store("gs://bkt/t", gcs_project="p")
    with pytest.raises(ConfigError, match="max_attempts='0'"):
        open_store("gs://bkt/t", max_attempts="0")
    with pytest.raises(ConfigError, match="credentialsFile: no such file") as err:
        open_store("gs://bkt/t", gcs_credentials_file=str(tmp_path / "missing.json"))
    # a token is sent over HTTPS only: refused with the fake's http:// endpoint, before any request
    store = open_store(
        f"gs://{GCS_BUCKET}/t", **gcs_options(gcs_server), **{"spark.indextables.gcs.accessToken": SECRET}
    )
    with pytest.raises(ConfigError, match="accessToken is sent over HTTPS only") as err:
        store.read("x")
    assert SECRET not in str(err.value) and SECRET not in repr(store) and SECRET not in repr(store._options)  # type: ignore[attr-defined]
    with pytest.raises(
        ConfigError, match=r"storage option spark.indextables.gcs.accessToken: ends with a line break"
    ) as err:
        open_store("gs://bkt/t", **{"spark.indextables.gcs.accessToken": SECRET + "\n"})
    assert SECRET not in str(err.value)
    # a credentials file that is not one: named, its content (a private key, say) never echoed
    bogus = tmp_path / "key.json"
    bogus.write_text(f'{{"type": "service_account", "private_key": "{SECRET}"}}')
    store = open_store("gs://bkt/t", gcs_credentials_file=str(bogus), gcs_endpoint="https://storage.example.invalid")
    with pytest.raises(ConfigError, match="not a credentials file") as err:
        store.read("x")
    assert SECRET not in str(err.value) and err.value.__cause__ is None


def test_google_application_credentials_is_honoured(tmp_path: Path, monkeypatch: Any) -> None:
    """Without options or an emulator, the credentials come from GOOGLE_APPLICATION_CREDENTIALS: a file
    that is not there, or not a credentials file, is named by that variable (never its content)."""
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "nope.json"))
    with pytest.raises(ConfigError, match=r"GOOGLE_APPLICATION_CREDENTIALS: no such file .*nope\.json"):
        open_store("gs://bkt/t").read("x")
    bogus = tmp_path / "bogus.json"
    bogus.write_text(SECRET)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(bogus))
    with pytest.raises(ConfigError, match=r"GOOGLE_APPLICATION_CREDENTIALS: .* not a credentials file") as err:
        open_store("gs://bkt/t").read("x")
    assert SECRET not in str(err.value)


def test_an_endpoint_that_does_not_answer_is_retried_then_named(gcs_server: Any) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    store = open_store(f"gs://{GCS_BUCKET}/t", gcs_endpoint=dead, max_attempts=2, connect_timeout=1)
    with pytest.raises(StorageError, match=f"no answer from {dead}") as err:
        store.read("k")
    assert err.value.retryable and not isinstance(err.value, ObjectNotFoundError)
    with pytest.raises(StorageError) as err:  # refused connections: the write was never sent, not ambiguous
        store.put_if_absent("k", b"x")
    assert not isinstance(err.value, (AmbiguousWriteError, ObjectAlreadyExistsError))


def test_large_objects_go_in_parts_and_ranges_read_across_them(gcs_server: Any, tmp_path: Path) -> None:
    options = {
        **gcs_options(gcs_server),
        "multipart_threshold": 5 * 1024 * 1024,
        "multipart_chunksize": 5 * 1024 * 1024,
    }
    store = open_store(f"gs://{GCS_BUCKET}/big/{uuid.uuid4().hex}", **options)
    data = bytes(range(256)) * (11 * 1024 * 1024 // 256)
    store.put("a.split", data)  # resumable, three parts (5 MiB is a multiple of 256 KiB)
    assert store.head("a.split").size == len(data)
    assert store.read_range("a.split", 5 * 1024 * 1024 - 3, 6) == data[5 * 1024 * 1024 - 3 : 5 * 1024 * 1024 + 3]
    assert store.read_range("a.split", len(data), 10) == b""
    listed = list(store.list(""))
    assert [(o.key, o.size) for o in listed] == [("a.split", len(data))] and listed[0].modified_ms > 0


class FaultProxy:
    """An HTTP proxy on 127.0.0.1 in front of the real fake-gcs-server that, for the next requests matching
    a rule, answers 503 without forwarding, or forwards and then drops the connection unanswered (the
    request applied, its answer lost). Every other request passes through unchanged."""

    def __init__(self, upstream: str) -> None:
        import http.client
        import http.server
        from urllib.parse import urlsplit

        self.rules: list[tuple[str, str, str]] = []  # (method, path fragment, "503" | "drop"), each used once
        self.seen: list[str] = []
        host, port = urlsplit(upstream).hostname, urlsplit(upstream).port
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                action = None
                for rule in proxy.rules:
                    if rule[0] == self.command and rule[1] in self.path:
                        proxy.rules.remove(rule)
                        action = rule[2]
                        break
                proxy.seen.append(f"{self.command} {self.path.split('?')[0]} {action or ''}".strip())
                if action == "503":
                    self.send_response(503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                conn = http.client.HTTPConnection(host, port, timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                conn.request(self.command, self.path, body=body or None, headers=headers)
                response = conn.getresponse()
                data = response.read()
                conn.close()
                if action == "drop":
                    self.close_connection = True
                    return
                self.send_response(response.status)
                for k, v in response.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def faulty(gcs_server: Any) -> Any:
    proxy = FaultProxy(gcs_server.endpoint)
    try:
        yield proxy
    finally:
        proxy.close()


def _through(proxy: FaultProxy, path: str) -> tuple[str, dict[str, Any]]:
    return f"gs://{GCS_BUCKET}/{path}/{uuid.uuid4().hex}", {"gcs_endpoint": proxy.endpoint, "gcs_project_id": "test"}


def test_a_lost_answer_to_a_conditional_write_is_ambiguous_not_already_exists(faulty: FaultProxy) -> None:
    """The upload landed but its answer was lost: the retry's 412 may be this write's own, so the store
    says ambiguous (never 'already exists', which would tell the log another commit won)."""
    uri, options = _through(faulty, "lost-answer")
    store = open_store(uri, **options)
    faulty.rules.append(("POST", "/upload/", "drop"))
    with pytest.raises(AmbiguousWriteError, match="maybe this write"):
        store.put_if_absent("_transaction_log/00000000000000000001.json", b"mine")
    assert store.read("_transaction_log/00000000000000000001.json") == b"mine"
    upload = f"POST /upload/storage/v1/b/{GCS_BUCKET}/o"
    assert [s for s in faulty.seen if s.startswith("POST")] == [f"{upload} drop", upload]


def test_a_commit_whose_answer_was_lost_lands_once(faulty: FaultProxy) -> None:
    """Through the transaction log: the commit's upload applied, its answer dropped; the log reads the
    version back, finds its own bytes and acknowledges it once."""
    uri, options = _through(faulty, "lost-commit")
    log = make_table(uri, options)
    faulty.rules.append(("POST", "/upload/", "drop"))
    a = add()
    assert log.commit([a]) == 1
    assert not faulty.rules, "the commit's upload was dropped"
    assert log.commit([add()]) == 2
    report = check_log(uri, **options)
    assert report.versions == [0, 1, 2] and not report.duplicate_txn_ids and report.added_paths[a.path] == 1


def test_throttling_is_retried_for_reads_writes_and_listings(faulty: FaultProxy) -> None:
    uri, options = _through(faulty, "throttled")
    store = open_store(uri, **options)
    faulty.rules += [("POST", "/upload/", "503"), ("POST", "/upload/", "503")]
    store.put_if_absent("k", b"v")  # 503 is not applied: tried again, created once
    faulty.rules += [("GET", "/o/", "503"), ("GET", "/o", "503")]
    assert store.read("k") == b"v"
    assert [o.key for o in store.list("")] == ["k"]
    faulty.rules += [("GET", "/o/", "503")] * 5
    with pytest.raises(StorageError, match=r"throttled or unavailable \(503\)") as err:
        open_store(uri, **options, max_attempts=3).read("k")
    assert err.value.retryable
    faulty.rules.clear()


def test_the_cli_describes_a_gcs_table_and_names_a_missing_bucket(
    gcs_server: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from executor_lib.cli import main as cli_main

    uri, options = f"gs://{GCS_BUCKET}/cli/{uuid.uuid4().hex}", gcs_options(gcs_server)
    make_table(uri, options).commit([add()])
    flags = [f"-o{k}={v}" for k, v in options.items()]
    assert cli_main(["describe", uri, "--json", *flags]) == 0
    assert json.loads(capsys.readouterr().out)["version"] == 1
    assert cli_main(["describe", "gs://no-such-bucket-cli/t", *flags]) == 2
    assert "bucket 'no-such-bucket-cli' does not exist" in capsys.readouterr().err
    store = open_store(uri, **options)
    with pytest.raises(ObjectNotFoundError):
        store.get_file("splits/missing.split", str(tmp_path / "missing"))
    assert not (tmp_path / "missing").exists()
