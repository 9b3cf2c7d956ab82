"""A local classic Spark session that prints Spark's warnings and errors but not its start-up noise.

``quiet_local_session(conf)`` is what the benchmarks run on; the machinery lives in
``connect_plugin.local`` (which ``connect_plugin.local_session()``, the README's way to a local
session, also uses) and is re-exported here for the harness, the benchmarks and the tests. A plain
``SparkSession.builder`` session prints on stderr, before any work: Spark's "default log4j profile"
lines, a warning that the hostname resolves to a loopback address, Hadoop's NativeCodeLoader
warning, the JVM's "Using incubator modules" notice and "replaced a statically registered data
source"; this one prints none of them.
"""

from __future__ import annotations

from connect_plugin.local import (
    JVM_NOTICES,
    LOG4J2_CONFIG,
    forward_stderr,
    get_or_create_retrying,
    quiet_conf,
    quiet_local_session,
)

__all__ = [
    "JVM_NOTICES",
    "LOG4J2_CONFIG",
    "forward_stderr",
    "get_or_create_retrying",
    "quiet_conf",
    "quiet_local_session",
]
