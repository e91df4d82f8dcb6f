//! The shell scripts lockjaw sends to an attached node's host, one pure
//! function each: what the functions of [`super`] run, and what `--plan`
//! prints. POSIX sh with `readlink`, `awk`, `ls`, `tr`, `cat`, `sort`,
//! `timeout`, `setsid` and `mktemp` (each found through the host's PATH).
//!
//! A process is *stamped* `PID START CGROUP`: field 22 of
//! `/proc/PID/stat` and its `0::` line of `/proc/PID/cgroup` (else all
//! lines joined by `;`). Only processes in the SSH shell's own network
//! namespace are found or stamped (a zombie never is), so a pid that now
//! names another process, or a process on another host that shares this
//! process table, never matches a recorded stamp.

use super::{AttachSpec, Listen, LogMark, LogSource, ProcStamp};
use crate::process::Signal;
use crate::remote::host::{quote, SBIN_PATH};
use crate::remote::Find;

/// How long the start command may take, in seconds.
pub const START_TIMEOUT_S: u64 = 60;

/// How long a kill waits for the processes to be gone, in seconds.
pub const KILL_WAIT_S: u64 = 10;

/// The helpers every script starts with: `lj_me` (this shell's network
/// namespace), `lj_stamp PID` (prints the stamp, or fails) and `lj_tree
/// PID` (the pid and its descendants, the pid first).
const PRELUDE: &str = r#"lj_me=$(readlink /proc/$$/ns/net) || { echo "cannot read /proc/$$/ns/net (this shell's network namespace)" >&2; exit 2; }
lj_stamp() {
  lj_p=$1
  [ "$(readlink "/proc/$lj_p/ns/net" 2>/dev/null)" = "$lj_me" ] || return 1
  { read -r lj_s <"/proc/$lj_p/stat"; } 2>/dev/null || return 1
  lj_s=${lj_s##*) }
  set -- $lj_s
  case $1 in Z|X|x) return 1;; esac
  lj_start=${20}
  lj_cg=; lj_all=
  { while IFS= read -r lj_l; do
      case $lj_l in 0::*) lj_cg=$lj_l;; esac
      lj_all=${lj_all:+$lj_all;}$lj_l
    done <"/proc/$lj_p/cgroup"; } 2>/dev/null
  [ -n "$lj_cg" ] || lj_cg=$lj_all
  echo "$lj_p $lj_start $lj_cg"
}
lj_tree() {
  cat /proc/[0-9]*/stat 2>/dev/null | awk -v root="$1" '
    { l = $0; p = $1; sub(/^.*\) /, "", l); split(l, f, " "); pp[p] = f[2] }
    END { o[1] = root; n = 1; seen[root] = 1
      for (i = 1; i <= n; i++) for (p in pp) if (pp[p] == o[i] && !(p in seen)) { o[++n] = p; seen[p] = 1 }
      for (i = 1; i <= n; i++) print o[i] }'
}
"#;

/// `PATH` with the sbin directories, then [`PRELUDE`].
fn head() -> String {
    format!("{SBIN_PATH}\n{PRELUDE}")
}

/// Print the found processes, one `PID START CGROUP` line each, main
/// process first; a unit also prints `prop KEY=VALUE` lines (Restart,
/// RestartUSec, WatchdogUSec). Exit 1 with the reason when none matches,
/// 2 when more match than the description allows (naming each pid and
/// its command line) or the host cannot be read.
pub fn discover(a: &AttachSpec) -> String {
    discover_at(a, None)
}

/// [`discover`], refusing what is never a server ([`NEVER`]), then
/// printing the facts a proof compares ([`FACTS`]) and, with `listen`,
/// which process holds the node's listening socket ([`LISTEN`]).
pub fn discover_at(a: &AttachSpec, listen: Option<&Listen>) -> String {
    let find = match &a.find {
        Find::Unit { unit } => unit_main(&a.systemctl, unit),
        Find::Pidfile { pidfile, exe } => pidfile_main(pidfile, exe.as_deref()),
        Find::Exe { exe, arg } => exe_main(exe, arg),
    };
    let mut s = format!("{}{NEVER}{find}lj_never_main\n{TREE_OUT}{FACTS}", head());
    if let Some(l) = listen {
        s.push_str(LISTEN);
        s.push_str(&format!(
            "LJ_WANT={}\nlj_listen \"$lj_main $lj_rest\"\n",
            quote(&l.want().join(" "))
        ));
    }
    s
}

