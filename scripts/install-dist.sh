#!/usr/bin/env bash
# Unpack a `make dist` tarball (docs/ci.md) into DIR and print the unpacked
# directory (its bin/lockjaw, scripts/ci-shard.sh, ...). TARBALL is a path
# or an https:// URL; empty builds one first with scripts/make-dist.sh of
# this checkout (needs cargo). The composite action.yml runs this.
#
#   scripts/install-dist.sh TARBALL DIR
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: install-dist.sh TARBALL|URL|'' DIR" >&2; exit 3; }
t=$1 dir=$2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dir"
if [ -z "$t" ]; then
  t=$("$here/make-dist.sh" | tail -n1)
elif [[ $t == https://* ]]; then
  curl -fsSL -o "$dir/download.tar.gz" "$t"
  t=$dir/download.tar.gz
fi
[ -f "$t" ] || { echo "install-dist: $t: no such file" >&2; exit 3; }
top=$(tar -tzf "$t" | sed -n '1s|/.*||p')
case "$top" in
  lockjaw-*) ;;
  *) echo "install-dist: $t: not a lockjaw dist tarball (first entry \"$top\")" >&2; exit 3 ;;
esac
tar -xzf "$t" -C "$dir"
[ -x "$dir/$top/bin/lockjaw" ] || { echo "install-dist: $t has no $top/bin/lockjaw" >&2; exit 3; }
"$dir/$top/bin/lockjaw" --version >&2
(cd "$dir/$top" && pwd)
