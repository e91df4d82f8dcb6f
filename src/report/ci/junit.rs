//! `--junit FILE`: the cases as JUnit XML (written by the `quick-junit`
//! crate), one `<testsuite>` per suite. Passed: a plain case. Failed: a
//! `<failure>` whose message is the verdict line and the witness path and
//! whose type is the anomaly kinds. Could not run: an `<error>`. N/A and
//! accepted: `<skipped>` with the reason. Unknown: `<skipped>` with its
//! reason, or a `<failure>` with `--unknown-fails`. A baseline's stale
//! entries: skipped cases of the suite `baseline`, named by their line.

use super::{Case, Entry, Outcome};
use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
use std::path::Path;

fn skipped(message: &str) -> TestCaseStatus {
    let mut s = TestCaseStatus::skipped();
    s.set_message(message);
    s
}

fn non_success(kind: NonSuccessKind, message: &str, ty: &str) -> TestCaseStatus {
    let mut s = TestCaseStatus::non_success(kind);
    s.set_message(message).set_type(ty);
    s
}

fn status(o: &Outcome, unknown_fails: bool) -> TestCaseStatus {
    match o {
        Outcome::Passed => TestCaseStatus::success(),
        Outcome::Failed {
            kinds,
            message,
            witness,
        } => {
            let m = match witness {
                Some(w) => format!("{message} (witness: {w})"),
                None => message.clone(),
            };
            let ty = if kinds.is_empty() {
                "invalid".into()
            } else {
                kinds.join(",")
            };
            non_success(NonSuccessKind::Failure, &m, &ty)
        }
        Outcome::Error { message } => non_success(NonSuccessKind::Error, message, "error"),
        Outcome::NotApplicable { reason } => skipped(&format!("N/A: {reason}")),
        Outcome::Accepted { reason } => skipped(&format!("accepted: {reason}")),
        Outcome::Unknown { reason } if unknown_fails => non_success(
            NonSuccessKind::Failure,
            &format!("unknown: {reason}"),
            "unknown",
        ),
        Outcome::Unknown { reason } => skipped(&format!("unknown: {reason}")),
    }
}

/// The JUnit XML of `cases` (and a baseline's `stale` entries, read from
/// `baseline`), the report named `name`.
pub fn xml(
    name: &str,
    cases: &[Case],
    stale: &[&Entry],
    baseline: &str,
    unknown_fails: bool,
) -> Result<String, String> {
    let mut r = Report::new(name);
    let mut suites: Vec<TestSuite> = vec![];
    for c in cases {
        let i = match suites.iter().position(|s| s.name.as_str() == c.suite) {
            Some(i) => i,
            None => {
                suites.push(TestSuite::new(c.suite.as_str()));
                suites.len() - 1
            }
        };
        let mut t = TestCase::new(c.name.as_str(), status(&c.outcome, unknown_fails));
        // No per-case properties: the JUnit schema CI readers follow
        // (tests/fixtures/junit.xsd) has none; the name says the unit.
        t.set_classname(format!("lockjaw.{}", c.suite));
        suites[i].add_test_case(t);
    }
    if !stale.is_empty() {
        let mut s = TestSuite::new("baseline");
        for e in stale {
            let msg = format!(
                "stale: {} no longer occurs (hint: remove the entry)",
                e.what()
            );
            let mut t = TestCase::new(format!("{baseline}:{}", e.line), skipped(&msg));
            t.set_classname("lockjaw.baseline");
            s.add_test_case(t);
        }
        suites.push(s);
    }
    r.add_test_suites(suites);
    r.to_string().map_err(|e| e.to_string())
}

/// Write [`xml`] to `path`.
pub fn write(
    path: &Path,
    name: &str,
    cases: &[Case],
    stale: &[&Entry],
    baseline: &str,
    unknown_fails: bool,
) -> Result<(), String> {
    let x = xml(name, cases, stale, baseline, unknown_fails)?;
    if let Some(d) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    std::fs::write(path, x).map_err(|e| format!("{}: {e}", path.display()))
}
