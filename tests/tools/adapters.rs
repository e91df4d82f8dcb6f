//! The adapter protocol's page and `compare --clients`: the example
//! adapter the docs show is the one shipped (and tested in
//! `tests/systems/adapters.rs`); a client that does not serve a system is
//! an N/A cell with the adapter's own reason, decided before anything runs.

use std::path::Path;
use std::process::Command;

const EXAMPLE: &str = "clients/example-redis/adapter";

#[test]
fn the_docs_show_the_shipped_example_adapter() {
    let page = std::fs::read_to_string("docs/adapters.md").unwrap();
    let file = std::fs::read_to_string(EXAMPLE).unwrap();
    let block = format!("```python\n{file}```");
    assert!(
        page.contains(&block),
        "docs/adapters.md must show {EXAMPLE} verbatim in its last code block"
    );
    let lines = file.lines().count();
    assert!(
        page.contains(&format!("the {lines}-line example")),
        "the table names its length"
    );
}

fn compare(out: &Path, args: &[&str]) -> (i32, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_lockjaw"))
        .arg("compare")
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into(),
        String::from_utf8_lossy(&o.stderr).into(),
    )
}

#[test]
fn compare_marks_a_client_that_does_not_serve_a_system_na() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cmp");
    let (code, stdout, stderr) = compare(
        &out,
        &[
            "--systems",
            "etcd,zookeeper",
            "--clients",
            "example-redis",
            "--nemesis",
            "none",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    // The terminal's narrow view says why; compare.md holds the full table.
    assert!(
        stdout.contains(
            "N/A: example-redis does not serve etcd: this lock speaks to one Redis server"
        ),
        "{stdout}"
    );
    let md = std::fs::read_to_string(out.join("compare.md")).unwrap();
    assert!(md.contains("| system | client | nemesis |"), "{md}");
    assert!(
        md.contains("| etcd | example-redis | none | default | N/A |"),
        "{md}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("compare.json")).unwrap()).unwrap();
    assert_eq!(json[1]["client"], "example-redis");
    assert_eq!(json[1]["outcome"]["status"], "not-applicable");
    assert!(!out.join("cells").exists(), "no run started");
    // A fencing token the library lacks is N/A too, with the library named.
    let out2 = tmp.path().join("cmp2");
    let (code, stdout, stderr) = compare(
        &out2,
        &[
            "--systems",
            "redis",
            "--clients",
            "example-redis",
            "--nemesis",
            "none",
            "--fencing",
            "on",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("N/A: example-redis 1 gives no fencing token"),
        "{stdout}"
    );
    let (code, _, stderr) = compare(
        &tmp.path().join("cmp3"),
        &["--client", "example-redis", "--clients", "builtin"],
    );
    assert_eq!(code, 3);
    assert!(stderr.contains("--clients only"), "{stderr}");
}
