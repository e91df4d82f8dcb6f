//! Reading what the scripts of [`super::script`] print: the stamps and
//! unit settings discovery found, what a signal reached, whether a node
//! runs, a log mark; and systemd's time spans (`RestartUSec=100ms`,
//! `1min 30s`) in milliseconds.

use super::{
    from_proc_net, Facts, Found, Listening, LogMark, ProcStamp, Running, Signalled, UnitProps,
};

/// One `PID START CGROUP` line.
fn stamp(line: &str) -> Option<ProcStamp> {
    let mut w = line.splitn(3, ' ');
    let pid = w.next()?.parse().ok()?;
    let start = w.next()?.parse().ok()?;
    let cgroup = w.next().unwrap_or("").to_string();
    Some(ProcStamp { pid, start, cgroup })
}

/// The output of `script::discover`: stamps, main first, and (`unit`)
/// the `prop` lines.
pub(super) fn found(out: &str, unit: bool) -> Result<Found, String> {
    let mut procs = Vec::new();
    let (mut restart, mut restart_ms, mut watchdog_ms) = (String::new(), 0, 0);
    let mut facts = Facts {
        listening: listening(out),
        ..Facts::default()
    };
    for l in out.lines().filter(|l| !l.trim().is_empty()) {
        if fact(&mut facts, l) || LISTEN_WORDS.iter().any(|w| l.starts_with(w)) {
            continue;
        }
        if let Some(p) = l.strip_prefix("prop ") {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            match k {
                "Restart" => restart = v.to_string(),
                "RestartUSec" => restart_ms = timespan_ms(v)?,
                "WatchdogUSec" => watchdog_ms = timespan_ms(v)?,
                _ => {}
            }
            continue;
        }
        let s = stamp(l).ok_or_else(|| format!("discovery printed {l:?}, not PID START CGROUP"))?;
        if !procs.iter().any(|p: &ProcStamp| p.pid == s.pid) {
            procs.push(s);
        }
    }
    if procs.is_empty() {
        return Err("discovery found no process".into());
    }
    let unit = unit.then(|| UnitProps {
        restart: if restart.is_empty() {
            "no".into()
        } else {
            restart
        },
        restart_ms,
        watchdog_ms,
    });
    Ok(Found { procs, unit, facts })
}

/// The first words of the lines of `script::LISTEN`.
const LISTEN_WORDS: [&str; 6] = [
    "listen ",
    "listen-other ",
    "listen-unheld ",
    "listen-none",
    "fd-unreadable ",
    "gone",
];

/// One line of `script::FACTS` into `f`; false when it is not one.
fn fact(f: &mut Facts, l: &str) -> bool {
    if let Some(rest) = l.strip_prefix("ns ") {
        let same = rest.ends_with(" same");
        match rest.split(' ').next() {
            Some("pid") => f.same_pid_ns = same,
            Some("time") => f.same_time_ns = same,
            _ => {}
        }
    } else if let Some(rest) = l.strip_prefix("boot ") {
        let mut w = rest.split_whitespace().map(|x| x.parse::<u64>().ok());
        if let (Some(Some(b)), Some(Some(hz))) = (w.next(), w.next()) {
            f.boot = Some((b, hz));
        }
    } else if let Some(rest) = l.strip_prefix("cmd") {
        f.cmdline = rest
            .strip_prefix(' ')
            .unwrap_or(rest)
            .split('\u{1f}')
            .filter(|a| !a.is_empty())
            .map(str::to_string)
            .collect();
    } else {
        return false;
    }
    true
}

