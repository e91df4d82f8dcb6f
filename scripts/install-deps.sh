#!/usr/bin/env bash
# Install the Debian packages lockjaw's tests and demo need, if missing.
# Idempotent; needs root (or sudo) the first time on a fresh machine.
set -euo pipefail
pkgs=(redis-server redis-sentinel etcd-server etcd-client zookeeper libfaketime
      libmimalloc2.0 protobuf-compiler libprotobuf-dev iptables netcat-openbsd
      iproute2 procps python3-redis python3-kazoo python3-venv)
# The Java adapter (clients/java-curator): a JDK and Curator's jars.
pkgs+=(default-jdk-headless libcurator-recipes-java)
# The Go adapter (clients/go-etcd-concurrency): Debian's Go and etcd's
# client sources (clientv3/concurrency), built in GOPATH mode, offline.
pkgs+=(golang-go golang-etcd-server-dev)
# PostgreSQL 15 (--system postgres, --storage postgres); the policy-rc.d
# below keeps Debian's own cluster from starting on install.
pkgs+=(postgresql)
# MariaDB 10.11 (--system mariadb): mariadb-install-db and mariadbd; the
# policy-rc.d below keeps Debian's own server (/run/mysqld, port 3306)
# from starting on install, and lockjaw runs its own with --no-defaults.
pkgs+=(mariadb-server)
# The test bed (`lockjaw testbed up`): one sshd per network namespace, run
# by lockjaw with its own config and keys; the policy-rc.d below keeps
# Debian from starting the system's sshd on install.
pkgs+=(openssh-server)
# xmllint: the JUnit test validates `--junit` files against
# tests/fixtures/junit.xsd.
pkgs+=(libxml2-utils)
if [ "${LOCKJAW_WITH_CHROMIUM:-0}" = 1 ]; then pkgs+=(chromium); fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  echo "installing: ${missing[*]}"
  # Debian starts redis-server/zookeeper/postgresql/mariadb/ssh as services on
  # install; keep them from grabbing ports the tests use.
  # A policy-rc.d the machine already has is its owner's: left as it is
  # (and not removed afterwards); ours is removed on any exit.
  ours=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    ours=1
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
    $SUDO chmod +x /usr/sbin/policy-rc.d
    trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  if [ "$ours" = 1 ]; then $SUDO rm -f /usr/sbin/policy-rc.d; trap - EXIT; fi
fi

# The adapters' own dependencies (clients/*/), pinned; nothing to do when
# they are in place.
root=$(cd "$(dirname "$0")/.." && pwd)
# node-redlock: the versions in package-lock.json, with `npm ci` (Node.js
# and npm come with the machine, not from Debian).
redlock="$root/clients/node-redlock"
if [ ! -f "$redlock/node_modules/.package-lock.json" ] ||
   [ "$redlock/package-lock.json" -nt "$redlock/node_modules/.package-lock.json" ]; then
  command -v npm >/dev/null || { echo "install-deps: npm not found; clients/node-redlock needs Node.js 20 and npm" >&2; exit 1; }
  (cd "$redlock" && npm ci --no-audit --no-fund --loglevel=error)
fi
# java-curator: compile Adapter.java against the jars in /usr/share/java.
"$root/clients/java-curator/build"
# go-etcd-concurrency: build adapter.go against the sources in /usr/share/gocode.
"$root/clients/go-etcd-concurrency/build"

# The Python adapters (clients/python-*): python3-redis and python3-kazoo come
# from Debian above. What Debian lacks lives in a venv of Debian's Python,
# with every package pinned in the adapter's requirements.txt with its
# hashes (pip --require-hashes, as clients/lib/build-env installs a version
# folder), rebuilt only when that file changes: pottery (python-pottery), and a redis-py with
# RedisCluster's address_remap (python-redis-py on --system redis-cluster;
# Debian's 4.3.4 predates it).
venv_for() { # ADAPTER MODULE
  local venv="$root/clients/$1/venv" req="$root/clients/$1/requirements.txt"
  if ! cmp -s "$req" "$venv/requirements.installed" 2>/dev/null; then
    echo "installing $1's requirements into $venv"
    rm -rf "$venv"
    /usr/bin/python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check --no-input \
      --require-hashes --no-deps -r "$req"
    "$venv/bin/python" -c "import $2"
    cp "$req" "$venv/requirements.installed"
  fi
}
venv_for python-pottery pottery
venv_for python-redis-py redis.cluster

# The tests' own PyPI tools (scripts/requirements-tools.txt: actionlint),
# pinned with hashes, in .tools/venv of a checkout (a dist tarball has no
# tests and no such file).
tools_req="$root/scripts/requirements-tools.txt" tools_venv="$root/.tools/venv"
if [ -f "$tools_req" ] && ! cmp -s "$tools_req" "$tools_venv/requirements.installed" 2>/dev/null; then
  echo "installing the tests' tools into $tools_venv"
  rm -rf "$tools_venv"
  /usr/bin/python3 -m venv "$tools_venv"
  "$tools_venv/bin/pip" install --quiet --disable-pip-version-check --no-input \
    --require-hashes --no-deps -r "$tools_req"
  "$tools_venv/bin/actionlint" --version >/dev/null
  cp "$tools_req" "$tools_venv/requirements.installed"
fi

# Pinned library versions (clients/NAME/versions/VERSION, --client
# NAME@VERSION): built here, so no test or `make bugs` row builds one inside
# its timing (lockjaw would build it on first use otherwise). build-env
# returns at once for a version already built. A version that cannot be
# built here is a warning: the runs that ask for it fail with the reason.
for v in "$root"/clients/*/versions/*/; do
  [ -d "$v" ] || continue
  "$root/clients/lib/build-env" "$v" ||
    echo "warning: cannot build $v (see its build.log); runs asking for it will say why" >&2
done
