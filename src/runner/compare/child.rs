//! One cell's run as a child `lockjaw run`: its command line, starting it
//! (with a signal when its parent dies), reading how it ended, and Ctrl-C
//! (the child heals; the comparison notes it and stops).

use super::super::cli::CompareArgs;
use crate::report::compare::CellSpec;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

pub(crate) static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Note Ctrl-C instead of dying of it, so the tables get written; the
/// handler is reset in children at exec, so `lockjaw run` handles its own.
pub(crate) fn catch_sigint() {
    let handler = on_sigint as extern "C" fn(libc::c_int);
    // SAFETY: the handler only stores to an atomic (async-signal-safe).
    unsafe {
        libc::signal(libc::SIGINT, handler as libc::sighandler_t);
    }
}

/// The signal a child `lockjaw run` gets when its `compare` or `sweep`
/// dies. Not SIGTERM: the kernel sends it again each time another thread
/// of the dying parent exits, and a second SIGTERM means "skip the grace
/// periods"; the run handles this one as one Ctrl-C, however often it
/// comes.
pub(crate) const PARENT_DIED: libc::c_int = libc::SIGUSR2;

/// A child `lockjaw run` gets [`PARENT_DIED`] when its `compare` or
/// `sweep` dies (even of SIGKILL), so it stops and heals itself as on
/// Ctrl-C; if that parent is already gone when the child starts, the
/// child exits at once.
pub(crate) fn terminate_with_parent(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: between fork and exec only async-signal-safe calls
    // (prctl, getppid, _exit) and no allocation.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, PARENT_DIED, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

/// The `lockjaw run` arguments of run `k` of a cell.
pub fn run_args(args: &CompareArgs, spec: &CellSpec, k: u32, dir: &Path) -> Vec<String> {
    let mut a: Vec<String> = [
        "run",
        "--system",
        &spec.system,
        "--workload",
        &spec.workload,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.extend(["--nemesis".into(), spec.nemesis.clone()]);
    if let Some(f) = spec.fencing {
        a.extend(["--fencing".into(), (if f { "on" } else { "off" }).into()]);
    }
    let mut opt = |flag: &str, v: Option<String>| {
        if let Some(v) = v {
            a.extend([flag.to_string(), v]);
        }
    };
    opt("--time-limit", args.time_limit.map(|t| t.to_string()));
    opt(
        "--concurrency",
        spec.concurrency.or(args.concurrency).map(|c| c.to_string()),
    );
    opt("--ttl-ms", args.ttl_ms.map(|t| t.to_string()));
    opt(
        "--pause-budget-ms",
        args.pause_budget.pause_budget_ms.map(|t| t.to_string()),
    );
    opt(
        "--seed",
        args.seed.map(|s| s.wrapping_add(u64::from(k)).to_string()),
    );
    let c = &args.choices;
    opt(
        "--client",
        (spec.client != "builtin").then(|| spec.client.clone()),
    );
    opt(
        "--storage",
        (c.storage != crate::combination::StorageChoice::Builtin).then(|| c.storage.name().into()),
    );
    opt("--hosts", c.hosts.as_ref().map(|h| h.display().to_string()));
    if c.attach {
        a.push("--attach".into());
    }
    if c.allow_majority {
        a.push("--allow-majority".into());
    }
    a.extend(["--out".into(), dir.display().to_string()]);
    a.extend(args.run_flags.iter().cloned());
    // Cells search witness histories only when asked (`--witness`).
    if !args.witness && !a.iter().any(|f| f == "--no-witness") {
        a.push("--no-witness".into());
    }
    a
}

/// Run one cell's run `k` as a child `lockjaw run`.
/// Runs that go at once share the terminal: no progress bars then.
pub(crate) fn run_cell(
    args: &CompareArgs,
    spec: &CellSpec,
    k: u32,
    dir: &Path,
    parallel: bool,
) -> Result<(), String> {
    if INTERRUPTED.load(Ordering::SeqCst) {
        return Err("not run: the comparison was interrupted".into());
    }
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find the lockjaw binary: {e}"))?;
    let mut argv = run_args(args, spec, k, dir);
    if parallel && !argv.iter().any(|a| a == "--no-progress") {
        argv.push("--no-progress".into());
    }
    // A password goes to the child in a private file, never on its line.
    let pgpassword = super::super::cli::PGPASSWORD;
    let env = std::env::var(pgpassword).ok();
    let (argv, _password_file) = super::secret::without_secrets(argv, dir, env)?;
    eprintln!("next: lockjaw {}", argv.join(" "));
    let mut cmd = std::process::Command::new(exe);
    cmd.args(&argv)
        .env_remove(pgpassword)
        .stdin(std::process::Stdio::null());
    terminate_with_parent(&mut cmd);
    // This thread waits for the child: the death signal, which follows
    // the thread that started it, fires only when this process dies.
    let status = cmd
        .status()
        .map_err(|e| format!("cannot start lockjaw run: {e}"))?;
    let outcome = std::fs::read_to_string(dir.join("run.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| {
            v.get("outcome")
                .and_then(|o| o.as_str())
                .map(str::to_string)
        });
    if outcome.as_deref() == Some("interrupted") {
        INTERRUPTED.store(true, Ordering::SeqCst);
        return Err("interrupted".into());
    }
    match status.code() {
        Some(0..=2) => Ok(()),
        Some(c) => Err(outcome
            .filter(|o| o.starts_with("failed"))
            .unwrap_or_else(|| format!("lockjaw run exited with {c} (its error is above)"))),
        None => Err("lockjaw run was killed by a signal".into()),
    }
}

#[cfg(test)]
mod pause_budget_tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn every_cell_run_gets_the_pause_budget() {
        #[derive(Parser)]
        struct Compare {
            #[command(flatten)]
            args: CompareArgs,
        }
        let args =
            Compare::try_parse_from(["compare", "--systems", "redis", "--pause-budget-ms", "30"])
                .unwrap()
                .args;
        let spec = CellSpec {
            system: "redis".into(),
            client: "builtin".into(),
            workload: "fenced-counter".into(),
            nemesis: "none".into(),
            fencing: None,
            concurrency: None,
        };
        let a = run_args(&args, &spec, 0, Path::new("x")).join(" ");
        assert!(a.contains("--pause-budget-ms 30"), "{a}");
    }

    #[test]
    fn issue30_cells_write_witnesses_only_with_witness() {
        #[derive(Parser)]
        struct Compare {
            #[command(flatten)]
            args: CompareArgs,
        }
        let spec = CellSpec {
            system: "redis".into(),
            client: "builtin".into(),
            workload: "fenced-counter".into(),
            nemesis: "none".into(),
            fencing: None,
            concurrency: None,
        };
        let cell = |argv: &[&str]| {
            let args = Compare::try_parse_from(argv).unwrap().args;
            run_args(&args, &spec, 0, Path::new("x"))
        };
        let plain = cell(&["compare", "--systems", "redis"]);
        assert_eq!(
            plain.iter().filter(|a| *a == "--no-witness").count(),
            1,
            "{plain:?}"
        );
        let asked = cell(&["compare", "--systems", "redis", "--witness"]);
        assert!(!asked.iter().any(|a| a == "--no-witness"), "{asked:?}");
        let given = cell(&["compare", "--systems", "redis", "--", "--no-witness"]);
        assert_eq!(
            given.iter().filter(|a| *a == "--no-witness").count(),
            1,
            "{given:?}"
        );
    }
}