/// Which process holds the node's listening socket now ([`LISTEN`]),
/// among `procs` that still carry their stamps (the first of them the
/// main process); `gone` when none does.
pub fn listening(procs: &[ProcStamp], listen: &Listen) -> String {
    let mut s = head();
    s.push_str(LISTEN);
    s.push_str("lj_main=; lj_set=\nlj_is() { [ \"$(lj_stamp \"$1\")\" = \"$1 $2 $3\" ] && { [ -n \"$lj_main\" ] || lj_main=$1; lj_set=\"$lj_set $1\"; }; true; }\n");
    for p in procs {
        s.push_str(&format!("lj_is {}\n", stamp_args(p)));
    }
    s.push_str(&format!(
        "[ -n \"$lj_main\" ] || {{ echo gone; exit 0; }}\nLJ_WANT={}\nlj_listen \"$lj_set\"\n",
        quote(&l_want(listen))
    ));
    s
}

fn l_want(l: &Listen) -> String {
    l.want().join(" ")
}

/// After `lj_main` (and for a unit, maybe `lj_rest`) is set: refuse what
/// is never a server ([`NEVER`]), print the main process, then the rest,
/// then the facts a proof compares ([`FACTS`]).
const TREE_OUT: &str = r#"lj_stamp "$lj_main" || { echo "pid $lj_main is gone, or runs in another network namespace than this SSH session" >&2; exit 1; }
[ -n "${lj_rest+x}" ] || lj_rest=$(lj_tree "$lj_main")
lj_never_in "$lj_rest"
for lj_q in $lj_rest; do [ "$lj_q" = "$lj_main" ] || lj_stamp "$lj_q" || true; done
"#;

/// What is never taken for a server, checked on the main process `lj_main`
/// (`lj_never_main`) and on the processes it stands for (`lj_never_in
/// PIDS`): PID 1; this SSH session's shell (`$$`) and its ancestors; any
/// process running sshd; a login session (`login`, or a session leader
/// with a controlling terminal). Exit 2 naming why.
const NEVER: &str = r#"lj_anc=; lj_p=$$
while [ -n "$lj_p" ] && [ "$lj_p" -gt 1 ] 2>/dev/null; do
  lj_anc="$lj_anc $lj_p"; lj_s=
  { read -r lj_s <"/proc/$lj_p/stat"; } 2>/dev/null
  lj_s=${lj_s##*) }; set -- $lj_s; lj_p=${2:-}
done
lj_never() { echo "pid $lj_main $1: never taken for a server (hint: the attach table must name the server's own process; look at what the pidfile, unit or exe and arg name on the host)" >&2; exit 2; }
lj_never_main() {
  [ "$lj_main" -gt 1 ] || lj_never "is PID 1, the host's init"
  lj_c=; { read -r lj_c <"/proc/$lj_main/comm"; } 2>/dev/null
  lj_x=$(readlink "/proc/$lj_main/exe" 2>/dev/null)
  case $lj_c in sshd|sshd-session|sshd-auth) lj_never "runs sshd ($lj_c)";; login) lj_never "is login, a login session";; esac
  case ${lj_x##*/} in sshd|sshd-session|sshd-auth) lj_never "runs sshd ($lj_x)";; esac
  case " $lj_anc " in *" $lj_main "*) lj_never "is this SSH session's own shell or one of its ancestors";; esac
  lj_s=; { read -r lj_s <"/proc/$lj_main/stat"; } 2>/dev/null
  lj_s=${lj_s##*) }; set -- $lj_s
  [ "${4:-}" = "$lj_main" ] && [ "${5:-0}" != 0 ] && lj_never "leads a login session with a terminal"
  true
}
lj_never_in() {
  for lj_q in $1; do
    case " $lj_anc " in *" $lj_q "*) lj_never "has this SSH session's own process $lj_q among its processes (its tree holds the session)";; esac
  done
}
"#;

/// After the stamps: the facts a proof compares, for the main process
/// `lj_main`: whether its pid and time namespaces are this shell's
/// (`ns pid same|other`), the host's boot time and clock ticks (`boot
/// BTIME HZ`), its command line (`cmd` and its arguments separated by
/// the byte 0x1f).
const FACTS: &str = r#"for lj_n in pid time; do
  if [ "$(readlink "/proc/$lj_main/ns/$lj_n" 2>/dev/null)" = "$(readlink "/proc/$$/ns/$lj_n" 2>/dev/null)" ]; then echo "ns $lj_n same"; else echo "ns $lj_n other"; fi
