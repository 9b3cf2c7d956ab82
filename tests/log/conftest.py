"""This directory's table bodies run on the local filesystem, S3 (moto) and Azure (Azurite)."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["local", "s3", "azure"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)
