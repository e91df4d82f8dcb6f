#!/usr/bin/env bash
# The findings campaign (issue 42, docs/client-findings.md): the newest
# release of every shipped adapter library, and lockjaw's own client, each
# explored for 10 minutes with two runs at once on each system it supports:
#
#   lockjaw explore --system S --client C --budget 10m --jobs 2 --seed 7 \
#     --out histories/campaign/<client>@<version>-<system>
#
#   scripts/explore-campaign.sh                  run every pair not finished, in order
#   scripts/explore-campaign.sh --list           each pair, its directory and its state
#   scripts/explore-campaign.sh --only tooz      only pairs whose name contains "tooz"
#   scripts/explore-campaign.sh --stop-after 21:35   start no explore after 21:35 UTC
#
# A pair is finished when its directory has explore.json (the explore wrote
# its report); interrupted when it has state.json only (Ctrl-C, a kill, a
# crash): it resumes with `lockjaw explore DIR --budget 10m --jobs 2`
# (the budget counts every invocation's time, so the pair gets 10 minutes in
# all); new otherwise. A pair whose explore stopped with exit 3 (it could
# not go on: no learn run ended, a client that would not start) is listed
# as failed and skipped; `--retry-failed` runs it again. After an explore
# that ended interrupted (Ctrl-C to the explore's pid, written to
# histories/campaign/current.pid), the script starts no other.
#
# Order: the libraries first, one pair each on its main system, then the
# libraries' other systems, then lockjaw's own client on each system.
# Each explore's start, end, exit code and load average (sampled every
# 30 s while it runs: mean and max of the 1-minute figure) go to
# histories/campaign/campaign.log. histories/ is not in git.
#
# Builds nothing: uses $LOCKJAW, default target/ci/lockjaw (the ci profile:
# `cargo build --profile ci --bin lockjaw`); the log names the binary.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
lockjaw=${LOCKJAW:-$root/target/ci/lockjaw}
out=$root/histories/campaign
budget=10m
jobs=2
seed=7
list=0 only="" stop_after="" retry_failed=0
usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 3
}
while [ $# -gt 0 ]; do
  case $1 in
    --list) list=1 ;;
    --only) only=${2:?--only needs a pattern (hint: --only tooz)}; shift ;;
    --stop-after)
      stop_after=${2:?--stop-after needs HH:MM in UTC (hint: --stop-after 21:35)}; shift
      [[ $stop_after =~ ^[0-2][0-9]:[0-5][0-9]$ ]] ||
        { echo "explore-campaign: --stop-after $stop_after: not HH:MM (hint: --stop-after 21:35)" >&2; exit 3; } ;;
    --retry-failed) retry_failed=1 ;;
    -h|--help) usage ;;
    *) echo "explore-campaign: unknown argument $1 (hint: --list, --only PATTERN, --stop-after HH:MM, --retry-failed)" >&2; exit 3 ;;
  esac
  shift
done

# One pair a line: the --client spec (`-` for lockjaw's own), the name the
# directory carries (client@version of the library it runs), the system.
# Versions with a folder are named (NAME@VERSION); the others are the
# adapter's default: pottery 3.0.1 (clients/python-pottery/requirements.txt),
# redlock 4.2.0 (clients/node-redlock/package.json), Curator 5.4.0 (Debian).
pairs() {
  cat <<'EOF'
python-redis-py@8.2.0            python-redis-py@8.2.0            redis
python-redis-py-asyncio@8.2.0    python-redis-py-asyncio@8.2.0    redis
python-pottery                   python-pottery@3.0.1             redlock
python-kazoo@2.11.0              python-kazoo@2.11.0              zookeeper
java-curator                     java-curator@5.4.0               zookeeper
node-redlock                     node-redlock@4.2.0               redlock
node-sesamecare-redlock@1.4.0    node-sesamecare-redlock@1.4.0    redlock
node-redis-semaphore@5.8.0       node-redis-semaphore@5.8.0       redis
python-sherlock@0.4.1            python-sherlock@0.4.1            redis
python-tooz@9.1.0                python-tooz@9.1.0                redis
python-portalocker@4.4.2         python-portalocker@4.4.2         redis
node-redlock5@5.0.0-beta.2       node-redlock5@5.0.0-beta.2       redlock
python-redis-py@8.2.0            python-redis-py@8.2.0            sentinel
python-redis-py@8.2.0            python-redis-py@8.2.0            redis-cluster
node-redlock                     node-redlock@4.2.0               redis
node-redlock                     node-redlock@4.2.0               redis-cluster
node-sesamecare-redlock@1.4.0    node-sesamecare-redlock@1.4.0    redis
node-redlock5@5.0.0-beta.2       node-redlock5@5.0.0-beta.2       redis
-                                lockjaw@0.1.0                    redis
-                                lockjaw@0.1.0                    redlock
-                                lockjaw@0.1.0                    sentinel
-                                lockjaw@0.1.0                    redis-cluster
-                                lockjaw@0.1.0                    etcd
-                                lockjaw@0.1.0                    zookeeper
-                                lockjaw@0.1.0                    postgres
-                                lockjaw@0.1.0                    mariadb
EOF
}

