//! `--junit FILE` against the JUnit schema committed in
//! tests/fixtures/junit.xsd, with Debian's xmllint (libxml2-utils, which
//! `make test` installs): every outcome a case can have (passed, failed,
//! an error, N/A, accepted by a baseline, unknown skipped or failing
//! with --unknown-fails) and a stale baseline entry, in one file each way.
//! The real runs' files are validated too (tests/systems/shards.rs).

use lockjaw::report::ci::{apply, junit, Baseline, Case, Outcome};
use lockjaw::toml_file::Source;
use std::path::Path;

/// Validate `file` against the committed schema; panics with xmllint's
/// words when it does not validate.
pub fn validate(file: &Path) {
    let xsd = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/junit.xsd");
    let o = std::process::Command::new("xmllint")
        .args(["--noout", "--schema"])
        .arg(&xsd)
        .arg(file)
        .output()
        .expect("xmllint (Debian package libxml2-utils; make deps installs it)");
    assert!(
        o.status.success(),
        "{} does not validate:\n{}",
        file.display(),
        String::from_utf8_lossy(&o.stderr)
    );
}

fn case(name: &str, outcome: Outcome) -> Case {
    Case {
        suite: if name.contains('/') {
            "bugs"
        } else {
            "compare"
        }
        .into(),
        name: name.into(),
        keys: [("system".to_string(), "redis".to_string())].into(),
        outcome,
    }
}

#[test]
fn every_outcome_validates_against_the_junit_schema() {
    let b = Baseline::parse(&Source {
        name: "accepted.toml".into(),
        text: "[[accept]]\nkind = \"stale-writes\"\nreason = \"documented: no fencing token\"\n\n\
               [[accept]]\nkind = \"lost-updates\"\nreason = \"<gone> & \\\"quoted\\\"\"\n"
            .into(),
    })
    .unwrap();
    let failed = |kinds: &[&str]| Outcome::Failed {
        kinds: kinds.iter().map(|k| k.to_string()).collect(),
        message: "1 of 1 run(s) invalid; the first invalid: 2 two holders <&>".into(),
        witness: Some("cells/redis-lock-none-0/witness-two-holders.jsonl".into()),
    };
    let mut cases = vec![
        case("redis-lock-none", Outcome::Passed),
        case("redis-lock-pause-holder", failed(&["two-holders"])),
        case("redis-lock-kill-holder", failed(&["stale-writes"])),
        case(
            "redlock-lock-none",
            Outcome::NotApplicable {
                reason: "Redlock has no fencing token".into(),
            },
        ),
        case(
            "etcd-lock-none",
            Outcome::Error {
                message: "etcd did not start".into(),
            },
        ),
        case(
            "row/buggy",
            Outcome::Unknown {
                reason: "not enough evidence: 3 of 10 trials".into(),
            },
        ),
    ];
    let stale = apply(&mut cases, &b);
    assert_eq!(stale.len(), 1);
    let tmp = tempfile::tempdir().unwrap();
    for strict in [false, true] {
        let f = tmp.path().join(format!("junit-{strict}.xml"));
        junit::write(&f, "lockjaw", &cases, &stale, &b.file, strict).unwrap();
        validate(&f);
        let x = std::fs::read_to_string(&f).unwrap();
        assert_eq!(x.matches("<testcase ").count(), 7, "{x}");
        assert_eq!(
            x.matches("<failure ").count(),
            1 + usize::from(strict),
            "{x}"
        );
        assert!(x.contains("<error message=\"etcd did not start\""), "{x}");
    }
    // And a file that breaks the schema does not validate: the check bites.
    let bad = tmp.path().join("bad.xml");
    std::fs::write(
        &bad,
        "<testsuites><testsuite name=\"x\"><testcase/></testsuite></testsuites>",
    )
    .unwrap();
    let o = std::process::Command::new("xmllint")
        .args(["--noout", "--schema"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/junit.xsd"))
        .arg(&bad)
        .output()
        .unwrap();
    assert!(
        !o.status.success(),
        "a testcase without a name, a testsuite without tests"
    );
}

/// A bad baseline stops the command before any run, naming the file,
/// the line and the field, exit 3.
#[test]
fn a_bad_baseline_is_refused_before_any_run() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("accepted.toml");
    std::fs::write(
        &bad,
        "[[accept]]\nkind = \"stale-writes\"\nfencing = \"sometimes\"\nreason = \"r\"\n",
    )
    .unwrap();
    let cases: [&[&str]; 3] = [
        &["compare", "--systems", "redis", "--nemesis", "none"],
        &["run", "--system", "redis", "--runs", "2"],
        &["merge", "nowhere"],
    ];
    for args in cases {
        let out = tmp.path().join("out");
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_lockjaw"))
            .args(args)
            .arg("--out")
            .arg(&out)
            .arg("--baseline")
            .arg(&bad)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "{args:?}: {err}");
        if args[0] != "merge" {
            assert!(
                err.contains(&format!(
                    "{}:3: field `fencing`: entry 1: `sometimes` is not on or off",
                    bad.display()
                )),
                "{args:?}: {err}"
            );
            assert!(
                !out.join("cells").exists() && !out.join("run-1").exists(),
                "nothing ran"
            );
        }
    }
}
