//! Server processes on a host, found by `LOCKJAW_TAG=<tag>` in their
//! environment (tag = `lockjaw-<run-id>-<node>`), so a restart, a kill of
//! lockjaw between spawn and record, or PID reuse never confuse them.
//!
//! Each call is one `sh` on the host; the processes of a tag are found
//! with one `grep` over `/proc/[0-9]*/environ`, not a command per pid.

use super::host::quote;
use super::{Host, RemoteError};
use crate::process::Signal;
use std::time::Duration;

/// What to start on a host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteLaunch {
    pub tag: String,
    pub program: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// Remote path of the log, appended to.
    pub log: String,
}

/// Whether `tag` is one lockjaw makes: `[A-Za-z0-9._-]+`, at most 128
/// bytes (it is matched as a fixed string, but stays readable in `ps e`).
pub fn check_tag(tag: &str) -> Result<(), String> {
    if tag.is_empty()
        || tag.len() > 128
        || !tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    {
        return Err(format!("{tag:?} is not a process tag lockjaw makes"));
    }
    Ok(())
}

/// A shell function `pids` printing the pids whose environment holds
/// exactly `LOCKJAW_TAG=<tag>` (a zombie's environment reads empty).
fn pids_fn(tag: &str) -> String {
    env_pids_fn("pids", "LOCKJAW_TAG", tag)
}

/// A shell function `NAME` printing the pids whose environment holds
/// exactly `VAR=<tag>`, with one `grep` over `/proc/[0-9]*/environ` (a
/// zombie's environment reads empty): the servers' tags here, the dead
/// man's switches' in [`super::deadman`].
pub(crate) fn env_pids_fn(name: &str, var: &str, tag: &str) -> String {
    format!(
        "{name}() {{ grep -lzxF -e {} /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3; }}",
        quote(&format!("{var}={tag}"))
    )
}

fn tagged(host: &Host, tag: &str) -> Result<String, RemoteError> {
    check_tag(tag).map_err(|e| RemoteError::on(host, e))?;
    Ok(pids_fn(tag))
}

/// Start the process (setsid, detached, stdin /dev/null); returns its pid
/// once it runs the program (its environment carries the tag). Refused
/// while a process of the tag still runs; an error with the end of the log
/// if it exits at once (a program that is not there).
pub async fn start(host: &Host, l: &RemoteLaunch) -> Result<u32, RemoteError> {
    let pids = tagged(host, &l.tag)?;
    for (k, _) in &l.env {
        let ok = !k.is_empty()
            && !k.starts_with(|c: char| c.is_ascii_digit())
            && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !ok || k == "LOCKJAW_TAG" {
            return Err(RemoteError::on(
                host,
                format!("{k:?} is not an environment variable name lockjaw may set"),
            ));
        }
    }
    if l.program.is_empty() || l.program.contains('=') || l.log.is_empty() {
        // `env` would read a program holding '=' as one more variable.
        return Err(RemoteError::on(
            host,
            format!(
                "program {:?} with log {:?} cannot be started",
                l.program, l.log
            ),
        ));
    }
    let mut cmd = vec![
        "setsid".to_string(),
        "env".to_string(),
        "--".to_string(),
        quote(&format!("LOCKJAW_TAG={}", l.tag)),
    ];
    cmd.extend(l.env.iter().map(|(k, v)| quote(&format!("{k}={v}"))));
    cmd.push(quote(&l.program));
    cmd.extend(l.args.iter().map(|a| quote(a)));
    let log = quote(&l.log);
    let script = format!(
        "{pids}\n\
         p=$(pids); if [ -n \"$p\" ]; then echo \"processes tagged {tag} still run: $(echo $p)\" >&2; exit 1; fi\n\
         mkdir -p \"$(dirname {log})\" && cd / || exit 1\n\
         {cmd} >>{log} 2>&1 </dev/null &\n\
         pid=$!; i=0\n\
         while ! grep -qzxF -e {var} /proc/$pid/environ 2>/dev/null; do\n\
           s=$(sed 's/.*) //' /proc/$pid/stat 2>/dev/null | cut -c1)\n\
           if [ -z \"$s\" ] || [ \"$s\" = Z ]; then printf '%s exited at once; the end of its log:\\n' {prog} >&2; tail -n 5 {log} >&2; exit 1; fi\n\
           i=$((i+1)); if [ $i -ge 500 ]; then printf '%s did not start within 5 s\\n' {prog} >&2; exit 1; fi\n\
           sleep 0.01\n\
         done\n\
         echo $pid",
        tag = l.tag,
        cmd = cmd.join(" "),
        var = quote(&format!("LOCKJAW_TAG={}", l.tag)),
        prog = quote(&l.program),
    );
    let out = host.sh(&script).await?;
    out.trim().parse::<u32>().map_err(|_| {
        RemoteError::on(
            host,
            format!("starting {} printed {out:?}, not a pid", l.program),
        )
    })
}

