//! The workload kinds and the loading of workload files: the built-ins,
//! flag overrides, and the refusals that name the line and field.

use super::*;

fn src(text: &str) -> Source {
    Source {
        name: "workloads/x.toml".into(),
        text: text.into(),
    }
}

#[test]
fn every_kind_is_listed_once() {
    // A new kind fails to compile here until it is in `Kind::ALL`.
    let position = |k: Kind| match k {
        Kind::Lock => 0,
        Kind::FencedCounter => 1,
        Kind::LockSet => 2,
        Kind::Register => 3,
        Kind::Leader => 4,
        Kind::Jobs => 5,
    };
    for (i, k) in Kind::ALL.iter().enumerate() {
        assert_eq!(position(*k), i, "{}", k.name());
    }
}

#[test]
fn every_builtin_loads() {
    for (name, _) in BUILTIN {
        let w = load(name, &Overrides::default()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(w.name, *name);
        // A variant of a kind is named `<kind>-...` (jobs-idempotent).
        let kind = w.kind.name();
        assert!(
            *name == kind || name.starts_with(&format!("{kind}-")),
            "{name}"
        );
    }
}

#[test]
fn flags_override_the_file() {
    let ov = Overrides {
        ttl_ms: Some(3000),
        concurrency: Some(2),
        time_limit_s: Some(4.5),
        ..Overrides::default()
    };
    let w = load("fenced-counter", &ov).unwrap();
    assert_eq!((w.ttl_ms, w.concurrency, w.time_limit_s), (3000, 2, 4.5));
}

#[test]
fn a_bad_kind_names_line_and_field() {
    let e = from_source(
        &src("name = \"x\"\n\nkind = \"mutex\"\n"),
        &Overrides::default(),
    )
    .unwrap_err();
    assert_eq!((e.line, e.field.as_deref()), (3, Some("kind")), "{e}");
}

#[test]
fn a_hold_longer_than_half_the_lease_is_refused() {
    let e = from_source(
        &src("name = \"x\"\nkind = \"lock\"\nttl_ms = 1000\nhold_ms = 600\n"),
        &Overrides::default(),
    )
    .unwrap_err();
    assert_eq!((e.line, e.field.as_deref()), (4, Some("hold_ms")), "{e}");
    let ov = Overrides {
        hold_ms: Some(900),
        ..Overrides::default()
    };
    let e = from_source(&src("name = \"x\"\nkind = \"lock\"\nttl_ms = 1000\n"), &ov).unwrap_err();
    assert!(e.to_string().starts_with("--hold-ms: "), "{e}");
}

/// The half-lease rule waits for the client's handshake: waived for a
/// library that renews every lease by itself, applied otherwise (an
/// adapter with `renewals = "none"` or `"some"`, lockjaw's own clients).
#[test]
fn the_half_lease_rule_is_waived_only_for_a_library_that_renews() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("long.toml");
    let text = "name = \"long\"\nkind = \"lock\"\nttl_ms = 1000\nhold_ms = 3000\n";
    std::fs::write(&path, text).unwrap();
    let name = path.to_str().unwrap();
    let w = load_for_client(name, &Overrides::default())
        .unwrap()
        .finish(true)
        .unwrap();
    assert_eq!((w.hold_ms, w.renew), (3000, false));
    let e = load_for_client(name, &Overrides::default())
        .unwrap()
        .finish(false)
        .unwrap_err();
    assert_eq!((e.line, e.field.as_deref()), (4, Some("hold_ms")), "{e}");
    assert!(e.to_string().contains("renewals = \"all\""), "{e}");
    // Every other check still comes first.
    std::fs::write(&path, format!("{text}think_ms = \"x\"\n")).unwrap();
    assert!(load_for_client(name, &Overrides::default()).is_err());
}

#[test]
fn an_unknown_lease_guard_names_line_and_field() {
    let e = from_source(
        &src("name = \"x\"\nkind = \"lock\"\nlease_guard = \"maybe\"\n"),
        &Overrides::default(),
    )
    .unwrap_err();
    assert_eq!(
        (e.line, e.field.as_deref()),
        (3, Some("lease_guard")),
        "{e}"
    );
    let w = from_source(
        &src("name = \"x\"\nkind = \"lock\"\nlease_guard = \"on\"\nttl_ms = 2000\nop_timeout_ms = 500\n"),
        &Overrides::default(),
    )
    .unwrap();
    assert!(w.lease_guard.is_on());
    // A whole op timeout must fit in the lease, or every write is abandoned.
    let e = from_source(
        &src("name = \"x\"\nkind = \"lock\"\nlease_guard = \"on\"\nttl_ms = 1000\n"),
        &Overrides::default(),
    )
    .unwrap_err();
    assert_eq!(e.field.as_deref(), Some("lease_guard"), "{e}");
}

