#!/usr/bin/env bash
# A run's fixed cost per system: the wall time of a fault-free
# `lockjaw run` minus its time limit, as the median of N runs with min and
# max, and where it went (the median of each phase of run.json's
# `timings`, in ms, the run itself left out). With RUNS > 1, then the same
# for campaigns: N times `lockjaw run --runs RUNS` (its runs sharing one
# cluster), the fixed cost per run being (wall - RUNS x limit) / RUNS,
# with how many runs got a reused cluster. A benchmark, not a test.
#
#   scripts/bench-runs.sh [N] [SYSTEMS] [RUNS]
#   scripts/bench-runs.sh 5 redis,etcd,zookeeper,sentinel
#   scripts/bench-runs.sh 5 redis,etcd 10
#   TIME_LIMIT=10 CONCURRENCY=250 scripts/bench-runs.sh 3 redis
#   SINGLE=0 scripts/bench-runs.sh 5 redis 10     # the campaigns only
#
# N defaults to 5, SYSTEMS to redis,redlock,sentinel,redis-cluster,etcd,
# zookeeper,postgres,mariadb. TIME_LIMIT (seconds, default 5) and
# CONCURRENCY (workers, default the workload's) are passed on. The runs of
# a system go one after another, the systems in turn. Builds nothing: uses
# target/release/lockjaw (make build) unless LOCKJAW is set.
set -euo pipefail
n=${1:-5}
systems=${2:-redis,redlock,sentinel,redis-cluster,etcd,zookeeper,postgres,mariadb}
runs=${3:-1}
limit=${TIME_LIMIT:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
lockjaw=${LOCKJAW:-$root/target/release/lockjaw}
[ -x "$lockjaw" ] || { echo "no $lockjaw (hint: make build, or set LOCKJAW)" >&2; exit 3; }
out=$(mktemp -d "${TMPDIR:-/tmp}/bench-runs.XXXXXX")
extra=()
[ -n "${CONCURRENCY:-}" ] && extra+=(--concurrency "$CONCURRENCY")

# "median min max" of the numbers on stdin, one a line.
stats() {
  sort -g | awk '{ v[NR] = $1 } END {
    if (NR == 0) { print "- - -"; exit }
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%.2f %.2f %.2f\n", m, v[1], v[NR] }'
}

IFS=, read -r -a list <<<"$systems"
[ "${SINGLE:-1}" = 0 ] && list_single=() || list_single=("${list[@]}")
[ ${#list_single[@]} -gt 0 ] &&
printf '%-14s %5s %7s %6s  %-22s %s\n' system runs "limit" wall "fixed cost (min-max)" "where it went (median ms)"
for s in "${list_single[@]}"; do
  walls=()
  for r in $(seq "$n"); do
    dir="$out/$s-$r"
    t0=$(date +%s.%N)
    "$lockjaw" run --system "$s" --nemesis none --time-limit "$limit" "${extra[@]}" \
      --out "$dir" --no-progress >"$dir.out" 2>&1 || echo "warning: $s run $r exited $? (see $dir.out)" >&2
    t1=$(date +%s.%N)
    walls+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')")
  done
  read -r wm _ _ < <(printf '%s\n' "${walls[@]}" | stats)
  read -r fm fmin fmax < <(printf '%s\n' "${walls[@]}" | awk -v l="$limit" '{ printf "%.3f\n", $1 - l }' | stats)
  # Each phase's median over the runs, in the order of the first run.
  phases=$(/usr/bin/python3 - "$out" "$s" "$n" <<'EOF' 2>/dev/null || true
import json, statistics, sys
out, s, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
order, ms = [], {}
for r in range(1, n + 1):
    try:
        t = json.load(open(f"{out}/{s}-{r}/run.json"))["timings"]["phases"]
    except (OSError, KeyError, ValueError):
        continue
    for p in t:
        if p["phase"] not in ms:
            order.append(p["phase"])
        ms.setdefault(p["phase"], []).append(p["ms"])
print(", ".join(f"{p} {statistics.median(ms[p]):.0f}" for p in order
                if p != "run" and statistics.median(ms[p]) >= 20))
EOF
)
  printf '%-14s %5s %7s %6s  %-22s %s\n' "$s" "$n" "$limit" "$wm" "$fm ($fmin-$fmax)" "$phases"
done
if [ "$runs" -gt 1 ]; then
  echo
  printf '%-14s %9s %7s %8s  %-26s %s\n' system campaigns "limit" wall "fixed cost per run (min-max)" "runs on a reused cluster"
  for s in "${list[@]}"; do
    walls=() reused=()
    for r in $(seq "$n"); do
      dir="$out/$s-campaign-$r"
      t0=$(date +%s.%N)
      "$lockjaw" run --system "$s" --nemesis none --time-limit "$limit" --runs "$runs" "${extra[@]}" \
        --out "$dir" --no-progress >"$dir.out" 2>&1 || echo "warning: $s campaign $r exited $? (see $dir.out)" >&2
      t1=$(date +%s.%N)
      walls+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')")
      reused+=("$(grep -o '[0-9]* of them on one an earlier run used' "$dir.out" | cut -d' ' -f1 || true)")
    done
    read -r wm _ _ < <(printf '%s\n' "${walls[@]}" | stats)
    read -r fm fmin fmax < <(printf '%s\n' "${walls[@]}" |
      awk -v l="$limit" -v k="$runs" '{ printf "%.3f\n", ($1 - k * l) / k }' | stats)
    printf '%-14s %9s %7s %8s  %-26s %s\n' "$s" "$n x $runs" "$limit" "$wm" "$fm ($fmin-$fmax)" \
      "${reused[*]} (of $((runs - 1)) each)"
  done
fi
echo "runs in $out"
