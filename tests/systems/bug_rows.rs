//! The rows of `bugs/` as the systems tests replay them: one side's
//! `lockjaw run` argv, built by `lockjaw bugs`' own code
//! (`bugs::replay::command`), so a test runs what `lockjaw bugs run` runs.

use lockjaw::bugs::{catalogue, replay, Bug, Role};
use std::path::Path;

/// Row `id` of the repository's `bugs/`, checked as `lockjaw bugs` checks it.
pub fn row(id: &str) -> Bug {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("bugs/{id}.toml"));
    catalogue::load_file(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

/// "buggy" or "fixed" as a role.
pub fn role(side: &str) -> Role {
    match side {
        "buggy" => Role::Buggy,
        "fixed" => Role::Fixed,
        other => panic!("no side {other}"),
    }
}

/// The `lockjaw run` arguments (without `lockjaw run`) of `side` of `bug`,
/// inline parts written under `tmp`, `--seed` when given, then `extra`:
/// a flag `extra` gives again replaces the row's (clap takes each once).
pub fn run_args(
    bug: &Bug,
    side: &str,
    tmp: &Path,
    seed: Option<u64>,
    extra: &[&str],
) -> Vec<String> {
    let cmd = replay::command(bug, role(side), tmp, seed, None)
        .unwrap_or_else(|e| panic!("{}: {e}", bug.id))
        .unwrap_or_else(|| panic!("{}: no {side} side", bug.id));
    let given: Vec<&str> = cmd[2..].iter().map(String::as_str).collect();
    let mut args = Vec::new();
    let mut i = 0;
    while i < given.len() {
        let flag = given[i];
        let valued = given.get(i + 1).is_some_and(|v| !v.starts_with("--"));
        let width = if valued { 2 } else { 1 };
        if !extra.contains(&flag) {
            args.extend(given[i..i + width].iter().map(|s| s.to_string()));
        }
        i += width;
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}
