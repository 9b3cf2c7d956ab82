"""This directory's table bodies run on the local filesystem, S3 (moto, lock-patched, and versitygw, a
real S3 server unpatched), Azure (Azurite) and GCS (fake-gcs-server)."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["local", "s3", "versitygw", "azure", "gcs"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)
