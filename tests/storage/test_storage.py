"""The storage contract, one body per behaviour, run on the local filesystem, S3 (moto), Azure (Azurite)
and GCS (fake-gcs-server)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from executor_lib.storage import open_store
from executor_lib.storage.base import ObjectStore
from indextables_contract.errors import ConfigError, ObjectAlreadyExistsError, ObjectNotFoundError, StorageError


@pytest.fixture
def store(table: tuple[str, dict[str, Any]]) -> ObjectStore:
    uri, options = table
    return open_store(uri, **options)


def test_put_read_head_delete(store: ObjectStore) -> None:
    store.put("a/b.bin", b"0123456789")
    assert store.read("a/b.bin") == b"0123456789"
    assert store.read_range("a/b.bin", 2, 3) == b"234"
    assert store.read_range("a/b.bin", 8, 10) == b"89"
    assert store.head("a/b.bin").size == 10
    assert store.exists("a/b.bin")
    store.put("a/b.bin", b"new")
    assert store.read("a/b.bin") == b"new"
    store.delete("a/b.bin")
    assert not store.exists("a/b.bin")
    store.delete("a/b.bin")  # deleting a missing object is fine


def test_ranged_reads_past_the_end_empty_and_negative(store: ObjectStore) -> None:
    """Every backend reads ranges alike (one check, ``storage.base.wants_bytes``): a range past the end
    is cut short, an empty one is empty, a negative start or length is refused naming both."""
    store.put("r.bin", b"0123456789")
    assert store.read_range("r.bin", 9, 5) == b"9"
    assert store.read_range("r.bin", 3, 0) == b""
    assert store.read_range("r.bin", 10, 4) == b""
    for start, length in ((-1, 3), (2, -1)):
        with pytest.raises(ValueError, match=f"start={start} length={length}"):
            store.read_range("r.bin", start, length)


def test_missing_object_error_names_path(store: ObjectStore) -> None:
    with pytest.raises(ObjectNotFoundError) as err:
        store.read("nope/missing.json")
    assert "nope/missing.json" in str(err.value)
    with pytest.raises(ObjectNotFoundError):
        store.head("nope/missing.json")


def test_put_if_absent_refuses_existing_object(store: ObjectStore) -> None:
    store.put_if_absent("log/1.json", b"first")
    with pytest.raises(ObjectAlreadyExistsError) as err:
        store.put_if_absent("log/1.json", b"second")
    assert "log/1.json" in str(err.value)
    assert store.read("log/1.json") == b"first"


def test_put_if_absent_has_one_winner_under_concurrency(store: ObjectStore) -> None:
    writers, rounds = 8, 10
    for r in range(rounds):
        barrier = threading.Barrier(writers)
        winners: list[int] = []
        errors: list[BaseException] = []

        def write(
            i: int,
            key: str = f"race/{r}.json",
            barrier: threading.Barrier = barrier,
            winners: list[int] = winners,
            errors: list[BaseException] = errors,
        ) -> None:
            barrier.wait()
            try:
                store.put_if_absent(key, f"writer-{i}".encode() * 1000)
                winners.append(i)
            except ObjectAlreadyExistsError:
                pass
            except BaseException as e:  # pragma: no cover - reported below
                errors.append(e)

        threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert len(winners) == 1, f"round {r}: {len(winners)} writers won"
        assert store.read(f"race/{r}.json") == f"writer-{winners[0]}".encode() * 1000


def test_list_prefix_start_after_and_directories(store: ObjectStore) -> None:
    for name in [
        "log/00000000000000000000.json",
        "log/00000000000000000001.json",
        "log/00000000000000000002.json",
        "log/state-v00000000000000000001/_manifest.avro",
        "log/manifests/m-1.avro",
        "other/x",
    ]:
        store.put(name, b"x")
    keys = [o.key for o in store.list("log/0")]
    assert keys == [
        "log/00000000000000000000.json",
        "log/00000000000000000001.json",
        "log/00000000000000000002.json",
    ]
    after = [o.key for o in store.list("log/0", start_after="log/00000000000000000001")]
    assert after == ["log/00000000000000000001.json", "log/00000000000000000002.json"]
    top = [(o.key, o.is_dir) for o in store.list("log/", recursive=False)]
    assert top == [
        ("log/00000000000000000000.json", False),
        ("log/00000000000000000001.json", False),
        ("log/00000000000000000002.json", False),
        ("log/manifests/", True),
        ("log/state-v00000000000000000001/", True),
    ]
    deep = [o.key for o in store.list("log/")]
    assert "log/state-v00000000000000000001/_manifest.avro" in deep and "other/x" not in deep
    assert list(store.list("does-not-exist/")) == []


def test_unsupported_scheme_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="hdfs://namenode") as err:
        open_store("hdfs://namenode/t")
    assert "gs://" in str(err.value)  # the supported schemes are listed


def test_s3_errors_and_repr_never_show_credentials(moto_server: Any) -> None:
    from tests.conftest import BUCKET

    secret = "SUPER-SECRET-KEY-123"
    store = open_store(
        f"s3://{BUCKET}/creds",
        endpoint_url=moto_server.endpoint_url,
        region="us-east-1",
        access_key_id="AKIDTEST",
        secret_access_key=secret,
        session_token="TOKEN-XYZ",
        path_style=True,
    )
    with pytest.raises(StorageError) as err:
        store.read("missing")
    assert secret not in str(err.value) and "TOKEN-XYZ" not in str(err.value)
    assert secret not in repr(store._options) and "TOKEN-XYZ" not in repr(store._options)  # type: ignore[attr-defined]
    assert "s3://indextables-test/creds/missing" in str(err.value)


def test_credentials_never_reach_the_log_output_or_messages(
    moto_server: Any, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    import logging

    from executor_lib.cli import main as cli_main
    from tests.conftest import BUCKET
    from tests.log.helpers import add, make_table

    secret, token = "SUPER-SECRET-KEY-456", "TOKEN-ABC"
    options = {
        "endpoint_url": moto_server.endpoint_url,
        "region": "us-east-1",
        "access_key_id": "AKIDTEST",
        "secret_access_key": secret,
        "session_token": token,
        "path_style": True,
    }
    uri = f"s3://{BUCKET}/creds-log"
    caplog.set_level(logging.DEBUG)
    log = make_table(uri, options)
    log.commit([add()])
    store = open_store(uri, **options)
    for obj in store.list(""):
        body = store.read(obj.key)
        assert secret.encode() not in body and token.encode() not in body
    args = ["describe", uri, "--json"] + [f"-o{k}={v}" for k, v in options.items()]
    assert cli_main(args) == 0
    assert cli_main(["describe", uri.replace(BUCKET, "missing-bucket"), *args[3:]]) == 2
    out, err = capsys.readouterr()
    # botocore's own DEBUG output (signing details) is outside this project; everything we log,
    # and every record at INFO or above, must be clean
    ours = [r.getMessage() for r in caplog.records if r.name.startswith("executor_lib") or r.levelno >= logging.INFO]
    for text in (out, err, *ours, repr(log), repr(store)):
        assert secret not in text and token not in text


def test_s3_missing_bucket_is_named(moto_server: Any) -> None:
    store = open_store(
        "s3://no-such-bucket-xyz/t", endpoint_url=moto_server.endpoint_url, region="us-east-1", path_style=True
    )
    with pytest.raises(StorageError, match="bucket 'no-such-bucket-xyz' does not exist") as err:
        store.read("k")
    assert not isinstance(err.value, ObjectNotFoundError) and not err.value.retryable


def test_bad_storage_option_values_name_the_option() -> None:
    with pytest.raises(ConfigError, match="storage option max_attempts='x'"):
        open_store("s3://b/t", max_attempts="x")
    with pytest.raises(ConfigError, match="pathStyleAccess='ture': expected true or false"):
        open_store("s3://b/t", **{"spark.indextables.s3.pathStyleAccess": "ture"})
    with pytest.raises(ConfigError, match="unknown storage option 'endpoint_uri'"):
        open_store("s3://b/t", endpoint_uri="http://x")


def test_local_keys_cannot_escape_the_root(tmp_path: Any) -> None:
    store = open_store(str(tmp_path / "t"))
    with pytest.raises(StorageError, match="escapes the store root"):
        store.read("../secret")
    with pytest.raises(StorageError, match="escapes the store root"):
        store.put("/etc/passwd", b"x")


def test_put_file_streams_large_files(table: tuple[str, dict[str, Any]], tmp_path: Any) -> None:
    uri, options = table
    if options:  # S3: force a multipart upload with the smallest part size S3 allows
        options = {**options, "multipart_threshold": 5 * 1024 * 1024, "multipart_chunksize": 5 * 1024 * 1024}
    store = open_store(uri, **options)
    data = bytes(range(256)) * (12 * 1024 * 1024 // 256)  # 12 MiB: three parts
    source = tmp_path / "big.bin"
    source.write_bytes(data)
    store.put_file("splits/big.split", str(source))
    assert store.head("splits/big.split").size == len(data)
    assert store.read_range("splits/big.split", 6 * 1024 * 1024, 16) == data[6 * 1024 * 1024 : 6 * 1024 * 1024 + 16]
    assert store.read("splits/big.split") == data


def test_get_file_downloads_in_parts_and_names_a_missing_object(
    table: tuple[str, dict[str, Any]], tmp_path: Any
) -> None:
    """The split cache downloads through ``get_file``: whole, in ranges on S3 (multipart), never through memory."""
    uri, options = table
    if options:
        options = {**options, "multipart_threshold": 5 * 1024 * 1024, "multipart_chunksize": 5 * 1024 * 1024}
    store = open_store(uri, **options)
    data = bytes(range(256)) * (11 * 1024 * 1024 // 256)  # three ranges on S3
    store.put("splits/big.split", data)
    target = tmp_path / "copy.split"
    assert store.get_file("splits/big.split", str(target)) == len(data)
    assert target.read_bytes() == data
    with pytest.raises(ObjectNotFoundError, match=r"splits/missing\.split"):
        store.get_file("splits/missing.split", str(tmp_path / "missing"))
