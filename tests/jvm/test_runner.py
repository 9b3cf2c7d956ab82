"""The JVM peer's runner itself (``harness.jvm_peer``): its JSON jobs and Arrow results on the peer's real
PySpark 3.5, without IndexTables4Spark (``JvmPeer(None, ...)``: plain Parquet, the transport only), and
the errors that name what is missing or wrong."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import jvm_peer
from tests.jvm import queries as q

pytestmark = pytest.mark.jvm


@pytest.fixture(scope="module")
def bare_peer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[jvm_peer.JvmPeer]:
    if not jvm_peer.venv_python().exists():
        with contextlib.suppress(jvm_peer.JvmPeerBlocked):
            jvm_peer.install()  # makes the PySpark 3.5 venv before it fetches the jars
    if not jvm_peer.venv_python().exists():
        pytest.skip(f"the JVM peer's PySpark 3.5 venv is not installed: {jvm_peer.blocked_reason()}")
    peer = jvm_peer.JvmPeer(None, tmp_path_factory.mktemp("bare-peer")).start()
    yield peer
    peer.stop()


def test_jobs_carry_every_type_both_ways(bare_peer: jvm_peer.JvmPeer, tmp_path: Path) -> None:
    assert bare_peer.spark_version is not None and bare_peer.spark_version.startswith("3.5.")
    values = q.rows(30)
    path = str(tmp_path / "pq")
    bare_peer.write(q.arrow_table(values), path, mode="overwrite", format="parquet", schema=q.ddl())
    back = bare_peer.read(path, format="parquet", select=q.ARROW.names)
    assert q.sort_rows(q.from_arrow(back)) == q.sort_rows(q.from_python(values))
    hits = bare_peer.read(path, format="parquet", filter="i32 >= 10 AND s = 'beta'", select=["id"])
    assert sorted(r["id"] for r in hits.to_pylist()) == [v[0] for v in values if v[3] >= 10 and v[1] == "beta"]
    bare_peer.view(path, "t", format="parquet")
    counts = bare_peer.sql("SELECT day, count(*) AS n FROM t GROUP BY day ORDER BY day")
    assert counts.to_pylist() == [{"day": f"2024-01-0{d}", "n": 10} for d in (1, 2, 3)]
    empty = bare_peer.sql("SELECT id, ts FROM t WHERE id < 0")
    assert empty.num_rows == 0 and empty.column_names == ["id", "ts"]


def test_ingest_times_overwrites_of_the_cached_rows(bare_peer: jvm_peer.JvmPeer, tmp_path: Path) -> None:
    """The ingest benchmark's job: the Parquet rows, cached, written ``repeat`` times over one table."""
    source, target = str(tmp_path / "src"), str(tmp_path / "out")
    bare_peer.write(q.arrow_table(q.rows(30)), source, mode="overwrite", format="parquet", schema=q.ddl())
    rows, seconds = bare_peer.ingest(source, target, repeat=2, format="parquet")
    assert rows == 30 and 0 < seconds < 600
    assert bare_peer.read(target, format="parquet", select=["id"]).num_rows == 30, "overwritten, not appended"


def test_a_failed_job_names_the_error_and_the_peer_goes_on(bare_peer: jvm_peer.JvmPeer) -> None:
    with pytest.raises(jvm_peer.JvmPeerError, match=r"the bare PySpark 3.5 runner: sql failed: .*no_such_view"):
        bare_peer.sql("SELECT * FROM no_such_view")
    assert bare_peer.sql("SELECT 1 AS one").to_pylist() == [{"one": 1}]


def test_a_missing_install_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INDEXTABLES_JVM_HOME", str(tmp_path / "nothing"))
    with pytest.raises(jvm_peer.JvmPeerNotInstalled, match=r"indextables_spark-0.5.5_spark_3.5.3-linux-x86_64"):
        jvm_peer.JvmPeer("0.5.5", tmp_path / "work").start()
    with pytest.raises(ValueError, match="unknown IndexTables4Spark version"):
        jvm_peer.JvmPeer("9.9", tmp_path / "work")