/// The script that sends `sig` to every process of `tag` (a tag
/// [`check_tag`] passed) and prints how many.
pub(crate) fn signal_script(tag: &str, sig: Signal) -> String {
    format!(
        "{}\np=$(pids); [ -z \"$p\" ] && {{ echo 0; exit 0; }}\nkill -{} $p 2>/dev/null; set -- $p; echo $#",
        pids_fn(tag),
        sig.name()
    )
}

/// Send `sig` to every process of the tag; returns how many.
pub async fn signal(host: &Host, tag: &str, sig: Signal) -> Result<usize, RemoteError> {
    tagged(host, tag)?;
    let script = signal_script(tag, sig);
    // On a fault's path: through the shell the connection keeps open.
    let out = host.quick(&script).await?;
    out.trim()
        .parse()
        .map_err(|_| RemoteError::on(host, format!("signalling {tag} printed {out:?}")))
}

/// CONT, TERM, up to `grace`, KILL, wait until gone (at most 10 s).
pub async fn stop(host: &Host, tag: &str, grace: Duration) -> Result<(), RemoteError> {
    let pids = tagged(host, tag)?;
    let tenths = grace.as_millis().div_ceil(100);
    let script = format!(
        "{pids}\n\
         p=$(pids); [ -z \"$p\" ] && exit 0\n\
         kill -CONT $p 2>/dev/null; kill -TERM $p 2>/dev/null\n\
         i=0; while [ $i -lt {tenths} ] && [ -n \"$(pids)\" ]; do sleep 0.1; i=$((i+1)); done\n\
         p=$(pids); [ -n \"$p\" ] && kill -KILL $p 2>/dev/null\n\
         i=0; while [ $i -lt 100 ] && [ -n \"$(pids)\" ]; do sleep 0.1; i=$((i+1)); done\n\
         p=$(pids); [ -z \"$p\" ] || {{ echo \"still running 10 s after SIGKILL: $(echo $p)\" >&2; exit 1; }}"
    );
    host.sh(&script).await.map(drop)
}

/// Whether a process of the tag runs.
pub async fn alive(host: &Host, tag: &str) -> Result<bool, RemoteError> {
    let pids = tagged(host, tag)?;
    let out = host
        .sh(&format!(
            "{pids}\n[ -n \"$(pids)\" ] && echo yes || echo no"
        ))
        .await?;
    Ok(out.trim() == "yes")
}

/// Whether every process of the tag is stopped (state `T`; false when
/// none runs).
pub async fn stopped(host: &Host, tag: &str) -> Result<bool, RemoteError> {
    let pids = tagged(host, tag)?;
    // The state is the field after the `)` that closes the command name.
    let script = format!(
        "{pids}\n\
         p=$(pids); [ -z \"$p\" ] && {{ echo no; exit 0; }}\n\
         for x in $p; do s=$(sed 's/.*) //' /proc/$x/stat 2>/dev/null | cut -c1); [ \"$s\" = T ] || {{ echo no; exit 0; }}; done\n\
         echo yes"
    );
    Ok(host.sh(&script).await?.trim() == "yes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_plain_words() {
        check_tag("lockjaw-ab12cd34-h1").unwrap();
        for bad in ["", "a b", "x;rm", "a\nb", "$(x)"] {
            assert!(check_tag(bad).is_err(), "{bad:?}");
        }
        assert!(pids_fn("lockjaw-1-h1").contains("LOCKJAW_TAG=lockjaw-1-h1"));
    }
}
