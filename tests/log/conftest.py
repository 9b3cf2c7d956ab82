"""This directory's table bodies run on the local filesystem, S3 (moto), Azure (Azurite) and GCS
(fake-gcs-server), and with ``-m slow`` on versitygw too (a real S3 server, unpatched: all 62 bodies
took 71 s, more than the default run can spare; its concurrency and ambiguous-commit tests run on it
by default)."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["local", "s3", pytest.param("versitygw", marks=pytest.mark.slow), "azure", "gcs"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)
