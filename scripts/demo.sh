#!/usr/bin/env bash
# Set up a virtualenv (with Spark and S3 support) and run the main job: a local Spark Connect
# server, generated logs indexed into an IndexTables table, searched, aggregated, merged and
# purged, timed against Parquet. Flags go to the job: bash scripts/demo.sh --help
source "$(dirname "$0")/_venv.sh" "spark,s3"
exec .venv/bin/python -m indextables_demo "$@"
