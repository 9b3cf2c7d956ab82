"""What versitygw (a real S3 server, posix backend) answers differently from moto, and what the S3 store
makes of it. The contract itself runs on versitygw in test_storage.py (the ``versitygw`` param of
``backend``); docs/testing.md lists the differences.

Before the fix: a wrong access key on versitygw (404 ``XAdminUserNotFound``) read as "no such object" (a
table looked empty or missing, and the error was retryable), and a key under an object's name (409
``ObjectParentIsFile``) was an ambiguous write "conflicted with a concurrent write"."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from botocore.exceptions import ClientError

import executor_lib
from executor_lib.storage import open_store
from executor_lib.storage.s3 import S3Store
from indextables_contract.errors import (
    AmbiguousWriteError,
    ObjectAlreadyExistsError,
    ObjectNotFoundError,
    StorageError,
)
from tests.conftest import BUCKET, s3_options
from tests.log.helpers import make_table

pytestmark = pytest.mark.s3


def _error(status: int, code: str) -> ClientError:
    return ClientError({"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "PutObject")


@pytest.mark.parametrize(
    ("status", "code", "kind", "retryable"),
    [
        (404, "NoSuchKey", ObjectNotFoundError, True),
        (404, "404", ObjectNotFoundError, True),  # a HEAD: no body, botocore names the status
        (404, "", ObjectNotFoundError, True),
        (404, "XAdminUserNotFound", StorageError, False),  # versitygw: an unknown access key
        (412, "PreconditionFailed", ObjectAlreadyExistsError, True),
        (409, "ConditionalRequestConflict", AmbiguousWriteError, True),
        (409, "", AmbiguousWriteError, True),
        (409, "ObjectParentIsFile", StorageError, False),  # versitygw: a key below an object
        (409, "ExistingObjectIsDirectory", StorageError, False),  # versitygw: a key above objects
    ],
)
def test_error_codes_map_to_the_contract(status: int, code: str, kind: type, retryable: bool) -> None:
    err = S3Store(f"s3://{BUCKET}/t")._fail("k", "write", _error(status, code))
    assert type(err) is kind and err.retryable is retryable
    if kind is StorageError:
        assert code in str(err)


def test_a_wrong_access_key_is_an_error_not_a_missing_table(versitygw_server: Any) -> None:
    uri = f"s3://{BUCKET}/wrong-key/{uuid.uuid4().hex}"
    make_table(uri, s3_options(versitygw_server))
    wrong = {**s3_options(versitygw_server), "access_key_id": "WRONG-KEY-123", "secret_access_key": "WRONG-SECRET-9"}
    store = open_store(uri, **wrong)
    for call in (
        lambda: store.read("_transaction_log/00000000000000000000.json"),
        lambda: list(store.list("_transaction_log/")),
        lambda: executor_lib.open_log(uri, **wrong).snapshot(),
    ):
        with pytest.raises(StorageError) as err:
            call()
        assert not isinstance(err.value, ObjectNotFoundError) and not err.value.retryable
        assert "XAdminUserNotFound" in str(err.value) and "WRONG-SECRET-9" not in str(err.value)


def test_a_key_clashing_with_an_objects_name_is_refused_not_ambiguous(versitygw_server: Any) -> None:
    """The posix backend keeps objects as files: ``x`` and ``x/y`` cannot both exist (moto and S3 allow it)."""
    store = open_store(f"s3://{BUCKET}/clash/{uuid.uuid4().hex}", **s3_options(versitygw_server))
    store.put("x/file", b"1")
    for key, code in (("x/file/child", "ObjectParentIsFile"), ("x", "ExistingObjectIsDirectory")):
        with pytest.raises(StorageError, match=code) as err:
            store.put_if_absent(key, b"2")
        assert not isinstance(err.value, AmbiguousWriteError) and not err.value.retryable
    assert store.read("x/file") == b"1"


def test_conditional_writes_and_key_spellings_on_versitygw(versitygw_server: Any) -> None:
    """Recorded differences: versitygw honours a stale If-Match on CompleteMultipartUpload (moto ignores
    it), refuses If-None-Match with an ETag (501; moto overwrites), and resolves ``a//b`` to ``a/b``
    (moto keeps both): table paths with empty segments are refused before any store call."""
    import boto3

    o = s3_options(versitygw_server)
    client = boto3.client(
        "s3",
        endpoint_url=o["endpoint_url"],
        region_name="us-east-1",
        aws_access_key_id=o["access_key_id"],
        aws_secret_access_key=o["secret_access_key"],
    )
    key = f"spelling/{uuid.uuid4().hex}"
    client.put_object(Bucket=BUCKET, Key=key, Body=b"old")
    upload = client.create_multipart_upload(Bucket=BUCKET, Key=key)["UploadId"]
    etag = client.upload_part(Bucket=BUCKET, Key=key, UploadId=upload, PartNumber=1, Body=b"new")["ETag"]
    parts = {"Parts": [{"ETag": etag, "PartNumber": 1}]}
    with pytest.raises(ClientError, match="PreconditionFailed"):
        client.complete_multipart_upload(
            Bucket=BUCKET, Key=key, UploadId=upload, MultipartUpload=parts, IfMatch='"00000000"'
        )
    with pytest.raises(ClientError, match="NotImplemented"):
        client.put_object(Bucket=BUCKET, Key=key, Body=b"x", IfNoneMatch='"00000000"')
    assert client.get_object(Bucket=BUCKET, Key=key)["Body"].read() == b"old"
    client.put_object(Bucket=BUCKET, Key=f"{key}-dir//y", Body=b"y")
    listed = [c["Key"] for c in client.list_objects_v2(Bucket=BUCKET, Prefix=f"{key}-dir/")["Contents"]]
    assert listed == [f"{key}-dir/y"]