done
echo "boot $(awk '/^btime/ { print $2 }' /proc/stat) $(getconf CLK_TCK 2>/dev/null || echo 100)"
printf 'cmd %s\n' "$(tr '\000\n' '\037 ' <"/proc/$lj_main/cmdline" 2>/dev/null)"
"#;

/// `lj_listen PIDS` (main process `lj_main`): which process holds a
/// listening TCP socket whose local address is one of `LJ_WANT`'s
/// (`HEXADDR:HEXPORT` as `/proc/net/tcp` and `tcp6` spell them), read
/// from `/proc/$lj_main/net/` (the sockets of its own network namespace).
/// Prints `listen PID INODE ADDR` when one of PIDS holds it, else
/// `listen-other PID INODE ADDR COMM` (another process of the namespace:
/// a port forward), `listen-unheld ADDR` (no process seen holding it),
/// or `listen-none`; `fd-unreadable PID` for each of PIDS whose fds
/// cannot be read.
const LISTEN: &str = r#"lj_listen() {
  lj_socks=$(LJ_WANT=$LJ_WANT awk 'BEGIN { n = split(ENVIRON["LJ_WANT"], w, " "); for (i = 1; i <= n; i++) ok[w[i]] = 1 } FNR > 1 && $4 == "0A" && ($2 in ok) { print $10 ":" $2 }' "/proc/$lj_main/net/tcp" "/proc/$lj_main/net/tcp6" 2>/dev/null)
  [ -n "$lj_socks" ] || { echo "listen-none"; return 0; }
  for lj_q in $1; do
    lj_fds=$(ls -l "/proc/$lj_q/fd/" 2>/dev/null) || { echo "fd-unreadable $lj_q"; continue; }
    for lj_k in $lj_socks; do
      case $lj_fds in *"socket:[${lj_k%%:*}]"*) echo "listen $lj_q ${lj_k%%:*} ${lj_k#*:}"; return 0;; esac
    done
  done
  for lj_d in /proc/[0-9]*; do
    [ "$(readlink "$lj_d/ns/net" 2>/dev/null)" = "$lj_me" ] || continue
    lj_fds=$(ls -l "$lj_d/fd/" 2>/dev/null) || continue
    for lj_k in $lj_socks; do
      case $lj_fds in *"socket:[${lj_k%%:*}]"*)
        lj_c=; { read -r lj_c <"$lj_d/comm"; } 2>/dev/null
        echo "listen-other ${lj_d#/proc/} ${lj_k%%:*} ${lj_k#*:} ${lj_c:-?}"; return 0;;
      esac
    done
  done
  set -- $lj_socks
  echo "listen-unheld ${1#*:}"
}
"#;

fn unit_main(systemctl: &str, unit: &str) -> String {
    let (s, u) = (quote(systemctl), quote(unit));
    format!(
        r#"lj_props=$({s} show -p MainPID -p ControlGroup -p Restart -p RestartUSec -p WatchdogUSec {u} 2>&1) || {{ echo "{systemctl} show {unit} failed: $lj_props" >&2; exit 2; }}
lj_main=0; lj_cgpath=
while IFS= read -r lj_l; do
  case $lj_l in
    MainPID=*) lj_main=${{lj_l#MainPID=}};;
    ControlGroup=*) lj_cgpath=${{lj_l#ControlGroup=}};;
    Restart=*|RestartUSec=*|WatchdogUSec=*) echo "prop $lj_l";;
  esac
done <<LJ_EOF
$lj_props
LJ_EOF
case $lj_main in ''|0|*[!0-9]*) echo "unit {unit} runs no process (MainPID=$lj_main)" >&2; exit 1;; esac
for lj_root in /sys/fs/cgroup /sys/fs/cgroup/unified /sys/fs/cgroup/systemd; do
  if [ -n "$lj_cgpath" ] && [ -r "$lj_root$lj_cgpath/cgroup.procs" ]; then
    lj_rest=$(find "$lj_root$lj_cgpath" -name cgroup.procs -exec cat {{}} + 2>/dev/null | sort -n -u)
    break
  fi
done
"#
    )
}