state_of() { # DIR -> finished | failed | interrupted | new
  local d=$1
  if [ -f "$d/explore.json" ]; then echo finished
  elif [ -f "$d/campaign.failed" ] && [ "$retry_failed" = 0 ]; then echo failed
  elif [ -f "$d/state.json" ]; then echo interrupted
  else echo new
  fi
}

past_stop() {
  [ -n "$stop_after" ] || return 1
  [ "$(date -u +%H:%M)" \> "$stop_after" ]
}

log() { echo "$(date -u +%FT%TZ) $*" | tee -a "$out/campaign.log"; }

mkdir -p "$out"
if [ "$list" = 0 ]; then
  [ -x "$lockjaw" ] || { echo "explore-campaign: $lockjaw is missing (hint: cargo build --profile ci --bin lockjaw, or set LOCKJAW)" >&2; exit 3; }
  log "binary $lockjaw ($(cd "$root" && git rev-parse --short HEAD))"
fi
while read -r spec name system; do
  [ -n "$spec" ] || continue
  label="$name-$system"
  [ -z "$only" ] || [[ $label == *"$only"* ]] || continue
  dir=$out/$label
  st=$(state_of "$dir")
  resume=(explore "$dir" --budget "$budget" --jobs "$jobs")
  fresh=(explore --system "$system" --budget "$budget" --jobs "$jobs" --seed "$seed" --out "$dir")
  [ "$spec" = - ] || fresh+=(--client "$spec")
  if [ "$list" = 1 ]; then
    case $st in
      interrupted) printf '%-12s %-45s lockjaw %s\n' "$st" "$label" "${resume[*]}" ;;
      *) printf '%-12s %-45s lockjaw %s\n' "$st" "$label" "${fresh[*]}" ;;
    esac
    continue
  fi
  case $st in finished|failed) continue ;; esac
  if past_stop; then
    log "stop: past $stop_after UTC, no new explore ($label and later pairs not started)"
    break
  fi
  if [ "$st" = interrupted ]; then cmd=("${resume[@]}"); else cmd=("${fresh[@]}"); fi
  mkdir -p "$dir"
  rm -f "$dir/campaign.failed"
  log "start $label ($st): lockjaw ${cmd[*]}; load $(cut -d' ' -f1-3 /proc/loadavg)"
  loads=$dir/campaign.load.$(date -u +%s)
  ( while sleep 30; do cut -d' ' -f1 /proc/loadavg; done ) >"$loads" &
  sampler=$!
  LOCKJAW_CLIENTS=$root/clients "$lockjaw" "${cmd[@]}" >>"$dir/campaign.out" 2>&1 </dev/null &
  pid=$!
  echo "$pid" >"$out/current.pid"
  rc=0
  wait "$pid" || rc=$?
  kill "$sampler" 2>/dev/null || true
  wait "$sampler" 2>/dev/null || true
  rm -f "$out/current.pid"
  load=$(awk '{s+=$1; if ($1>m) m=$1; n++} END {if (n) printf "mean %.2f max %.2f over %d samples", s/n, m, n; else print "no sample"}' "$loads")
  end=$(state_of "$dir")
  log "end $label: exit $rc, $end; load $load"
  if [ "$end" != finished ] && [ "$rc" = 3 ]; then
    echo "exit 3: $(tail -n 3 "$dir/campaign.out" | tr '\n' ' ')" >"$dir/campaign.failed"
    continue
  fi
  if [ "$end" != finished ]; then
    log "stop: $label was interrupted (resume: scripts/explore-campaign.sh --only $label)"
    break
  fi
done < <(pairs)