def test_a_jar_without_the_extensions_stops_the_start_naming_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spark only logs a warning for an extension class it cannot load; the runner refuses to start."""
    if not jvm_peer.venv_python().exists():
        pytest.skip("the JVM peer's PySpark 3.5 venv is not installed")
    home = tmp_path / "home"
    home.mkdir()
    (home / "venv").symlink_to(jvm_peer.venv_python().parent.parent)  # the real PySpark 3.5 venv
    monkeypatch.setenv("INDEXTABLES_JVM_HOME", str(home))
    jar = jvm_peer.jar_path("0.5.5")
    jar.parent.mkdir()
    jar.write_bytes(b"")  # not a jar: no IndexTables4Spark classes in it
    peer = jvm_peer.JvmPeer("0.5.5", tmp_path / "work")
    with pytest.raises(
        jvm_peer.JvmPeerError, match=r"(?s)0\.5\.5 did not start.*ClassNotFoundException.*IndexTablesSparkExtensions"
    ):
        peer.start()
    assert peer._proc is None  # stopped


def test_other_releases_are_named_by_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default release is 0.5.3 (its jar from ../shared/jvm); INDEXTABLES_JVM_VERSIONS names others (Maven
    Central, or a jar put at jar_path by hand); 0.5.3 and 0.5.4 answer to the provider class (no short name
    registered in their jars), 0.5.5 to "indextables"."""
    monkeypatch.delenv(jvm_peer.VERSIONS_ENV, raising=False)
    assert jvm_peer.versions() == jvm_peer.RELEASES == ("0.5.3",)
    monkeypatch.setenv(jvm_peer.VERSIONS_ENV, " 0.5.4, 0.5.3 0.5.4 ")
    assert jvm_peer.versions() == ("0.5.4", "0.5.3")
    monkeypatch.setenv("INDEXTABLES_JVM_HOME", str(tmp_path / "nothing"))
    peer = jvm_peer.JvmPeer("0.5.3", tmp_path / "work")
    assert peer.format == "io.indextables.provider.IndexTablesProvider"
    assert jvm_peer.JvmPeer("0.5.4", tmp_path / "work").format == "io.indextables.provider.IndexTablesProvider"
    assert jvm_peer.JvmPeer("0.5.5", tmp_path / "work").format == "indextables"  # a release is always known
    with pytest.raises(jvm_peer.JvmPeerNotInstalled, match=r"indextables_spark-0\.5\.3_spark_3\.5\.3-linux-x86_64"):
        peer.start()
    with pytest.raises(ValueError, match=r"unknown IndexTables4Spark version '0\.5\.2'.*INDEXTABLES_JVM_VERSIONS"):
        jvm_peer.JvmPeer("0.5.2", tmp_path / "work")


def test_a_release_starts_with_the_settings_it_needs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """0.5.3 allocates 40 bytes per allowed hit up front: its peer reads with defaultLimit=1000000, not the
    runner's Int.MaxValue (which aborts its JVM); INDEXTABLES_JVM_CONF and a peer's own conf still win."""
    monkeypatch.delenv(jvm_peer.CONF_ENV, raising=False)
    assert jvm_peer.JvmPeer("0.5.3", tmp_path / "w").conf == {"spark.indextables.read.defaultLimit": "1000000"}
    assert jvm_peer.JvmPeer("0.5.4", tmp_path / "w").conf == {}
    monkeypatch.setenv(jvm_peer.CONF_ENV, "spark.indextables.read.defaultLimit=5000")
    assert jvm_peer.JvmPeer("0.5.3", tmp_path / "w").conf == {"spark.indextables.read.defaultLimit": "5000"}


def test_settings_for_every_peer_are_named_by_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """INDEXTABLES_JVM_CONF: key=value pairs every peer starts with; a peer's own conf wins."""
    monkeypatch.delenv(jvm_peer.CONF_ENV, raising=False)
    assert jvm_peer.env_conf() == {}
    monkeypatch.setenv(jvm_peer.CONF_ENV, " spark.indextables.read.defaultLimit=1000000\n a.b=x=y ")
    assert jvm_peer.env_conf() == {"spark.indextables.read.defaultLimit": "1000000", "a.b": "x=y"}
    peer = jvm_peer.JvmPeer("0.5.4", tmp_path / "work", conf={"a.b": "mine"})
    assert peer.conf == {"spark.indextables.read.defaultLimit": "1000000", "a.b": "mine"}
    monkeypatch.setenv(jvm_peer.CONF_ENV, "a.b=1 oops")
    with pytest.raises(ValueError, match="INDEXTABLES_JVM_CONF: expected key=value pairs, got 'oops'"):
        jvm_peer.env_conf()
