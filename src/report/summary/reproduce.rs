//! The command that reproduces a run: run.json's own `lockjaw run`
//! command line without `--out`, with its seed; or, for a run another
//! command started (compare, sweep), one rebuilt from its parameters.
//! Quoted for a POSIX shell.

use crate::report::rundir::{RunDir, RunFile};

/// Quote one argument for a POSIX shell.
fn quote(s: &str) -> String {
    shlex::try_quote(s)
        .map(|c| c.into_owned())
        .unwrap_or_else(|_| s.replace('\0', ""))
}

/// The reproducing command: run.json's `command`, with `--seed` added when
/// missing; or one rebuilt from the parameters.
pub(super) fn command(rd: &RunDir, seed: &Option<String>) -> String {
    // A run.json of an older lockjaw may hold a URL's password.
    let mut args = match crate::auth::redact::args(&rd.run.command) {
        // A `lockjaw run` command line; a run started by another command
        // (e.g. compare) is rebuilt from its parameters.
        mut a if a.get(1).map(String::as_str) == Some("run") => {
            a[0] = "lockjaw".into();
            without_own_password_file(without_out(a), &rd.dir)
        }
        _ => rebuilt_args(&rd.run),
    };
    if let Some(s) = seed {
        if !args
            .iter()
            .any(|a| a == "--seed" || a.starts_with("--seed="))
        {
            args.extend(["--seed".to_string(), s.clone()]);
        }
    }
    args.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ")
}

/// Where the secret of a reproduce line comes from, when the line leaves
/// it out: a `--postgres-url` whose password is in no file the line names.
pub fn secret_note(command: &str) -> Option<&'static str> {
    (command.contains("--postgres-url") && !command.contains("--postgres-password-file")).then_some(
        "The password of --postgres-url is not recorded: run it with PGPASSWORD set, \
         or add --postgres-password-file FILE (a file only you can read; docs/auth.md).",
    )
}

/// Drop `--postgres-password-file FILE` when FILE lies in the run
/// directory itself: the private copy `compare` or `sweep` made for this
/// run and removed after it, which a reproduce line cannot name (the note
/// of [`secret_note`] says where the password goes instead).
fn without_own_password_file(args: Vec<String>, dir: &std::path::Path) -> Vec<String> {
    let flag = "--postgres-password-file";
    let own = |p: &str| {
        let parent = std::path::Path::new(p).parent().map(std::fs::canonicalize);
        matches!((parent, std::fs::canonicalize(dir)), (Some(Ok(a)), Ok(b)) if a == b)
    };
    let mut out: Vec<String> = vec![];
    for a in args {
        if out.last().is_some_and(|l| l == flag) && own(&a) {
            out.pop();
        } else if !a
            .strip_prefix(flag)
            .and_then(|r| r.strip_prefix('='))
            .is_some_and(own)
        {
            out.push(a);
        }
    }
    out
}

/// Drop `--out DIR`: a run refuses a directory that holds one already.
fn without_out(args: Vec<String>) -> Vec<String> {
    let mut out = vec![];
    let mut skip = false;
    for a in args {
        if skip {
            skip = false;
        } else if a == "--out" {
            skip = true;
        } else if !a.starts_with("--out=") {
            out.push(a);
        }
    }
    out
}

fn rebuilt_args(run: &RunFile) -> Vec<String> {
    let w = run.workload.clone().unwrap_or_default();
    let flags = [
        ("--system", run.system.clone()),
        ("--workload", w.name),
        (
            "--nemesis",
            run.nemesis.as_ref().and_then(|n| n.name.clone()),
        ),
        ("--time-limit", w.time_limit_s.map(|t| t.to_string())),
        ("--concurrency", w.concurrency.map(|c| c.to_string())),
        ("--ttl-ms", run.ttl_ms.or(w.ttl_ms).map(|t| t.to_string())),
        ("--hold-ms", w.hold_ms.map(|t| t.to_string())),
        ("--think-ms", w.think_ms.map(|t| t.to_string())),
        ("--fencing", run.fencing.clone()),
        ("--client", run.client.clone().filter(|c| c != "builtin")),
    ];
    let mut a = vec!["lockjaw".to_string(), "run".to_string()];
    for (flag, v) in flags {
        if let Some(v) = v {
            a.extend([flag.to_string(), v]);
        }
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};
    use std::path::PathBuf;

    fn rd(run: Value) -> RunDir {
        RunDir {
            dir: PathBuf::from("x"),
            run: serde_json::from_value(run).unwrap(),
            results: serde_json::from_value(json!({"version": 1, "valid": true, "checkers": []}))
                .unwrap(),
            verdict: None,
            nemesis: Value::Null,
        }
    }

    #[test]
    fn issue40_a_run_of_compare_names_no_password_file_of_its_own() {
        let d = tempfile::tempdir().unwrap();
        let own = d.path().join("postgres.password").display().to_string();
        let argv = |f: &str| {
            [
                "lockjaw",
                "run",
                "--postgres-url",
                "postgres://u:pw@h/db",
                "--postgres-password-file",
                f,
            ]
            .map(String::from)
            .to_vec()
        };
        let mut r = rd(json!({"command": argv(&own), "seed": 1}));
        r.dir = d.path().to_path_buf();
        let line = command(&r, &None);
        assert_eq!(line, "lockjaw run --postgres-url postgres://u@h/db");
        assert!(secret_note(&line).is_some_and(|n| n.contains("PGPASSWORD")));
        let mut r = rd(json!({"command": argv("/home/me/pw"), "seed": 1}));
        r.dir = d.path().to_path_buf();
        let line = command(&r, &None);
        assert!(
            line.ends_with("--postgres-password-file /home/me/pw"),
            "{line}"
        );
        assert_eq!(secret_note(&line), None);
    }

    #[test]
    fn command_adds_the_seed_and_quotes() {
        let r = rd(
            json!({"command": ["/x/lockjaw", "run", "--system", "redis", "--out", "a b"], "seed": 42}),
        );
        assert_eq!(
            command(&r, &Some("42".into())),
            "lockjaw run --system redis --seed 42"
        );
        let r = rd(
            json!({"command": ["lockjaw", "run", "--system", "redis", "--nemesis", "a'b"], "seed": 1}),
        );
        assert_eq!(
            command(&r, &Some("1".into())),
            r#"lockjaw run --system redis --nemesis "a'b" --seed 1"#
        );
        let r = rd(json!({"system": "etcd", "fencing": "on", "workload": {"time_limit_s": 10.0}}));
        assert_eq!(
            command(&r, &Some("7".into())),
            "lockjaw run --system etcd --time-limit 10 --fencing on --seed 7"
        );
    }
}
