"""IndexTables4Spark (the JVM implementation) beside this project: ``JvmPeer`` runs one release's
shaded jar in a PySpark 3.5 process of its own (``runner.py``) and takes write / SQL / read jobs.
``scripts/jvm-peer.sh`` installs it into ``~/.cache/indextables/jvm``."""

from harness.jvm_peer.client import (
    CONF_ENV,
    FORMATS,
    KNOWN_RELEASES,
    RELEASE_CONF,
    RELEASES,
    VERSIONS,
    VERSIONS_ENV,
    JvmPeer,
    JvmPeerBlocked,
    JvmPeerError,
    JvmPeerNotInstalled,
    blocked_reason,
    env_conf,
    install,
    jar_path,
    missing,
    peer_home,
    venv_python,
    versions,
)

__all__ = [
    "CONF_ENV",
    "FORMATS",
    "KNOWN_RELEASES",
    "RELEASES",
    "RELEASE_CONF",
    "VERSIONS",
    "VERSIONS_ENV",
    "JvmPeer",
    "JvmPeerBlocked",
    "JvmPeerError",
    "JvmPeerNotInstalled",
    "blocked_reason",
    "env_conf",
    "install",
    "jar_path",
    "missing",
    "peer_home",
    "venv_python",
    "versions",
]
