#!/usr/bin/env bash
# Installs the JVM peer (IndexTables4Spark, the JVM implementation this project is compatible with)
# beside this project, for the `jvm` tests (tests/jvm/) and harness/jvm_peer:
#   - its self-contained shaded jars into $INDEXTABLES_JVM_HOME/jars (default ~/.cache/indextables/jvm/jars),
#     nothing of them in the repository: a release whose jar is in ../shared/jvm/ beside the checkout
#     (0.5.3, built from its public source: ../shared/jvm/README.md) is copied from there after its SHA-256
#     is checked against ../shared/jvm/SHA256SUMS (a mismatch, or a jar SHA256SUMS does not name, fails);
#     any other release is fetched with Maven from Maven Central;
#   - a separate virtualenv ($INDEXTABLES_JVM_HOME/venv) with the PySpark 3.5 the jars are built for.
# Idempotent: when both are there (a stamp records what was installed) it returns at once (the shared
# jar is checked again every time: about 0.1 s).
# Exit status: 0 installed; 3 a jar is neither in ../shared/jvm nor served by Maven Central (the exact
# command and Maven's error are printed and written to $INDEXTABLES_JVM_HOME/BLOCKED; the jars that could
# be installed are); anything else: another failure.
set -euo pipefail

HOME_DIR="${INDEXTABLES_JVM_HOME:-$HOME/.cache/indextables/jvm}"
JARS="$HOME_DIR/jars"
VENV="$HOME_DIR/venv"
# The release: 0.5.3, the one IndexTables4Spark jar these machines have (../shared/jvm; Maven Central
# serves none, and 0.5.4/0.5.5 cannot be built here). Built against Spark 3.5.3 / Scala 2.12 (its pom.xml).
# INDEXTABLES_JVM_VERSIONS (spaces or commas) names other releases instead (e.g. "0.5.3 0.5.4"); a jar
# already at jar_path is used as it is (e.g. one Maven Central does not serve, put there by hand).
# INDEXTABLES_SHARED_JVM names another directory than ../shared/jvm (with its SHA256SUMS).
NAMED_VERSIONS="${INDEXTABLES_JVM_VERSIONS:-}"
read -ra VERSIONS <<< "${NAMED_VERSIONS//,/ }"
[ "${#VERSIONS[@]}" -gt 0 ] || VERSIONS=(0.5.3)
SHARED="${INDEXTABLES_SHARED_JVM:-$(dirname "$0")/../../shared/jvm}"
SPARK_BUILD=3.5.3
PYSPARK_VERSION=3.5.3
PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1
VENV_REQUIREMENTS=("pyspark==$PYSPARK_VERSION" "pyarrow>=15,<19" "pandas>=2.0,<2.3" "numpy<2")
STAMP="$HOME_DIR/installed"
STAMP_TEXT="versions=${VERSIONS[*]} spark=$SPARK_BUILD venv=${VENV_REQUIREMENTS[*]}"

jar_name() { echo "indextables_spark-$1_spark_$SPARK_BUILD-linux-x86_64-shaded.jar"; }
jar_path() { echo "$JARS/$(jar_name "$1")"; }

# 0. The jars in ../shared/jvm: checked against its SHA256SUMS, copied when the copy differs.
from_shared() {
    local v name want got
    for v in "${VERSIONS[@]}"; do
        name="$(jar_name "$v")"
        [ -f "$SHARED/$name" ] || continue
        want="$(awk -v n="$name" '$2 == n || $2 == "*" n { print $1 }' "$SHARED/SHA256SUMS" 2>/dev/null)"
        if [ -z "$want" ]; then
            echo "jvm-peer: $SHARED/SHA256SUMS does not name $name: not used" >&2
            return 1
        fi
        got="$(sha256sum "$SHARED/$name" | cut -d' ' -f1)"
        if [ "$got" != "$want" ]; then
            echo "jvm-peer: $SHARED/$name has SHA-256 $got, SHA256SUMS says $want: not used" >&2
            return 1
        fi
        if ! cmp -s "$SHARED/$name" "$(jar_path "$v")"; then
            mkdir -p "$JARS"
            cp "$SHARED/$name" "$(jar_path "$v").tmp"
            mv "$(jar_path "$v").tmp" "$(jar_path "$v")"
            echo "jvm-peer: IndexTables4Spark $v from $SHARED (SHA-256 checked)" >&2
        fi
    done
}
from_shared

