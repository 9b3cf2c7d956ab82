"""What only the Azure backend has: its URI forms and settings, block uploads, the errors of a bad
account key or a missing container (naming account and container, never the key), secrets kept out
of messages, and the install hint without azure-storage-blob. The contract itself runs on Azure in
test_storage.py (the ``azure`` param of ``backend``)."""

from __future__ import annotations

import ast
import uuid
from pathlib import Path
from typing import Any

import pytest

from executor_lib.storage import open_store
from executor_lib.storage.azure import AzureStore, parse_azure_uri
from harness.azurite import ACCOUNT, ACCOUNT_KEY
from indextables_contract.errors import ConfigError, ObjectAlreadyExistsError, ObjectNotFoundError, StorageError
from tests.conftest import AZURE_CONTAINER, REPO_ROOT, azure_options, azure_uri

pytestmark = pytest.mark.azure

BAD_KEY = "c2VjcmV0LWJ1dC13cm9uZy1rZXktZm9yLWF6dXJpdGUtdGVzdHM="


def test_uri_forms_parse_to_container_account_and_prefix() -> None:
    assert parse_azure_uri("abfss://logs@acct.dfs.core.windows.net/a/b/") == parse_azure_uri(
        "wasbs://logs@acct.blob.core.windows.net/a/b"
    )
    loc = parse_azure_uri("abfss://logs@acct.dfs.core.chinacloudapi.cn/t")
    assert (loc.container, loc.account, loc.suffix, loc.prefix) == ("logs", "acct", "core.chinacloudapi.cn", "t")
    loc = parse_azure_uri("abfss://logs/t/x")
    assert (loc.container, loc.account, loc.prefix) == ("logs", None, "t/x")
    assert parse_azure_uri("azure://logs/t").container == "logs"
    with pytest.raises(ConfigError, match="no container"):
        parse_azure_uri("abfss:///t")


def test_every_uri_form_reaches_the_same_blobs(azurite_server: Any) -> None:
    options = azure_options(azurite_server)
    path = f"forms/{uuid.uuid4().hex}"
    open_store(azure_uri(path), **options).put("k.json", b"v")
    forms = [
        f"abfs://{AZURE_CONTAINER}@{ACCOUNT}.dfs.core.windows.net/{path}",
        f"wasbs://{AZURE_CONTAINER}@{ACCOUNT}.blob.core.windows.net/{path}/",
        f"wasb://{AZURE_CONTAINER}@{ACCOUNT}.blob.core.windows.net/{path}",
        f"azure://{AZURE_CONTAINER}/{path}",
    ]
    for uri in forms:
        assert open_store(uri, **options).read("k.json") == b"v", uri
    # abfss://container/path: the account from the settings (here the endpoint names it too)
    by_setting = open_store(
        f"abfss://{AZURE_CONTAINER}/{path}", **options, **{"spark.indextables.azure.accountName": ACCOUNT}
    )
    assert by_setting.read("k.json") == b"v"
    # a connection string alone (what Azure's portal hands out)
    connection = (
        f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={ACCOUNT_KEY};"
        f"BlobEndpoint={azurite_server.endpoint};"
    )
    store = open_store(f"abfss://{AZURE_CONTAINER}/{path}", **{"spark.indextables.azure.connectionString": connection})
    assert store.read("k.json") == b"v"
    assert [o.key for o in store.list("")] == ["k.json"]


def test_a_container_without_an_account_is_a_config_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_CONNECTION_STRING"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.azure/credentials
    store = open_store("abfss://logs/t")
    with pytest.raises(
        ConfigError, match=r"container 'logs': no storage account .*spark\.indextables\.azure\.accountName"
    ):
        store.read("x")


