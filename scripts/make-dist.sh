#!/usr/bin/env bash
# `make dist`: a relocatable tarball dist/lockjaw-<version>-<target>.tar.gz
# that runs without a build once the packages are installed:
#
#   lockjaw-<version>-<target>/bin/lockjaw
#   lockjaw-<version>-<target>/{clients,bugs,workloads,nemesis}/
#   lockjaw-<version>-<target>/scripts/{install-deps.sh,ci-shard.sh}
#
# lockjaw finds clients/, bugs/, workloads/ and nemesis/ beside its binary
# (in bin/'s parent) when the working directory has none. Only the files git
# tracks go in: no venv, node_modules or built adapter; the adapters'
# `build`/`build-env` scripts and scripts/install-deps.sh rebuild them where
# the tarball is unpacked.
#
# DIST_PROFILE (default release): the cargo profile whose binary goes in;
# DIST_BIN=PATH: put that binary in instead and build nothing (the test
# uses the binary it already has). DIST_DIR (default dist): where the
# tarball goes. DIST_GZIP (default 6): gzip's level (the test uses 1).
# Prints the tarball's path.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
profile=${DIST_PROFILE:-release}
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n1)
target=$(rustc -vV | sed -n 's/^host: //p')
[ -n "$version" ] && [ -n "$target" ] || { echo "make-dist: cannot read the version or the target" >&2; exit 1; }
if [ -n "${DIST_BIN:-}" ]; then
  bin=$DIST_BIN
else
  cargo build --profile "$profile" --bin lockjaw
  dir=$profile; [ "$profile" = dev ] && dir=debug
  bin=target/$dir/lockjaw
fi
[ -x "$bin" ] || { echo "make-dist: $bin: not an executable" >&2; exit 1; }
name=lockjaw-$version-$target
out=${DIST_DIR:-dist}
mkdir -p "$out"
out=$(cd "$out" && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/$name/bin"
cp "$bin" "$stage/$name/bin/lockjaw"
# Tracked files only (a checkout's venvs and builds are git-ignored), as
# they are in the working tree; a tracked file deleted there is left out.
git ls-files -z -- clients bugs workloads nemesis scripts/install-deps.sh scripts/ci-shard.sh \
    LICENSE* README.md |
  while IFS= read -r -d '' f; do
    [ -e "$f" ] || continue
    mkdir -p "$stage/$name/$(dirname "$f")"
    cp -p "$f" "$stage/$name/$f"
  done
tar -C "$stage" --owner=0 --group=0 --numeric-owner -cf - "$name" |
  gzip -"${DIST_GZIP:-6}" >"$out/$name.tar.gz"
echo "$out/$name.tar.gz"