fn pidfile_main(pidfile: &str, exe: Option<&str>) -> String {
    let f = quote(pidfile);
    let mut s = format!(
        r#"lj_main=; {{ read -r lj_main <{f}; }} 2>/dev/null
[ -n "$lj_main" ] || {{ echo "no pid in the pidfile {pidfile} (missing, unreadable or empty)" >&2; exit 1; }}
case $lj_main in ''|0|*[!0-9]*) echo "the pidfile {pidfile} holds \"$lj_main\", not a pid" >&2; exit 1;; esac
"#
    );
    if let Some(exe) = exe {
        let e = quote(exe);
        s.push_str(&format!(
            r#"lj_exe=$(readlink -f {e}) || lj_exe={e}
lj_is=$(readlink "/proc/$lj_main/exe" 2>/dev/null)
[ "$lj_is" = "$lj_exe" ] || {{ echo "pid $lj_main (from {pidfile}) runs \"$lj_is\", not {exe}" >&2; exit 1; }}
"#
        ));
    }
    s
}

fn exe_main(exe: &str, arg: &str) -> String {
    let (e, g) = (quote(exe), quote(arg));
    format!(
        r#"lj_exe=$(readlink -f {e}) || lj_exe={e}
lj_hits=
for lj_q in $(ls -l /proc/[0-9]*/exe 2>/dev/null | LJ_EXE=$lj_exe awk '{{ i = index($0, " -> "); if (i == 0 || substr($0, i + 4) != ENVIRON["LJ_EXE"]) next; s = substr($0, 1, i - 1); sub(/\/exe$/, "", s); sub(/^.*\/proc\//, "", s); print s }}'); do
  [ "$lj_q" = "$$" ] && continue
  [ "$(readlink "/proc/$lj_q/ns/net" 2>/dev/null)" = "$lj_me" ] || continue
  tr '\000' '\n' <"/proc/$lj_q/cmdline" 2>/dev/null | LJ_ARG={g} awk 'BEGIN {{ n = split(ENVIRON["LJ_ARG"], w, " ") }} {{ a[NR] = $0 }} END {{ for (i = 1; i + n - 1 <= NR; i++) {{ for (j = 1; j <= n && a[i + j - 1] == w[j]; j++); if (j > n) exit 0 }} exit 1 }}' && lj_hits="$lj_hits $lj_q"
done
lj_top=$(cat /proc/[0-9]*/stat 2>/dev/null | LJ_HITS=$lj_hits awk '{{ l = $0; p = $1; sub(/^.*\) /, "", l); split(l, f, " "); pp[p] = f[2] }} END {{ n = split(ENVIRON["LJ_HITS"], h, " "); for (i = 1; i <= n; i++) hit[h[i]] = 1; for (i = 1; i <= n; i++) {{ q = pp[h[i]]; top = 1; for (k = 0; q != "" && q > 1 && k < 4096; k++) {{ if (q in hit) {{ top = 0; break }} q = pp[q] }} if (top) print h[i] }} }}')
set -- $lj_top
if [ $# -eq 0 ]; then echo "no process runs {exe} with argument(s) {arg} in this SSH session's network namespace" >&2; exit 1; fi
if [ $# -gt 1 ]; then
  echo "$# processes run {exe} with argument(s) {arg}; the description must match one (hint: make arg name this node only):" >&2
  for lj_q in $lj_top; do echo "  pid $lj_q: $(tr '\000' ' ' <"/proc/$lj_q/cmdline" 2>/dev/null)" >&2; done
  exit 2
fi
lj_main=$1
"#
    )
}

/// Run [`discover`] in a subshell: its reason (stderr) first, then a
/// last line `status N` with its exit code (0: the node's processes run,
/// 1: none runs, 2: cannot tell). Exits 0 itself.
pub fn running(a: &AttachSpec) -> String {
    format!("( {} ) 2>&1 >/dev/null\necho \"status $?\"\n", discover(a))
}

/// `lj_is PID START CGROUP` for each stamp, as one shell word list.
fn stamp_args(p: &ProcStamp) -> String {
    format!("{} {} {}", p.pid, p.start, quote(&p.cgroup))
}

/// Signal each of `procs` whose pid still has its start time and cgroup
/// (checked in the same script, right before the `kill`); print `sent
/// PID` or `gone PID` for each.
pub fn signal(procs: &[ProcStamp], sig: Signal) -> String {
    let mut s = head();
    s.push_str(&format!(
        r#"lj_sig() {{
  if [ "$(lj_stamp "$1")" = "$1 $2 $3" ] && kill -s {} "$1" 2>/dev/null; then echo "sent $1"; else echo "gone $1"; fi
}}
"#,
        sig.name()
    ));
    for p in procs {
        s.push_str(&format!("lj_sig {}\n", stamp_args(p)));
    }
    s
}

