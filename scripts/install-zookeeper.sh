#!/usr/bin/env bash
# Install what the lock tests need to talk to a REAL ZooKeeper server (and, for the Java
# interop test, Apache Curator, the library Java Hudi's ZooKeeper lock provider uses).
#
# Idempotent: packages already present are left alone and apt-get update runs at most once
# (not at all after bootstrap.sh ran it). Works as root without sudo; as another user it uses
# sudo if it is there. Quiet: one line per step, apt's output in .work/bootstrap.log
# (scripts/steps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
STEP_PREFIX=install-zookeeper
source scripts/steps.sh

if [ -n "$SUDO" ] && ! command -v sudo >/dev/null 2>&1; then
  echo "install-zookeeper: must run as root (or with sudo available)" >&2; exit 1; fi

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

missing=""
[ -f /usr/share/java/zookeeper.jar ] || missing="zookeeper"
# Curator (for tests/core/concurrency/locks/test_curator_interop.py): optional, installed when available.
curator=""
for pkg in libcurator-client-java libcurator-framework-java libcurator-recipes-java; do
  installed "$pkg" || curator="$curator $pkg"
done
if [ -z "$missing$curator" ]; then
  up_to_date "ZooKeeper, Curator"
else
  if [ -n "$curator" ]; then
    apt_update_once
    for pkg in $curator; do
      if apt-cache show "$pkg" >/dev/null 2>&1; then
        missing="$missing $pkg"
      else
        echo "install-zookeeper: $pkg is not available from apt; the Curator interop test will fail" >&2
      fi
    done
  fi
  [ -z "$missing" ] || apt_install $missing
fi

if ! command -v javac >/dev/null 2>&1; then
  echo "install-zookeeper: javac missing (needed only by the Curator interop test); install a JDK, e.g. openjdk-17-jdk-headless" >&2
fi
