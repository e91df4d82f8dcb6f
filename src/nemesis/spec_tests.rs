//! Tests of the nemesis file parser (src/nemesis/spec.rs).

use super::*;

fn src(text: &str) -> Source {
    Source {
        name: "nemesis/x.toml".into(),
        text: text.into(),
    }
}

#[test]
fn every_builtin_loads() {
    for (name, _) in BUILTIN {
        let s = load(name).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.name, *name);
    }
}

#[test]
fn an_unknown_fault_lists_the_known_ones() {
    let e = from_source(&src("name = \"x\"\nfault = \"meteor\"\n")).unwrap_err();
    assert_eq!((e.line, e.field.as_deref()), (2, Some("fault")));
    assert!(e.to_string().contains("pause-holder"), "{e}");
}

#[test]
fn a_target_the_fault_cannot_use_is_refused() {
    let e = from_source(&src(
        "name = \"x\"\nfault = \"pause-holder\"\ntarget = \"majority\"\n",
    ))
    .unwrap_err();
    assert_eq!((e.line, e.field.as_deref()), (3, Some("target")), "{e}");
}

#[test]
fn duration_in_leases_scales_with_the_lease() {
    let s = from_source(&src(
        "name = \"x\"\nfault = \"pause-holder\"\nduration_leases = 2.0\n",
    ))
    .unwrap();
    assert_eq!(s.duration(Duration::from_secs(2)), Duration::from_secs(4));
    let e = from_source(&src(
        "name = \"x\"\nfault = \"pause-holder\"\nduration_ms = 5\nduration_leases = 2.0\n",
    ))
    .unwrap_err();
    assert_eq!(e.line, 4);
}

#[test]
fn restart_belongs_to_kill_node_and_names_its_values() {
    let s = from_source(&src(
        "name = \"x\"\nfault = \"kill-node\"\nrestart = \"empty-delayed\"\nwhile_holding = true\n",
    ))
    .unwrap();
    assert_eq!((s.restart, s.while_holding), (Restart::EmptyDelayed, true));
    assert_eq!(load("kill-node").unwrap().restart, Restart::Data);
    let e = from_source(&src(
        "name = \"x\"\nfault = \"pause-node\"\nrestart = \"empty\"\n",
    ))
    .unwrap_err();
    assert_eq!((e.line, e.field.as_deref()), (3, Some("restart")), "{e}");
    let e = from_source(&src(
        "name = \"x\"\nfault = \"kill-node\"\nrestart = \"wiped\"\n",
    ))
    .unwrap_err();
    assert_eq!(e.line, 3, "{e}");
}

/// Issue 29: every numeric field has a range; `1e308` leases panicked
/// the nemesis task. Each bad value is named with its line and field.
#[test]
fn every_number_out_of_range_names_line_and_field() {
    let big = "9223372036854775807";
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "pause-holder",
            "duration_leases = 1e308".into(),
            "duration_leases",
        ),
        (
            "pause-holder",
            "duration_leases = nan".into(),
            "duration_leases",
        ),
        (
            "pause-holder",
            "duration_leases = 0.0".into(),
            "duration_leases",
        ),
        (
            "pause-holder",
            "duration_leases = -1.0".into(),
            "duration_leases",
        ),
        (
            "pause-holder",
            format!("interval_ms = {big}"),
            "interval_ms",
        ),
        (
            "pause-holder",
            format!("first_delay_ms = {big}"),
            "first_delay_ms",
        ),
        (
            "pause-holder",
            format!("duration_ms = {big}"),
            "duration_ms",
        ),
        ("latency", format!("latency_ms = {big}"), "latency_ms"),
        (
            "latency",
            format!("latency_ms = 10\njitter_ms = {big}"),
            "jitter_ms",
        ),
        (
            "clock-jump",
            "offset_ms = -9223372036854775808".into(),
            "offset_ms",
        ),
        ("clock-jump", format!("offset_ms = {big}"), "offset_ms"),
        ("clock-strobe", "period_ms = 0".into(), "period_ms"),
        ("clock-strobe", format!("period_ms = {big}"), "period_ms"),
        ("mixed", "faults = []".into(), "faults"),
        (
            "pause-holder",
            "max_injections = 0".into(),
            "max_injections",
        ),
        (
            "pause-holder",
            format!("max_injections = {big}"),
            "max_injections",
        ),
    ];
    for (fault, line, field) in cases {
        let text = format!("name = \"x\"\nfault = \"{fault}\"\n{line}\n");
        let e = from_source(&src(&text)).expect_err(&text);
        let at = text.lines().position(|l| l.starts_with(field)).unwrap() + 1;
        assert_eq!(
            (e.line, e.field.as_deref()),
            (at, Some(field)),
            "{text}: {e}"
        );
        assert!(e.hint.is_some(), "{e}");
    }
    // The bounds themselves are accepted.
    for line in [
        "duration_leases = 1000.0",
        "interval_ms = 86400000",
        "max_injections = 1",
    ] {
        let text = format!("name = \"x\"\nfault = \"pause-holder\"\n{line}\n");
        from_source(&src(&text)).unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn a_length_in_leases_never_overflows() {
    let mut s = load("pause-holder").unwrap();
    s.duration_ms = None;
    s.duration_leases = Some(1e308);
    assert!(s.duration(Duration::from_secs(2)) > Duration::from_secs(1 << 31));
}

#[test]
fn latency_needs_a_latency() {
    let e = from_source(&src("name = \"x\"\nfault = \"latency\"\nlatency_ms = 0\n")).unwrap_err();
    assert_eq!((e.line, e.field.as_deref()), (3, Some("latency_ms")), "{e}");
}
