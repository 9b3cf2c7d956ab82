#!/usr/bin/env bash
# Set up a virtualenv and run the main job on the embedded default (local filesystem table).
source "$(dirname "$0")/_venv.sh" s3
exec .venv/bin/indextables demo "$@"