#[test]
fn jobs_parameters_belong_to_the_jobs_kind() {
    let w = load("jobs", &Overrides::default()).unwrap();
    assert_eq!((w.kind, w.storage_key.as_str()), (Kind::Jobs, "jobs"));
    assert!(w.jobs > 0 && !w.idempotency_keys);
    let e = from_source(
        &src("name = \"x\"\nkind = \"lock\"\nidempotency_keys = true\n"),
        &Overrides::default(),
    )
    .unwrap_err();
    assert_eq!(
        (e.line, e.field.as_deref()),
        (3, Some("idempotency_keys")),
        "{e}"
    );
    let e = from_source(
        &src("name = \"x\"\nkind = \"jobs\"\njobs = 0\n"),
        &Overrides::default(),
    )
    .unwrap_err();
    assert_eq!((e.line, e.field.as_deref()), (3, Some("jobs")), "{e}");
}

#[test]
fn zero_concurrency_is_refused_with_a_hint() {
    let e = from_source(
        &src("name = \"x\"\nkind = \"lock\"\nconcurrency = 0\n"),
        &Overrides::default(),
    )
    .unwrap_err();
    assert_eq!(e.line, 3);
    assert!(e.to_string().contains("hint: use 1 to 256"), "{e}");
}

/// Issue 29: every numeric field has a range (a huge `hold_ms` overflowed
/// `hold_ms * 2`, a huge `time_limit_s` panicked the runner's Duration, a
/// huge `jobs` allocated a flag per job); each names its line and field.
#[test]
fn every_number_out_of_range_names_line_and_field() {
    let big = "9223372036854775807";
    let cases: Vec<(&str, String, &str)> = vec![
        ("lock", "time_limit_s = 1e308".into(), "time_limit_s"),
        ("lock", "time_limit_s = inf".into(), "time_limit_s"),
        ("lock", "time_limit_s = 0.0".into(), "time_limit_s"),
        ("lock", format!("ttl_ms = {big}"), "ttl_ms"),
        ("lock", "ttl_ms = 99".into(), "ttl_ms"),
        ("lock", format!("renew = true\nhold_ms = {big}"), "hold_ms"),
        ("lock", format!("think_ms = {big}"), "think_ms"),
        (
            "lock",
            format!("acquire_wait_ms = {big}"),
            "acquire_wait_ms",
        ),
        ("lock", format!("op_timeout_ms = {big}"), "op_timeout_ms"),
        ("lock", "op_timeout_ms = 0".into(), "op_timeout_ms"),
        ("lock", format!("concurrency = {big}"), "concurrency"),
        ("lock", "concurrency = 0".into(), "concurrency"),
        ("register", "read_ratio = nan".into(), "read_ratio"),
        ("register", format!("values = {big}"), "values"),
        ("jobs", format!("jobs = {big}"), "jobs"),
    ];
    for (kind, line, field) in cases {
        let text = format!("name = \"x\"\nkind = \"{kind}\"\n{line}\n");
        let e = from_source(&src(&text), &Overrides::default()).expect_err(&text);
        let at = text.lines().position(|l| l.starts_with(field)).unwrap() + 1;
        assert_eq!(
            (e.line, e.field.as_deref()),
            (at, Some(field)),
            "{text}: {e}"
        );
        assert!(e.hint.is_some(), "{e}");
    }
    let ov = Overrides {
        time_limit_s: Some(1e308),
        ..Overrides::default()
    };
    let e = load("lock", &ov).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("--time-limit: 1e308 s is out of range"),
        "{e}"
    );
}

#[test]
fn acquire_once_false_needs_an_op_timeout_above_the_wait() {
    let w = load("lock", &Overrides::default()).unwrap();
    assert_eq!(w.acquire_once, None, "the system's way by default");
    let ok = "name = \"x\"\nkind = \"lock\"\nacquire_once = false\nacquire_wait_ms = 1500\nop_timeout_ms = 2000\n";
    let w = from_source(&src(ok), &Overrides::default()).unwrap();
    assert_eq!(w.acquire_once, Some(false));
    let bad = "name = \"x\"\nkind = \"lock\"\nacquire_once = false\nacquire_wait_ms = 2000\n";
    let e = from_source(&src(bad), &Overrides::default()).unwrap_err();
    assert_eq!(
        (e.line, e.field.as_deref()),
        (3, Some("acquire_once")),
        "{e}"
    );
    assert!(e.to_string().contains("op_timeout_ms"), "{e}");
}