installed() {
    grep -qxF "$STAMP_TEXT" "$STAMP" 2>/dev/null || return 1
    [ -x "$VENV/bin/python" ] || return 1
    for v in "${VERSIONS[@]}"; do [ -s "$(jar_path "$v")" ] || return 1; done
}

# tantivy4java (the engine alone, for the tantivy4java peer) is served by Maven Central even when the
# IndexTables4Spark jars are not: fetched first, on its own; its exit 3 (not served) does not stop this install.
t4j_rc=0
bash "$(dirname "$0")/tantivy4java.sh" || t4j_rc=$?
[ "$t4j_rc" = 0 ] || [ "$t4j_rc" = 3 ] || exit "$t4j_rc"

if installed; then
    exit 0
fi

for tool in mvn java; do
    command -v "$tool" >/dev/null || { echo "jvm-peer: '$tool' is not on PATH (needs Maven and Java 17)" >&2; exit 1; }
done
mkdir -p "$JARS"
rm -f "$HOME_DIR/BLOCKED"

# 1. The PySpark 3.5 virtualenv (PyPI).
if ! grep -qxF "${VENV_REQUIREMENTS[*]}" "$VENV/requirements" 2>/dev/null; then
    echo "jvm-peer: making $VENV (${VENV_REQUIREMENTS[*]}) ..." >&2
    [ -x "$VENV/bin/python" ] || "${PYTHON:-python3}" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${VENV_REQUIREMENTS[@]}"
    echo "${VENV_REQUIREMENTS[*]}" > "$VENV/requirements"
fi

# 2. The shaded jars (Maven Central), one per release; -U: a miss is asked again, not read from the
# failure Maven caches in ~/.m2.
fetch_jars() {
  local blocked=0 v jar artifact out cmd
  for v in "${VERSIONS[@]}"; do
    jar="$(jar_path "$v")"
    [ -s "$jar" ] && continue
    artifact="io.indextables:indextables_spark:${v}_spark_$SPARK_BUILD:jar:linux-x86_64-shaded"
    cmd=(mvn -B -q -U -Dstyle.color=never "$PLUGIN:copy" "-Dartifact=$artifact" "-DoutputDirectory=$JARS")
    echo "jvm-peer: fetching $artifact ..."
    if ! out="$("${cmd[@]}" 2>&1)"; then
        out="$(sed 's/\x1b\[[0-9;]*m//g' <<<"$out")"
        if grep -qF "Could not find artifact" <<<"$out"; then
            blocked=1
            echo "Maven Central does not serve the IndexTables4Spark jar $artifact (and $SHARED has no $(jar_name "$v"))"
        else
            echo "jvm-peer: Maven could not fetch $artifact"
        fi
        echo "command: ${cmd[*]}"
        echo "error: $(grep -m 1 -F '[ERROR]' <<<"$out" || tail -3 <<<"$out")"
        [ "$blocked" = 1 ] || return 1
    elif [ ! -s "$jar" ]; then
        echo "jvm-peer: Maven reported success but $jar is missing"
        return 1
    fi
  done
  return $((blocked ? 3 : 0))
}
rc=0
fetch_jars > "$HOME_DIR/fetch.log" 2>&1 || rc=$?
cat "$HOME_DIR/fetch.log" >&2
if [ "$rc" != 0 ]; then
    [ "$rc" != 3 ] || grep -v '^jvm-peer: fetching' "$HOME_DIR/fetch.log" > "$HOME_DIR/BLOCKED"
    exit "$rc"
fi
echo "$STAMP_TEXT" > "$STAMP"
echo "jvm-peer: installed in $HOME_DIR" >&2
