#!/usr/bin/env bash
# The docker tests (pytest marker `docker`): the cluster test body on the docker backend and the
# container-fault stress run. Gets a Docker engine (scripts/docker-engine.sh: installs Debian's
# docker.io if missing and starts dockerd), builds or reuses the images (python -m harness images:
# a cold build takes about 5 minutes here, a warm one under a second), runs the tests one at a time
# and, if this script started the engine, stops it again. CI runs it after scripts/test.sh.
source "$(dirname "$0")/_venv.sh" "test,dev"
if bash scripts/docker-engine.sh status >/dev/null 2>&1; then
    started_engine=0
else
    started_engine=1
fi
bash scripts/docker-engine.sh start
if [ "$started_engine" = 1 ]; then
    trap 'bash scripts/docker-engine.sh stop' EXIT
fi
start=$(date +%s)
# --storage azure: the Azurite image too, from the host's Azurite (npm; as root, Node.js from Debian first)
.venv/bin/python -m harness.azurite --install >/dev/null
.venv/bin/python -m harness images --storage azure
echo "images ready in $(( $(date +%s) - start )) s"
.venv/bin/python -m pytest -n 0 -m docker "$@"
