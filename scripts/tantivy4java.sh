#!/usr/bin/env bash
# Fetches tantivy4java (the search engine of IndexTables4Spark: the real native library, in its jar) and
# the Jackson jars it needs at run time, with Maven from Maven Central, into
# $INDEXTABLES_JVM_HOME/tantivy4java (default ~/.cache/indextables/jvm/tantivy4java), for the tantivy4java
# peer (harness/tantivy4java_peer, tests/jvm/test_tantivy4java.py). Nothing of them enters the repository;
# the peer's own Java source (harness/tantivy4java_peer/Peer.java) is compiled against them at test setup.
# Idempotent: a jar already there is not fetched again.
# Exit status: 0 fetched; 3 Maven Central does not serve a jar (the exact command and Maven's error are
# printed and written to $INDEXTABLES_JVM_HOME/tantivy4java/BLOCKED); anything else: another failure.
set -euo pipefail

HOME_DIR="${INDEXTABLES_JVM_HOME:-$HOME/.cache/indextables/jvm}/tantivy4java"
TANTIVY4JAVA_VERSION="${TANTIVY4JAVA_VERSION:-0.31.0}"
# tantivy4java's pom declares jackson-databind 2.15.2 (compile scope; Document uses it, and so does the peer)
ARTIFACTS=(
    "io.indextables:tantivy4java:$TANTIVY4JAVA_VERSION"
    "com.fasterxml.jackson.core:jackson-databind:2.15.2"
    "com.fasterxml.jackson.core:jackson-core:2.15.2"
    "com.fasterxml.jackson.core:jackson-annotations:2.15.2"
)
PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.8.1

jar_of() { local IFS=:; set -- $1; echo "$HOME_DIR/$2-$3.jar"; }

missing=()
for a in "${ARTIFACTS[@]}"; do [ -s "$(jar_of "$a")" ] || missing+=("$a"); done
[ "${#missing[@]}" = 0 ] && exit 0

command -v mvn >/dev/null || { echo "tantivy4java: 'mvn' is not on PATH (needs Maven and Java 17)" >&2; exit 1; }
mkdir -p "$HOME_DIR"
rm -f "$HOME_DIR/BLOCKED"
for a in "${missing[@]}"; do
    cmd=(mvn -B -q -U -Dstyle.color=never "$PLUGIN:copy" "-Dartifact=$a" "-DoutputDirectory=$HOME_DIR")
    echo "tantivy4java: fetching $a ..." >&2
    if ! out="$("${cmd[@]}" 2>&1)"; then
        out="$(sed 's/\x1b\[[0-9;]*m//g' <<<"$out")"
        error="$(grep -m 1 -F '[ERROR]' <<<"$out" || tail -3 <<<"$out")"
        if grep -qF "Could not find artifact" <<<"$out"; then
            printf 'Maven Central does not serve %s\ncommand: %s\nerror: %s\n' "$a" "${cmd[*]}" "$error" |
                tee "$HOME_DIR/BLOCKED" >&2
            exit 3
        fi
        printf 'tantivy4java: Maven could not fetch %s\ncommand: %s\nerror: %s\n' "$a" "${cmd[*]}" "$error" >&2
        exit 1
    fi
    [ -s "$(jar_of "$a")" ] || { echo "tantivy4java: Maven reported success but $(jar_of "$a") is missing" >&2; exit 1; }
done
echo "tantivy4java: fetched into $HOME_DIR" >&2
