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
    for command in ["run", "check", "report", "compare", "sweep"] {
        insta::assert_snapshot!(format!("lockjaw_{command}_help"), help(command));
    }
}