def test_account_from_the_jvm_credentials_file(
    azurite_server: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``~/.azure/credentials`` (IndexTables4Spark's and tantivy4java's file) gives account and key."""
    for name in ("AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".azure").mkdir()
    (tmp_path / ".azure" / "credentials").write_text(
        f"[default]\nstorage_account = {ACCOUNT}\naccount_key = {ACCOUNT_KEY}\n"
    )
    endpoint = {"spark.indextables.azure.endpoint": azurite_server.endpoint}
    store = open_store(f"abfss://{AZURE_CONTAINER}/file-creds/{uuid.uuid4().hex}", **endpoint)
    store.put_if_absent("a", b"1")
    assert store.read("a") == b"1"


def test_large_files_upload_as_blocks(azurite_server: Any, tmp_path: Path) -> None:
    """Above ``multipart_threshold`` a file goes up as staged blocks of ``multipart_chunksize``,
    committed in one Put Block List; ranged reads find every byte."""
    options = {**azure_options(azurite_server), "multipart_threshold": 5 << 20, "multipart_chunksize": 5 << 20}
    store = open_store(azure_uri(f"blocks/{uuid.uuid4().hex}"), **options)
    assert isinstance(store, AzureStore)
    data = bytes(range(256)) * (12 * 1024 * 1024 // 256)
    source = tmp_path / "big.bin"
    source.write_bytes(data)
    store.put_file("splits/big.split", str(source))
    blob = store._blob_client("splits/big.split")
    committed = blob.get_block_list("committed")[0]
    assert [b.size for b in committed] == [5 << 20, 5 << 20, 2 << 20]
    tail = store.read_range("splits/big.split", len(data) - 100, 1000)
    assert tail == data[-100:]
    small = tmp_path / "small.bin"
    small.write_bytes(b"x" * 1000)
    store.put_file("splits/small.split", str(small))
    assert store._blob_client("splits/small.split").get_block_list("committed")[0] == []  # one Put Blob


def test_put_if_absent_keeps_the_first_body_and_its_metadata(azurite_server: Any) -> None:
    store = open_store(azure_uri(f"meta/{uuid.uuid4().hex}"), **azure_options(azurite_server))
    assert isinstance(store, AzureStore)
    store.put_if_absent("_transaction_log/00000000000000000001.json", b"a", {"indextables-txn-id": "t-1"})
    with pytest.raises(ObjectAlreadyExistsError):
        store.put_if_absent("_transaction_log/00000000000000000001.json", b"b", {"indextables-txn-id": "t-2"})
    props = store._blob_client("_transaction_log/00000000000000000001.json").get_blob_properties()
    assert props.metadata == {"indextables_txn_id": "t-1"}


def test_a_bad_account_key_is_one_clear_error_without_the_key(
    azurite_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    import executor_lib

    caplog.set_level(logging.DEBUG)
    options = {**azure_options(azurite_server), "spark.indextables.azure.accountKey": BAD_KEY}
    uri = azure_uri(f"bad-key/{uuid.uuid4().hex}")
    store = open_store(uri, **options)
    for call in (lambda: store.read("k"), lambda: store.put_if_absent("k", b"1"), lambda: list(store.list(""))):
        with pytest.raises(StorageError) as err:
            call()
        text = str(err.value)
        assert not err.value.retryable and not isinstance(err.value, ObjectNotFoundError)
        assert f"storage account {ACCOUNT!r} refused the credentials for container {AZURE_CONTAINER!r}" in text
        assert BAD_KEY not in text and BAD_KEY not in repr(err.value)
    with pytest.raises(StorageError, match="refused the credentials") as err:
        executor_lib.create_table(uri, __import__("pyarrow").schema([("id", "int64")]), [], **options)
    for text in (str(err.value), repr(store), repr(store._options), *(r.getMessage() for r in caplog.records)):  # type: ignore[attr-defined]
        assert BAD_KEY not in text and ACCOUNT_KEY not in text


def test_a_missing_container_is_named_with_its_account(azurite_server: Any) -> None:
    import executor_lib

    uri = f"abfss://no-such-container@{ACCOUNT}.dfs.core.windows.net/t"
    store = open_store(uri, **azure_options(azurite_server))
    expected = f"container 'no-such-container' of storage account {ACCOUNT!r} does not exist"
    for call in (lambda: store.read("k"), lambda: store.head("k"), lambda: store.delete("k")):
        with pytest.raises(StorageError, match=expected) as err:
            call()
        assert not err.value.retryable and not isinstance(err.value, ObjectNotFoundError)
    with pytest.raises(StorageError, match=expected):
        executor_lib.open_log(uri, **azure_options(azurite_server)).snapshot()


def test_an_unreachable_endpoint_names_it_and_no_secret() -> None:
    from executor_lib.spark.connect_server import free_port

    sas = "sv=2024-01-01&sig=SUPERSECRETSIG"
    endpoint = f"http://127.0.0.1:{free_port()}/{ACCOUNT}"
    store = open_store(azure_uri("t"), **{"spark.indextables.azure.endpoint": f"{endpoint}?{sas}", "max_attempts": 1})
    with pytest.raises(StorageError) as err:
        store.read("k")
    assert f"cannot reach {endpoint}" in str(err.value)
    assert err.value.__cause__ is None  # the SDK's error quotes the request URL, SAS and all
    assert "SUPERSECRETSIG" not in str(err.value) and "SUPERSECRETSIG" not in repr(store)
    with pytest.raises(StorageError, match=r"outcome unknown|cannot reach"):
        store.put_if_absent("k", b"1")


def test_options_of_the_other_backend_are_ignored_and_unknown_ones_named() -> None:
    s3_and_azure = {
        "spark.indextables.aws.accessKey": "AKID",
        "spark.indextables.s3.endpoint": "http://x",
        "path_style": "true",
        "spark.indextables.azure.accountKey": "k",
        "azure_endpoint": "http://127.0.0.1:1/a",
        "max_attempts": "2",
    }
    azure = open_store(azure_uri("t"), **s3_and_azure)
    assert azure._options.max_attempts == 2 and azure._options.endpoint == "http://127.0.0.1:1/a"  # type: ignore[attr-defined]
    s3 = open_store("s3://b/t", **s3_and_azure)
    assert s3._options.access_key_id == "AKID" and s3._options.path_style  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="unknown storage option 'azure_acount_key'"):
        open_store(azure_uri("t"), azure_acount_key="x")


def test_credentials_in_an_azure_uri_are_refused_but_the_container_is_not_one() -> None:
    with pytest.raises(ConfigError, match=r"abfss://\*\*\*@acct.dfs.core.windows.net/t: credentials in a URI"):
        open_store("abfss://user:SECRET@acct.dfs.core.windows.net/t")
    store = open_store("abfss://logs@acct.dfs.core.windows.net/t/")
    assert store.root_uri == "abfss://logs@acct.dfs.core.windows.net/t"
    assert store.key_of("abfss://logs@acct.dfs.core.windows.net/t/splits/a.split") == "splits/a.split"


def test_only_the_azure_backend_imports_azure() -> None:
    offenders = []
    for package in ("executor_lib", "connect_plugin", "indextables_contract", "indextables_demo"):
        for path in (REPO_ROOT / package).rglob("*.py"):
            if path.parent == REPO_ROOT / "executor_lib" / "storage" and path.name in ("azure.py", "azure_config.py"):
                continue  # the Azure backend: its store, and its options and credentials
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom)
                    else []
                )
                offenders += [f"{path.relative_to(REPO_ROOT)}: {n}" for n in names if n.split(".")[0] == "azure"]
    assert not offenders


def test_without_azure_storage_blob_the_error_names_the_extra() -> None:
    from tests.test_imports import _run_blocked

    done = _run_blocked(
        ("azure",),
        """
        from executor_lib.storage import open_store
        from indextables_contract.errors import ConfigError
        open_store("s3://b/t"); open_store("/tmp/x")  # other stores need no azure
        try:
            open_store("abfss://logs@acct.dfs.core.windows.net/t")
        except ConfigError as e:
            print(e)
        """,
    )
    assert done.returncode == 0, done.stderr
    assert "pip install azure-storage-blob" in done.stdout and "pip install -e '.[azure]'" in done.stdout


def test_listing_pages_odd_names_and_start_after(azurite_server: Any) -> None:
    """The listing's own List Blobs pages (parsed here, not by the SDK): markers across pages, names
    that need escaping, sizes, times, directories and ``start_after`` across a page boundary."""
    store = open_store(azure_uri(f"pages/{uuid.uuid4().hex}"), **azure_options(azurite_server))
    assert isinstance(store, AzureStore)
    store.list_page_size = 3
    names = [f"log/{i:020d}.json" for i in range(8)] + ["log/a b+c%d=é.json", "log/sub/x", "log/sub/y", "top"]
    for i, name in enumerate(names):
        store.put(name, b"x" * i)
    listed = list(store.list("log/"))
    assert [o.key for o in listed] == sorted(n for n in names if n.startswith("log/"))
    assert {o.key: o.size for o in listed}["log/a b+c%d=é.json"] == 8
    assert all(o.modified_ms > 1_700_000_000_000 for o in listed)
    after = [o.key for o in store.list("log/0", start_after="log/00000000000000000004")]
    assert after == [f"log/{i:020d}.json" for i in range(4, 8)]
    top = [(o.key, o.is_dir) for o in store.list("", recursive=False)]
    assert top == [("log/", True), ("top", False)]
    assert [(o.key, o.is_dir) for o in store.list("log/s", recursive=False)] == [("log/sub/", True)]


def test_a_sas_in_the_endpoint_lists_reads_and_writes(azurite_server: Any) -> None:
    import datetime

    from azure.storage.blob import AccountSasPermissions, ResourceTypes, generate_account_sas

    sas = generate_account_sas(
        ACCOUNT,
        ACCOUNT_KEY,
        ResourceTypes(container=True, object=True),
        AccountSasPermissions(read=True, write=True, list=True, delete=True, create=True),
        datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1),
    )
    store = open_store(
        azure_uri(f"sas/{uuid.uuid4().hex}"), **{"spark.indextables.azure.endpoint": f"{azurite_server.endpoint}?{sas}"}
    )
    store.put_if_absent("a/1", b"one")
    store.put("a/2", b"two")
    assert [o.key for o in store.list("a/")] == ["a/1", "a/2"] and store.read("a/2") == b"two"
    sig = sas.split("sig=")[1].split("&")[0]
    assert sig not in repr(store) and sig not in store.cache_identity
    readonly = generate_account_sas(
        ACCOUNT,
        ACCOUNT_KEY,
        ResourceTypes(container=True, object=True),
        AccountSasPermissions(read=True, list=True),
        datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1),
    )
    denied = open_store(store.root_uri, **{"spark.indextables.azure.endpoint": f"{azurite_server.endpoint}?{readonly}"})
    assert denied.read("a/1") == b"one"
    with pytest.raises(StorageError, match="refused the credentials") as err:
        denied.put_if_absent("a/3", b"x")
    assert readonly.split("sig=")[1].split("&")[0] not in str(err.value) and err.value.__cause__ is None


def test_the_cli_takes_azure_settings_and_names_a_missing_container(
    azurite_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    import executor_lib
    from executor_lib.cli import main as cli_main

    options = azure_options(azurite_server)
    uri = azure_uri(f"cli/{uuid.uuid4().hex}")
    executor_lib.create_table(uri, __import__("pyarrow").schema([("id", "int64")]), [], **options)
    flags = [f"-o{k}={v}" for k, v in options.items()]
    assert cli_main(["describe", uri, "--json", *flags]) == 0
    missing = f"abfss://no-such-container@{ACCOUNT}.dfs.core.windows.net/t"
    assert cli_main(["describe", missing, *flags]) == 2
    out, err = capsys.readouterr()
    assert '"version": 0' in out.replace('"version":0', '"version": 0')
    assert f"container 'no-such-container' of storage account {ACCOUNT!r} does not exist" in err
    assert ACCOUNT_KEY not in out + err


def test_a_partial_service_principal_names_what_is_missing() -> None:
    store = open_store(
        azure_uri("sp"), **{"spark.indextables.azure.tenantId": "t", "spark.indextables.azure.clientSecret": "S3CRET"}
    )
    with pytest.raises(ConfigError, match=r"spark\.indextables\.azure\.clientId not set") as err:
        store.read("k")
    assert "S3CRET" not in str(err.value)


def test_a_service_principal_without_azure_identity_names_the_extra() -> None:
    import importlib.util

    if importlib.util.find_spec("azure.identity") is not None:
        pytest.skip("azure-identity is installed here")
    keys = {f"spark.indextables.azure.{k}": "x" for k in ("tenantId", "clientId", "clientSecret")}
    with pytest.raises(ConfigError, match=r"pip install azure-identity .*pip install -e '\.\[azure-identity\]'"):
        open_store(azure_uri("sp"), **keys).read("k")


def test_directory_entries_of_a_hierarchical_namespace_are_not_objects(azurite_server: Any, tmp_path: Path) -> None:
    """An ADLS Gen2 account (hierarchical namespace) keeps a directory for every path prefix and its
    Blob API lists each as a zero-byte blob with ``hdi_isfolder=true`` metadata (as Hadoop's WASB
    directory markers on flat accounts). Azurite has no hierarchical namespace, so the entries are made
    here as such an account lists them: listings, heads, snapshots, commits and searches ignore them."""
    import pyarrow as pa

    import executor_lib
    from executor_lib.cache.split_cache import SplitCache
    from executor_lib.splits.doc_mapping import mapping_for
    from executor_lib.splits.search.table_search import search_table
    from executor_lib.splits.write.publish import write_and_upload

    options = azure_options(azurite_server)
    uri = azure_uri(f"hns/{uuid.uuid4().hex}")
    schema = pa.schema([("id", pa.int64()), ("day", pa.string())])
    log = executor_lib.create_table(uri, schema, ["day"], **options)
    mapping = mapping_for(pa.schema([("id", pa.int64())]), {})  # the data columns: day is in the path
    log.commit([write_and_upload(log.store, pa.table({"id": [1, 2]}), mapping, {"day": "d1"})])
    store = log.store
    assert isinstance(store, AzureStore)
    before = [(o.key, o.size) for o in store.list("")]
    top_before = [(o.key, o.is_dir) for o in store.list("", recursive=False)]
    directories = {key.rsplit("/", i)[0] for key, _ in before for i in range(1, key.count("/") + 1)}
    assert {"_transaction_log", "day=d1"} <= directories
    for directory in directories:  # as an HNS account lists them: no trailing slash, hdi_isfolder
        store._blob_client(directory).upload_blob(b"", metadata={"hdi_isfolder": "true"})
    assert [(o.key, o.size) for o in store.list("")] == before
    assert [(o.key, o.is_dir) for o in store.list("", recursive=False)] == top_before
    assert not store.exists("_transaction_log") and not store.exists("day=d1")
    with pytest.raises(ObjectNotFoundError, match="a directory"):
        store.head("day=d1")
    reopened = executor_lib.open_log(uri, **options)
    assert reopened.snapshot().num_records == 2
    reopened.commit([write_and_upload(reopened.store, pa.table({"id": [3]}), mapping, {"day": "d2"})])
    found = search_table(reopened.store, reopened.snapshot(), "*", SplitCache(tmp_path / "cache"))
    assert sorted(found.column("id").to_pylist()) == [1, 2, 3]