/// Kill the node's processes (a unit: `systemctl kill -s KILL UNIT`;
/// else SIGKILL each of `procs` that still has its stamp) and wait up to
/// [`KILL_WAIT_S`] until none of `procs` runs with its stamp.
pub fn kill(a: &AttachSpec, procs: &[ProcStamp]) -> String {
    let mut s = head();
    match &a.find {
        Find::Unit { unit } => s.push_str(&format!(
            "{} kill -s KILL {} || exit 2\n",
            quote(&a.systemctl),
            quote(unit)
        )),
        _ => {
            s.push_str("lj_kill() { [ \"$(lj_stamp \"$1\")\" = \"$1 $2 $3\" ] && kill -s KILL \"$1\" 2>/dev/null; true; }\n");
            for p in procs {
                s.push_str(&format!("lj_kill {}\n", stamp_args(p)));
            }
        }
    }
    s.push_str("lj_left() { [ \"$(lj_stamp \"$1\")\" = \"$1 $2 $3\" ] && lj_alive=\"$lj_alive $1\"; true; }\n");
    s.push_str("lj_i=0\nwhile :; do\n  lj_alive=\n");
    for p in procs {
        s.push_str(&format!("  lj_left {}\n", stamp_args(p)));
    }
    s.push_str(&format!(
        r#"  [ -z "$lj_alive" ] && exit 0
  lj_i=$((lj_i + 1))
  [ $lj_i -ge {} ] && {{ echo "still running {KILL_WAIT_S} s after SIGKILL: pid(s)$lj_alive" >&2; exit 1; }}
  sleep 0.1
done
"#,
        KILL_WAIT_S * 10
    ));
    s
}

/// Run the start command in a session of its own (so it outlives the SSH
/// session), its output into a temporary file that is shown when it
/// fails or does not return within [`START_TIMEOUT_S`].
pub fn start(a: &AttachSpec) -> String {
    format!(
        r#"{SBIN_PATH}
lj_out=$(mktemp) || exit 2
timeout {t} setsid sh -c {cmd} </dev/null >"$lj_out" 2>&1
lj_rc=$?
if [ $lj_rc -ne 0 ]; then
  if [ $lj_rc -eq 124 ]; then echo "did not return within {t} s (hint: it must return once the server runs, as systemctl start does), printing:" >&2
  else echo "exited with $lj_rc, printing:" >&2; fi
  cat "$lj_out" >&2; rm -f "$lj_out"; exit 1
fi
rm -f "$lj_out"
"#,
        t = START_TIMEOUT_S,
        cmd = quote(&a.start)
    )
}

/// Print the host's clock (`date +%s`) and, for a log file, its size in
/// bytes (0 when missing): the mark [`log_since`] reads from. None
/// without a log source.
pub fn log_mark(a: &AttachSpec) -> Option<String> {
    match &a.log {
        LogSource::None => None,
        LogSource::Journal { .. } => Some("date +%s\n".into()),
        LogSource::File { path } => Some(format!(
            "date +%s\nwc -c <{} 2>/dev/null || echo 0\n",
            quote(path)
        )),
    }
}

/// Print the log lines since `mark` (journal: `journalctl -u UNIT
/// --since @UNIX --no-pager`; a file: the bytes appended since the mark,
/// or all of it when it shrank, e.g. rotated). None without a source.
pub fn log_since(a: &AttachSpec, mark: &LogMark) -> Option<String> {
    match &a.log {
        LogSource::None => None,
        LogSource::Journal { unit } => Some(format!(
            "{SBIN_PATH}\n{} -u {} --since @{} --no-pager\n",
            quote(&a.journalctl),
            quote(unit),
            mark.unix
        )),
        LogSource::File { path } => {
            let f = quote(path);
            let from = mark.bytes.unwrap_or(0);
            Some(format!(
                "[ -f {f} ] || exit 0\nlj_n=$(wc -c <{f})\nif [ \"$lj_n\" -lt {from} ]; then cat {f}; else tail -c +{} {f}; fi\n",
                from + 1
            ))
        }
    }
}
