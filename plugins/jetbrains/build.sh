#!/usr/bin/env bash
# Builds, tests and packages the JetBrains plugin with javac and the Debian IntelliJ Platform API jars (no Gradle, no network beyond apt): `build.sh` builds, validates plugin.xml, runs the JUnit 5 tests and writes build/koru-jetbrains-<version>.zip; `build.sh bench [DRIVES]` runs the round-trip bench.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
cd "$HERE"
MODE=${1:-build}
VERSION=$(sed -n 's/^pluginVersion=//p' gradle.properties)
B=build
J=/usr/share/java

# ── 1. what the build needs, from apt when missing (works as root on a fresh Debian/Ubuntu) ──
need=()
command -v javac >/dev/null && command -v jar >/dev/null || need+=(openjdk-17-jdk-headless)
[ -f $J/intellij-platform-api.jar ] || need+=(libintellij-platform-api-java)
[ -f $J/intellij-core.jar ] || need+=(libintellij-core-java)
[ -f $J/intellij-util.jar ] || need+=(libintellij-utils-java)
[ -f $J/junit-platform-console-standalone.jar ] || need+=(junit5)
[ -f $J/gson.jar ] || need+=(libgoogle-gson-java)
python3 -c 'import yaml' 2>/dev/null || need+=(python3-yaml)
command -v unzip >/dev/null || need+=(unzip)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
JAVA_MAJOR=$(javac -version 2>&1 | sed -E 's/^javac ([0-9]+).*/\1/')
[ "$JAVA_MAJOR" -ge 17 ] || { echo "javac $JAVA_MAJOR is too old: the plugin needs Java 17"; exit 1; }
GSON=$(readlink -f $J/gson.jar)
API="$J/intellij-platform-api.jar:$J/intellij-core.jar:$J/intellij-util.jar:$J/org.jetbrains.annotations-common.jar"
JUNIT="$J/junit-platform-console-standalone.jar"
JAVAC=(javac --release 17 -encoding UTF-8 -nowarn)

# ── 2. the koru binary the real-daemon tests and the bench use ──
if [ -z "${KORU_BIN:-}" ]; then
  TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
  if command -v cargo >/dev/null; then
    echo "building koru (cargo build --bin koru; a no-op when up to date)"
    (cd "$ROOT" && cargo build --quiet --bin koru)
  fi
  [ -x "$TARGET/debug/koru" ] || { echo "no koru binary at $TARGET/debug/koru and no cargo to build it"; exit 1; }
  export KORU_BIN="$TARGET/debug/koru"
fi
export KORU_ROOT="$ROOT"

# ── 3. compile: protocol client (Gson only), stubs (compile-only), IDE glue, tests, build tools ──
rm -rf "$B/classes" "$B/stubs" "$B/test-classes" "$B/tools" "$B/dist" "$B"/*.zip "$B"/*.jar
mkdir -p "$B/classes" "$B/stubs" "$B/test-classes" "$B/tools" "$B/dist/koru-jetbrains/lib"
python3 scripts/generate-catalog.py --check
"${JAVAC[@]}" -Xlint:all -Werror -d "$B/classes" -cp "$GSON" $(find src/main/java/dev/koru/jetbrains/client -name '*.java')
echo "layer 1 (protocol client) compiled with Gson only: no IntelliJ class on its classpath"
"${JAVAC[@]}" -d "$B/stubs" -cp "$API" $(find src/compileOnlyStubs/java -name '*.java')
"${JAVAC[@]}" -d "$B/classes" -cp "$B/classes:$B/stubs:$API:$GSON" $(find src/main/java/dev/koru/jetbrains/ide -name '*.java')
echo "layer 2 (IDE glue) compiled against the IntelliJ Platform API jars (Debian libintellij-platform-api-java $(dpkg-query -W -f='${Version}' libintellij-platform-api-java 2>/dev/null || echo '?')) + compile-only stubs"

# ── 4. the plugin jar (classes + META-INF/plugin.xml) and its validation ──
mkdir -p "$B/classes/META-INF" "$B/classes/dev/koru/jetbrains"
sed "s/@VERSION@/$VERSION/" src/main/resources/META-INF/plugin.xml > "$B/classes/META-INF/plugin.xml"
cp src/main/resources/META-INF/koru-terminal.xml "$B/classes/META-INF/"
printf 'version=%s\n' "$VERSION" > "$B/classes/dev/koru/jetbrains/plugin.properties"
jar --create --file "$B/koru-jetbrains.jar" -C "$B/classes" .
"${JAVAC[@]}" -d "$B/tools" $(find src/buildTools/java -name '*.java')
java -cp "$B/tools:$API:$B/stubs:$B/koru-jetbrains.jar:$GSON" dev.koru.jetbrains.build.PluginXmlValidator "$B/koru-jetbrains.jar"

# ── 5. tests (JUnit 5 console launcher) ──
"${JAVAC[@]}" -d "$B/test-classes" -cp "$B/classes:$GSON:$JUNIT" $(find src/test/java -name '*.java')
if [ "$MODE" = bench ]; then
  shift || true
  exec java -cp "$B/classes:$B/test-classes:$GSON" dev.koru.jetbrains.client.RoundTripBench "$@"
fi
set +e
java -jar "$JUNIT" --class-path "$B/classes:$B/test-classes:$GSON" --scan-class-path --disable-banner \
  --details=tree --disable-ansi-colors --reports-dir "$B/test-reports" 2>&1 | tee "$B/test.log"
rc=${PIPESTATUS[0]}
set -e
passed=$(sed -n 's/^\[ *\([0-9]*\) tests successful.*/\1/p' "$B/test.log")
failed=$(sed -n 's/^\[ *\([0-9]*\) tests failed.*/\1/p' "$B/test.log")
echo "koru-jetbrains: ${passed:-0} tests successful, ${failed:-?} failed"
[ "$rc" = 0 ] || { echo "JUnit failed (exit $rc)"; exit "$rc"; }

# ── 6. the zip a user installs with "Install Plugin from Disk…": koru-jetbrains/lib/*.jar ──
cp "$B/koru-jetbrains.jar" "$GSON" "$B/dist/koru-jetbrains/lib/"
ZIP="$B/koru-jetbrains-$VERSION.zip"
(cd "$B/dist" && jar --create --no-manifest --file "../koru-jetbrains-$VERSION.zip" koru-jetbrains)
unzip -l "$ZIP"
if unzip -l "$ZIP" | grep 'com/intellij' >/dev/null; then echo "the zip ships platform classes"; exit 1; fi
unzip -p "$ZIP" koru-jetbrains/lib/koru-jetbrains.jar > "$B/check.jar" && unzip -l "$B/check.jar" | grep 'META-INF/plugin.xml' >/dev/null \
  || { echo "plugin.xml is not inside koru-jetbrains.jar"; exit 1; }
rm -f "$B/check.jar"
echo "built $ZIP"