/// The output of `script::LISTEN` (and `script::listening`): who holds
/// the node's listening socket.
pub(super) fn listening(out: &str) -> Listening {
    let mut unreadable = Vec::new();
    for l in out.lines().map(str::trim) {
        let w: Vec<&str> = l.split(' ').collect();
        let at = |i: usize| w.get(i).and_then(|s| from_proc_net(s));
        let pid = |i: usize| w.get(i).and_then(|s| s.parse::<u32>().ok());
        match w[0] {
            "listen" => {
                if let (Some(pid), Some(at)) = (pid(1), at(3)) {
                    return Listening::Held { pid, at };
                }
            }
            "listen-other" => {
                if let (Some(pid), Some(at)) = (pid(1), at(3)) {
                    let comm = w.get(4..).map(|c| c.join(" ")).unwrap_or_default();
                    return Listening::Other { pid, comm, at };
                }
            }
            "listen-unheld" => {
                if let Some(at) = at(1) {
                    return Listening::Unheld { at, unreadable };
                }
            }
            "fd-unreadable" => unreadable.extend(pid(1)),
            "listen-none" => return Listening::Nothing,
            "gone" => return Listening::Gone,
            _ => {}
        }
    }
    Listening::NotAsked
}

/// A systemd time span in ms: `0`, `infinity` (u64::MAX), `100ms`,
/// `1min 30s`, `2.5s`, a bare number (µs).
pub(super) fn timespan_ms(v: &str) -> Result<u64, String> {
    let v = v.trim();
    if v.is_empty() || v == "0" {
        return Ok(0);
    }
    if v == "infinity" {
        return Ok(u64::MAX);
    }
    if let Ok(us) = v.parse::<u64>() {
        return Ok(us / 1000);
    }
    let mut total = 0f64;
    for part in v.split_whitespace() {
        let at = part
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("time span {v:?}: {part:?} has no unit"))?;
        let (n, unit) = part.split_at(at);
        let n: f64 = n
            .parse()
            .map_err(|_| format!("time span {v:?}: {part:?} is not a number"))?;
        let ms = match unit {
            "us" | "usec" | "µs" => 0.001,
            "ms" | "msec" => 1.0,
            "s" | "sec" | "second" | "seconds" => 1e3,
            "m" | "min" | "minute" | "minutes" => 60e3,
            "h" | "hr" | "hour" | "hours" => 3600e3,
            "d" | "day" | "days" => 86_400e3,
            "w" | "week" | "weeks" => 604_800e3,
            _ => return Err(format!("time span {v:?}: unknown unit {unit:?}")),
        };
        total += n * ms;
    }
    Ok(total.round() as u64)
}

/// The output of `script::signal`: which of `procs` were sent the
/// signal and which were gone.
pub(super) fn signalled(out: &str, procs: &[ProcStamp]) -> Result<Signalled, String> {
    let mut r = Signalled::default();
    for p in procs {
        let sent = format!("sent {}", p.pid);
        let gone = format!("gone {}", p.pid);
        if out.lines().any(|l| l.trim() == sent) {
            r.sent.push(p.clone());
        } else if out.lines().any(|l| l.trim() == gone) {
            r.gone.push(p.clone());
        } else {
            return Err(format!(
                "the signal script said nothing of pid {}: {out:?}",
                p.pid
            ));
        }
    }
    Ok(r)
}

/// The output of `script::running`.
pub(super) fn running(out: &str) -> Result<Running, String> {
    let lines: Vec<&str> = out.lines().filter(|l| !l.trim().is_empty()).collect();
    let Some((last, why)) = lines.split_last() else {
        return Err("the discovery script printed nothing".into());
    };
    let why = why.join("; ");
    match last.trim() {
        "status 0" => Ok(Running::Yes),
        "status 1" => Ok(Running::No(why)),
        s => Err(format!("cannot tell whether it runs ({s}): {why}")),
    }
}

/// The output of `script::log_mark`: the host's clock, then maybe a size.
pub(super) fn mark(out: &str) -> Result<LogMark, String> {
    let mut w = out.split_whitespace();
    let unix = w
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("`date +%s` printed {out:?}"))?;
    let bytes = w.next().and_then(|s| s.parse().ok());
    Ok(LogMark { unix, bytes })
}

/// The program a start command runs: its first word that is not a
/// `VAR=value` assignment (`None` for an empty command).
pub(super) fn start_program(start: &str) -> Option<String> {
    shlex::split(start)?
        .into_iter()
        .find(|w| !(w.contains('=') && !w.starts_with('/') && !w.starts_with('=')))
}
