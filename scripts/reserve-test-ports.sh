#!/usr/bin/env bash
# The tests bind fixed loopback ports in 30000-51999, which overlaps the
# kernel's ephemeral range (32768-60999 by default): an outgoing connection
# of one test can take a port another test is about to listen on. Reserve
# that block from ephemeral allocation (explicit binds still work). Needs
# root; without it the tests still run, with a small chance of a clash.
set -u
f=/proc/sys/net/ipv4/ip_local_reserved_ports
want=30000-51999
cur=$(cat "$f" 2>/dev/null || true)
case ",$cur," in *",$want,"*) exit 0 ;; esac
new=$want; [ -n "$cur" ] && new="$cur,$want"
if [ -w "$f" ]; then
  echo "$new" > "$f" && echo "reserved ports $want from ephemeral allocation (was: '${cur}')"
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  echo "$new" | sudo tee "$f" >/dev/null && echo "reserved ports $want (sudo)"
else
  echo "warning: cannot write $f; fixed test ports may clash with ephemeral ones" >&2
fi
exit 0
