use super::*;
use crate::toml_file::Source;

fn src(text: &str) -> Source {
    Source {
        name: "accepted.toml".into(),
        text: text.into(),
    }
}

fn case(name: &str, client: &str, outcome: Outcome) -> Case {
    Case {
        suite: "compare".into(),
        name: name.into(),
        keys: [
            ("client".to_string(), client.to_string()),
            ("fencing".into(), "off".into()),
        ]
        .into(),
        outcome,
    }
}

fn failed(kinds: &[&str]) -> Outcome {
    Outcome::Failed {
        kinds: kinds.iter().map(|k| k.to_string()).collect(),
        message: "invalid: stale writes accepted".into(),
        witness: Some("cells/x-0/witness-stale-writes.jsonl".into()),
    }
}

const BASELINE: &str = r#"# what the libraries document
[[accept]]
kind = "stale-writes"
client = "python-redis-py"
reason = "documented: no fencing token"

[[accept]]
kind = "two-holders"
fencing = "off"
client = "gone"
reason = "fixed long ago"
"#;

#[test]
fn an_accepted_failure_is_skipped_and_an_unused_entry_is_stale() {
    let b = Baseline::parse(&src(BASELINE)).unwrap();
    assert_eq!(b.entries[0].line, 2);
    assert_eq!(b.entries[1].line, 7);
    let mut cases = vec![
        case("a", "python-redis-py", failed(&["stale-writes"])),
        // Two kinds, one accepted: still a failure.
        case(
            "b",
            "python-redis-py",
            failed(&["stale-writes", "two-holders"]),
        ),
        case("c", "other", failed(&["stale-writes"])),
        case("d", "python-redis-py", Outcome::Passed),
    ];
    let stale = apply(&mut cases, &b);
    assert_eq!(
        cases[0].outcome,
        Outcome::Accepted {
            reason: "documented: no fencing token (accepted.toml:2)".into()
        }
    );
    assert!(matches!(cases[1].outcome, Outcome::Failed { .. }));
    assert!(matches!(cases[2].outcome, Outcome::Failed { .. }));
    assert_eq!(stale.len(), 1);
    assert_eq!(stale[0].line, 7);
    assert_eq!(
        stale[0].what(),
        "two-holders with client = gone, fencing = off"
    );
    assert_eq!(exit(&cases), crate::exit::Exit::Invalid);
    assert_eq!(exit(&cases[..1]), crate::exit::Exit::Valid);
}

#[test]
fn an_entry_matching_a_case_that_still_fails_is_not_stale() {
    let b = Baseline::parse(&src(BASELINE)).unwrap();
    // two-holders first: the stale-writes entry is looked at all the same.
    let mut cases = vec![case(
        "b",
        "python-redis-py",
        failed(&["two-holders", "stale-writes"]),
    )];
    let stale = apply(&mut cases, &b);
    assert!(matches!(cases[0].outcome, Outcome::Failed { .. }));
    assert_eq!(stale.iter().map(|e| e.line).collect::<Vec<_>>(), [7]);
}

#[test]
fn bad_baselines_name_the_file_line_and_field() {
    let cases = [
        ("[[accept]]\nkind = \"x\"\n", "accepted.toml:1: field `reason`: entry 1: an accepted outcome needs its reason"),
        ("[[accept]]\nkind = \"x\"\nreason = \"r\"\n\n[[accept]]\nkind = \"y\"\nreason = \" \"\n", "accepted.toml:7: field `reason`: entry 2"),
        ("[[accept]]\nreason = \"r\"\nclient = \"c\"\n", "accepted.toml:1: field `kind`: entry 1: accepts nothing"),
        ("[[accept]]\nkind = \"x\"\nfencing = \"maybe\"\nreason = \"r\"\n", "accepted.toml:3: field `fencing`: entry 1: `maybe` is not on or off"),
        ("[[accept]]\nkind = \"x\"\nsytem = \"redis\"\nreason = \"r\"\n", "accepted.toml:3: field `sytem`: unknown field"),
        ("[[accept]]\nkind = 3\nreason = \"r\"\n", "accepted.toml:2: field `kind`"),
    ];
    for (text, want) in cases {
        let e = Baseline::parse(&src(text)).unwrap_err().to_string();
        assert!(e.starts_with(want), "{text}\n{e}\nwant {want}");
    }
}

#[test]
fn junit_maps_each_outcome() {
    let b = Baseline::parse(&src(BASELINE)).unwrap();
    let mut cases = vec![
        case("accepted", "python-redis-py", failed(&["stale-writes"])),
        case("failed", "other", failed(&["stale-writes"])),
        case("passed", "x", Outcome::Passed),
        case(
            "na",
            "x",
            Outcome::NotApplicable {
                reason: "Redlock has no fencing token".into(),
            },
        ),
        case(
            "unknown",
            "x",
            Outcome::Unknown {
                reason: "no fault landed".into(),
            },
        ),
        case(
            "error",
            "x",
            Outcome::Error {
                message: "redis-server did not start".into(),
            },
        ),
    ];
    let stale = apply(&mut cases, &b);
    let x = junit::xml("lockjaw", &cases, &stale, &b.file, false).unwrap();
    assert!(
        x.contains(r#"<testsuite name="compare" tests="6" skipped="3" errors="1" failures="1""#),
        "{x}"
    );
    assert!(x.contains(r#"<failure message="invalid: stale writes accepted (witness: cells/x-0/witness-stale-writes.jsonl)" type="stale-writes"/>"#), "{x}");
    assert!(
        x.contains(
            r#"<skipped message="accepted: documented: no fencing token (accepted.toml:2)"/>"#
        ),
        "{x}"
    );
    assert!(
        x.contains(r#"<skipped message="N/A: Redlock has no fencing token"/>"#),
        "{x}"
    );
    assert!(
        x.contains(r#"<skipped message="unknown: no fault landed"/>"#),
        "{x}"
    );
    assert!(
        x.contains(r#"<testcase name="accepted.toml:7" classname="lockjaw.baseline">"#),
        "{x}"
    );
    let strict = junit::xml("lockjaw", &cases, &stale, &b.file, true).unwrap();
    assert!(
        strict.contains(r#"<failure message="unknown: no fault landed" type="unknown"/>"#),
        "{strict}"
    );
}
