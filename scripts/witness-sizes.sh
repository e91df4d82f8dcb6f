#!/usr/bin/env bash
# Witness sizes on real runs (issue 30's closing note): for each system,
# one invalid-prone run (its fault, fencing off), then per witness file:
# the anomaly kind, the history's op lines → the witness's, the search's
# seconds, whether it is minimal, and whether `lockjaw check` on the
# witness alone finds the same anomaly kind with the same proof ops.
#
#   scripts/witness-sizes.sh [SECONDS] [SYSTEMS] [SEEDS]
#   scripts/witness-sizes.sh 20 redis,redlock,sentinel,etcd,zookeeper,postgres 30,31,32
#
# One run per system and seed (default seeds 30,31,32). The last lines
# count the lost-update witnesses: proven by two writes (`same-value`,
# `overwritten`) with their largest size, and those with no local proof
# (`every-write`).
# Builds nothing: uses target/release/lockjaw (make build) unless LOCKJAW
# is set. Run directories go under a temp dir (printed; WITNESS_OUT=DIR
# keeps them there; with WITNESS_TABLE_ONLY=1 the runs already in it are
# tabulated again without running). A run without witnesses is a row
# saying why.
set -euo pipefail
seconds=${1:-20}
systems=${2:-redis,redlock,sentinel,etcd,zookeeper,postgres}
seeds=${3:-30,31,32}
root=$(cd "$(dirname "$0")/.." && pwd)
lockjaw=${LOCKJAW:-$root/target/release/lockjaw}
out=${WITNESS_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/witness-sizes.XXXXXX")}
mkdir -p "$out"
echo "run directories: $out" >&2

# The run of each system: the fault that breaks it, fencing off.
flags() {
  case $1 in
    redis) echo "--nemesis pause-holder --fencing off" ;;
    redlock) echo "--nemesis clock-jump --fencing off" ;;
    sentinel) echo "--nemesis failover --fencing off --ttl-ms 6000 --hold-ms 3000" ;;
    etcd | zookeeper | postgres) echo "--nemesis pause-holder --fencing off" ;;
    *) echo "unknown system $1 (hint: one of redis, redlock, sentinel, etcd, zookeeper, postgres)" >&2; return 3 ;;
  esac
}

IFS=, read -r -a list <<<"$systems"
IFS=, read -r -a seed_list <<<"$seeds"
runs=()
for s in "${list[@]}"; do
  for seed in "${seed_list[@]}"; do runs+=("$s-$seed"); done
done
# WITNESS_TABLE_ONLY=1 with WITNESS_OUT=DIR: tabulate the runs already there.
[ "${WITNESS_TABLE_ONLY:-0}" = 1 ] && list_runs=() || list_runs=("${runs[@]}")
for r in "${list_runs[@]}"; do
  s=${r%-*} seed=${r##*-}
  f=$(flags "$s")
  # shellcheck disable=SC2086
  "$lockjaw" run --system "$s" --workload fenced-counter $f --time-limit "$seconds" \
    --seed "$seed" --out "$out/$r" --no-progress >"$out/$r.log" 2>&1 || [ $? -le 2 ]
done

python3 - "$lockjaw" "$out" "${runs[@]}" <<'PY'
import glob, json, os, subprocess, sys
lockjaw, out, systems = sys.argv[1], sys.argv[2], sys.argv[3:]

def op_refs(v, acc):
    if isinstance(v, dict):
        for k, x in v.items():
            if k in ("op", "acquire_op", "final_read_op", "lease_evidence_op") and isinstance(x, int):
                acc.add(x)
            elif k == "applies" and isinstance(x, list):
                acc.update(i for i in x if isinstance(i, int))
            else:
                op_refs(x, acc)
    elif isinstance(v, list):
        for x in v:
            op_refs(x, acc)
    return acc

def same(path, info):
    """`lockjaw check` on the witness alone: the same kind, the same proof ops."""
    r = subprocess.run([lockjaw, "check", "--json", path], capture_output=True, text=True)
    if r.returncode != 1:
        return "no (exit %d)" % r.returncode
    v = json.loads(r.stdout)
    want = set(info["proof_ops"])
    if info["kind"] == "non-linearizable":
        ok = v.get("linearizable", {}).get("valid") is False
    else:
        ws = v.get("lock", {}).get("checks", {}).get(info["check"], {}).get("witnesses", [])
        # A lost update proven by two writes is listed as `lost-update-pair`.
        kinds = {info["kind"], "lost-update-pair"} if info["kind"] == "lost-updates" else {info["kind"]}
        ok = any(w.get("kind") in kinds and want <= op_refs(w, set()) for w in ws)
    return "yes" if ok else "no"

local, total, largest = 0, 0, 0
print("| run (system-seed) | anomaly kind | rule | history op lines → witness op lines | seconds | minimal | re-check same anomaly |")
print("|---|---|---|---|---|---|---|")
for s in systems:
    d = os.path.join(out, s)
    files = sorted(glob.glob(os.path.join(d, "witness-*.jsonl")))
    if not files:
        try:
            valid = json.load(open(os.path.join(d, "results.json")))["valid"]
            why = "no witness (verdict %s)" % {False: "invalid", True: "valid"}.get(valid, valid)
        except (OSError, ValueError, KeyError):
            why = "no results (see %s.log)" % d
        print("| %s | %s | | | | | |" % (s, why))
        continue
    for p in files:
        with open(p) as fh:
            info = json.loads(fh.readline())["witness"]
        if info["kind"] == "lost-updates":
            if info.get("rule") == "every-write":
                total += 1
            else:
                local += 1
                largest = max(largest, info["witness_ops"])
        print("| %s | %s | %s | %d → %d | %.2f | %s | %s |" % (
            s, info["kind"], info.get("rule") or "", info["history_ops"], info["witness_ops"], info["seconds"],
            "yes" if info["minimal"] else "no (budget %d)" % info["budget"], same(p, info)))
print()
print("lost-update witnesses: %d proven by two writes (largest %d op lines), %d with no local proof (every-write)" % (local, largest, total))
PY
