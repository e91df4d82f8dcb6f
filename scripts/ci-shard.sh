#!/usr/bin/env bash
# One CI shard of a lockjaw campaign (docs/ci.md, "One shard:
# scripts/ci-shard.sh"): install the servers and tools, check the library
# under test, run one lockjaw command on shard K of N with a shared seed,
# and print where its directory is, for the job's upload step.
#
#   scripts/ci-shard.sh --shard K/N --seed S --out DIR [--client NAME@PATH]
#                       [--no-deps] [--lockjaw BIN] -- COMMAND ARGS...
#
# COMMAND ARGS is a lockjaw command that takes --shard (compare, bugs table,
# run --runs, sweep, explore); `--shard K/N --seed S --out DIR` go in
# before the first `--` of ARGS (compare's run flags), else at the end.
# `--client NAME@PATH`: the library's source tree at PATH (the commit under
# test) with lockjaw's adapter NAME; PATH is made absolute and every `{client}`
# in ARGS becomes NAME@/abs/PATH (an error when ARGS has none).
# --no-deps skips scripts/install-deps.sh. BIN: lockjaw's binary (default:
# bin/lockjaw beside this script's folder, as in the dist tarball, else
# target/release/lockjaw of a checkout, else `lockjaw` on the PATH).
#
# Exit: the command's exit code (0 clean, 1 an anomaly, 2 unknown, 3 bad
# input or a failed run; merge judges the shards), or 3 for this script's own
# bad input. The last line of stdout is `shard directory: /abs/DIR`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
die() { echo "ci-shard: $*" >&2; exit 3; }

shard="" seed="" out="" client="" deps=1 bin=""
while [ $# -gt 0 ]; do
  case "$1" in
    --shard) [ $# -ge 2 ] || die "--shard needs K/N"; shard=$2; shift 2 ;;
    --seed) [ $# -ge 2 ] || die "--seed needs a number"; seed=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || die "--out needs a directory"; out=$2; shift 2 ;;
    --client) [ $# -ge 2 ] || die "--client needs NAME@PATH"; client=$2; shift 2 ;;
    --lockjaw) [ $# -ge 2 ] || die "--lockjaw needs a path"; bin=$2; shift 2 ;;
    --no-deps) deps=0; shift ;;
    --) shift; break ;;
    *) die "unknown argument $1 (usage: ci-shard.sh --shard K/N --seed S --out DIR [--client NAME@PATH] [--no-deps] [--lockjaw BIN] -- COMMAND ARGS...)" ;;
  esac
done
[[ $shard =~ ^[0-9]+/[0-9]+$ ]] || die "--shard K/N is required (got \"$shard\")"
[[ $seed =~ ^[0-9]+$ ]] || die "--seed S is required, a number shared by every shard (got \"$seed\")"
[ -n "$out" ] || die "--out DIR is required"
[ $# -gt 0 ] || die "no command after -- (e.g. -- bugs table, -- compare --systems redis ...)"

if [ -z "$bin" ]; then
  for b in "$root/bin/lockjaw" "$root/target/release/lockjaw"; do
    if [ -x "$b" ]; then bin=$b; break; fi
  done
  [ -n "$bin" ] || bin=$(command -v lockjaw) || die "no lockjaw binary (give --lockjaw BIN)"
fi
[ -x "$bin" ] || die "--lockjaw $bin: not an executable"

args=("$@")
if [ -n "$client" ]; then
  name=${client%%@*} path=${client#*@}
  [ "$name" != "$client" ] && [ -n "$name" ] && [ -n "$path" ] ||
    die "--client $client: give NAME@PATH (an adapter of clients/ and the library's source tree)"
  [ -d "$path" ] || die "--client $client: $path is not a directory"
  path=$(cd "$path" && pwd)
  spec="$name@$path"
  found=0
  for i in "${!args[@]}"; do
    if [[ ${args[$i]} == *"{client}"* ]]; then
      args[$i]=${args[$i]//\{client\}/$spec}
      found=1
    fi
  done
  [ "$found" = 1 ] || die "--client $client: the command names no {client} to put it in (e.g. --clients builtin,{client})"
  export LOCKJAW_CI_CLIENT=$spec
  echo "ci-shard: library under test: $spec"
fi

if [ "$deps" = 1 ]; then
  "$root/scripts/install-deps.sh"
fi

# The command's words (subcommand, and `table` of `bugs table`), then ours
# before the first `--`, then the rest.
cmd=() i=0
while [ $i -lt ${#args[@]} ] && [ "${args[$i]}" != "--" ]; do
  cmd+=("${args[$i]}"); i=$((i + 1))
done
cmd+=(--shard "$shard" --seed "$seed" --out "$out")
cmd+=("${args[@]:$i}")
echo "ci-shard: $bin ${cmd[*]}"
status=0
"$bin" "${cmd[@]}" || status=$?
if [ -d "$out" ]; then
  echo "shard directory: $(cd "$out" && pwd)"
else
  echo "ci-shard: the command wrote no $out (exit $status)" >&2
  [ "$status" != 0 ] || status=3
fi
exit $status
