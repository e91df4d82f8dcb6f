#!/usr/bin/env bash
# The added cost of a client adapter per lock operation: acquire + release
# latency (p50, p99) of uncontended grants, each client on the same local
# server, one worker, no hold, no think time, no faults.
#
#   scripts/adapter-cost.sh [SYSTEM] [CLIENTS] [SECONDS] [ROUNDS]
#   scripts/adapter-cost.sh redis builtin,null,example-redis,python-redis-py,node-redlock 5 3
#
# The clients run in turn, ROUNDS times over (so a slower minute of a
# shared machine hits all of them), and each client's grants are pooled.
# `null` is tests/adapters/null/adapter: the protocol alone, no lock service.
# Builds nothing: uses target/release/lockjaw (make build) unless LOCKJAW is set.
set -euo pipefail
system=${1:-redis}
clients=${2:-builtin,null,example-redis}
seconds=${3:-5}
rounds=${4:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
lockjaw=${LOCKJAW:-$root/target/release/lockjaw}
out=$(mktemp -d "${TMPDIR:-/tmp}/adapter-cost.XXXXXX")
IFS=, read -r -a list <<<"$clients"
for r in $(seq "$rounds"); do
  for c in "${list[@]}"; do
    path=$c
    [ "$c" = null ] && path="$root/tests/adapters/null/adapter"
    # The null adapter is no lock: its runs' verdicts mean nothing (exit 1).
    "$lockjaw" run --system "$system" --client "$path" --workload lock --concurrency 1 \
      --hold-ms 0 --think-ms 0 --nemesis none --time-limit "$seconds" \
      --out "$out/$c-$r" --no-progress >/dev/null || [ $? -le 2 ]
  done
done
python3 - "$out" "$rounds" "${list[@]}" <<'PY'
import json, sys
out, rounds, clients = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def steps(path):
    """acquire ok + the release that follows it, per process, in µs."""
    open_inv, acq, total = {}, {}, []
    for line in open(path):
        o = json.loads(line)
        if o.get("type") == "meta" or o["f"] not in ("acquire", "release"):
            continue
        p = o["process"]
        if o["type"] == "invoke":
            open_inv[p] = o["time"]
            continue
        t = o["time"] - open_inv.pop(p)
        if o["f"] == "acquire":
            acq[p] = t if o["type"] == "ok" else None
        elif acq.get(p) is not None and o["type"] == "ok":
            total.append((acq.pop(p) + t) / 1000)
    return sorted(total)
def pct(v, q):
    return v[min(len(v) - 1, int(q * len(v)))]
rows, base = [], None
for c in clients:
    v = sorted(x for r in range(1, rounds + 1) for x in steps(f"{out}/{c}-{r}/history.jsonl"))
    p50, p99 = pct(v, 0.5), pct(v, 0.99)
    if c == "builtin":
        base = p50
    rows.append((c, len(v), p50, p99))
print("| client | grants | acquire+release p50 (µs) | p99 (µs) | added at p50 (µs) |")
print("|---|---:|---:|---:|---:|")
for c, n, p50, p99 in rows:
    added = "—" if base is None or c == "builtin" else f"{p50 - base:.0f}"
    print(f"| {c} | {n} | {p50:.0f} | {p99:.0f} | {added} |")
print(f"\nruns: {out}")
PY
