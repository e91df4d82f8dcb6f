//! The `--help` of the main commands, as snapshots (`snapshots/`): a
//! change of a flag or its text is a reviewed diff.

use crate::report_common::lockjaw;

fn help(command: &str) -> String {
    let out = lockjaw().args([command, "--help"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "lockjaw {command} --help");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_help_of_the_main_commands() {
    insta::assert_snapshot!("lockjaw_help", {
        let out = lockjaw().arg("--help").output().unwrap();
        String::from_utf8(out.stdout).unwrap()
    });
    for command in [
        "run", "check", "report", "compare", "sweep", "shrink", "explore",
    ] {
        insta::assert_snapshot!(format!("lockjaw_{command}_help"), help(command));
    }
}

/// Issue 29: `lockjaw run --help` names every built-in workload and nemesis
/// (the lists come from the registries, so a new entry cannot be left out).
#[test]
fn run_help_lists_every_registered_workload_and_nemesis() {
    let text = help("run");
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let listed = |flag: &str| -> Vec<String> {
        let start = flat
            .find(&format!("A {flag} name ("))
            .unwrap_or_else(|| panic!("--{flag}'s list in:\n{text}"));
        let rest = &flat[start..];
        let (open, close) = (rest.find('(').unwrap(), rest.find(')').unwrap());
        rest[open + 1..close]
            .split(", ")
            .map(str::to_string)
            .collect()
    };
    let workloads: Vec<String> = lockjaw::workload::BUILTIN
        .iter()
        .map(|(n, _)| n.to_string())
        .collect();
    let nemeses: Vec<String> = lockjaw::nemesis::spec::BUILTIN
        .iter()
        .map(|(n, _)| n.to_string())
        .collect();
    assert_eq!(listed("workload"), workloads);
    assert_eq!(listed("nemesis"), nemeses);
    for must in ["jobs", "jobs-idempotent", "restart-empty", "delay-grant"] {
        assert!(
            workloads.contains(&must.to_string()) || nemeses.contains(&must.to_string()),
            "{must} is registered"
        );
    }
}

/// Issue 41: `lockjaw explore` refuses bad input before any run, exit 3,
/// each error naming the flag or directory with a hint.
#[test]
fn explore_refuses_bad_input_with_exit_3() {
    let tmp = tempfile::tempdir().unwrap();
    let empty = tmp.path().display().to_string();
    let cases: [(&[&str], &str); 5] = [
        (&[], "give --system"),
        (
            &["--system", "redis", "--budget", "5x"],
            "--budget 5x: not a length",
        ),
        (&["--system", "cas"], "no lock client to explore"),
        (&[&empty], "no state.json"),
        (&[&empty, "--system", "redis"], "cannot be used with"),
    ];
    for (args, says) in cases {
        let out = lockjaw().arg("explore").args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    assert!(
        std::fs::read_dir(tmp.path()).unwrap().next().is_none(),
        "nothing written"
    );
}
