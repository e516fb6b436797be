#!/usr/bin/env bash
# Install what the lock tests need to talk to a REAL ZooKeeper server (and, for the Java
# interop test, Apache Curator, the library Java Hudi's ZooKeeper lock provider uses).
#
# Idempotent: packages already present are left alone and apt-get update runs at most once.
# Works as root without sudo; as another user it uses sudo if it is there.
set -euo pipefail

if [ "$(id -u)" -eq 0 ]; then SUDO=""; elif command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
  echo "install-zookeeper: must run as root (or with sudo available)" >&2; exit 1; fi

export DEBIAN_FRONTEND=noninteractive
updated=0
apt_update_once() {
  if [ "$updated" -eq 0 ]; then
    echo "install-zookeeper: apt-get update"
    $SUDO apt-get update -qq
    updated=1
  fi
}

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

if [ -f /usr/share/java/zookeeper.jar ]; then
  echo "install-zookeeper: /usr/share/java/zookeeper.jar present, zookeeper already installed"
else
  apt_update_once
  echo "install-zookeeper: apt-get install -y zookeeper"
  $SUDO apt-get install -y -qq zookeeper
fi

# Curator (for tests/core/concurrency/locks/test_curator_interop.py): optional, installed when available.
for pkg in libcurator-client-java libcurator-framework-java libcurator-recipes-java; do
  if installed "$pkg"; then
    echo "install-zookeeper: $pkg already installed"
    continue
  fi
  apt_update_once
  if apt-cache show "$pkg" >/dev/null 2>&1; then
    echo "install-zookeeper: apt-get install -y $pkg"
    $SUDO apt-get install -y -qq "$pkg"
  else
    echo "install-zookeeper: $pkg is not available from apt; the Curator interop test will fail" >&2
  fi
done

if ! command -v javac >/dev/null 2>&1; then
  echo "install-zookeeper: javac missing (needed only by the Curator interop test); install a JDK, e.g. openjdk-17-jdk-headless" >&2
fi
echo "install-zookeeper: done"
