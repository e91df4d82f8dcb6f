//! The advice from hand-written histories with known round trips,
//! critical sections and renewals, checked to the millisecond.

use super::*;
use crate::report::stalls::{Stall, StallFile};
use serde_json::json;

fn timeline(lines: &[String]) -> Timeline {
    use std::io::Write;
    let mut f = tempfile::NamedTempFile::new().unwrap();
    for l in lines {
        writeln!(f, "{l}").unwrap();
    }
    Timeline::read(f.path(), None).unwrap()
}

/// One op line: time in ms, process, type, f, and extra fields.
fn op(i: u64, ms: u64, p: Value, kind: &str, f: &str, extra: Value) -> String {
    let mut o =
        json!({"index": i, "time": ms * 1_000_000, "process": p, "type": kind, "f": f, "key": "l"});
    if let (Some(o), Some(x)) = (o.as_object_mut(), extra.as_object()) {
        o.extend(x.clone());
    }
    if f == "write" {
        o["key"] = json!("c");
    }
    o.to_string()
}

const META: &str = r#"{"type":"meta","checkers":["lock"],"concurrency":2,"acquire_sets_ttl":true,"drift":0.001,"epsilon_ms":2}"#;

/// Two grants of 1000 ms: acquires of 10 and 30 ms, critical sections of
/// 200 ms, renewals of 4, 7 and 4 ms every 60-120 ms, and one renewal of
/// worker 0 after a gap an injected pause overlaps.
fn renewing() -> Vec<String> {
    let (a, b) = (json!({"owner": "a"}), json!({"owner": "b"}));
    let grant = |o: &str| json!({"owner": o, "lease_ms": 1000, "fence": 1});
    let l0 = json!("0-lease");
    let l1 = json!("1-lease");
    vec![
        META.to_string(),
        op(0, 0, json!(0), "invoke", "acquire", json!({})),
        op(1, 10, json!(0), "ok", "acquire", grant("a")),
        // A refused acquire: its 70 ms are no round trip of a grant.
        op(2, 20, json!(1), "invoke", "acquire", json!({})),
        op(3, 90, json!(1), "fail", "acquire", json!({"error": "held"})),
        op(4, 60, l0.clone(), "invoke", "renew", a.clone()),
        op(5, 64, l0.clone(), "ok", "renew", a.clone()),
        op(6, 150, json!(0), "invoke", "write", json!({"value": 1})),
        op(7, 160, json!(0), "ok", "write", json!({"value": 1})),
        op(8, 180, l0.clone(), "invoke", "renew", a.clone()),
        op(9, 187, l0.clone(), "ok", "renew", a.clone()),
        op(10, 210, json!(0), "invoke", "release", a.clone()),
        op(11, 212, json!(0), "ok", "release", a.clone()),
        op(12, 300, json!(1), "invoke", "acquire", json!({})),
        op(13, 330, json!(1), "ok", "acquire", grant("b")),
        op(14, 400, l1.clone(), "invoke", "renew", b.clone()),
        op(15, 404, l1, "ok", "renew", b.clone()),
        op(16, 530, json!(1), "invoke", "release", b.clone()),
        op(17, 531, json!(1), "ok", "release", b),
        // 720 ms after its last renewal, across an injected pause of worker 0.
        op(18, 900, l0.clone(), "invoke", "renew", a.clone()),
        op(19, 903, l0, "ok", "renew", a),
    ]
}

fn pause_of_worker_0() -> Value {
    json!({"injections": [{"fault": "pause-holder", "start_ns": 300_000_000u64,
        "stop_ns": 800_000_000u64, "target": {"slot": 0}}]})
}

#[test]
fn renewing_run_every_part_and_the_bound() {
    let t = timeline(&renewing());
    let a = advise(
        &t,
        &pause_of_worker_0(),
        &Pause::Given(50.0),
        Some((90.0, 120.0, 2)),
    )
    .unwrap();
    assert_eq!(a.lease_ms, 1000.0);
    assert!(a.renews);
    assert_eq!(a.acquire.ms, Some(30.0), "p99 of 10 and 30 ms");
    assert_eq!(a.critical_section.ms, Some(200.0));
    assert_eq!(a.renew_rtt.ms, Some(7.0));
    assert_eq!(
        a.renew_interval.ms,
        Some(120.0),
        "gaps 60, 120 (worker 0) and 100 (worker 1); the 720 ms gap overlaps the injection"
    );
    assert_eq!(
        a.cs_term_ms,
        Some(120.0),
        "min(critical section, renew interval)"
    );
    assert_eq!(a.pause.ms, Some(50.0));
    assert_eq!((a.drift, a.epsilon_ms), (0.001, 2.0));
    // (30 + 120 + 120 + 7 + 50) / 0.999 + 2
    assert!((a.bound_ms - 329.327).abs() < 0.001, "{}", a.bound_ms);
    assert!(a.met && a.missing.is_empty());
    assert_eq!(a.failover, Some((90.0, 120.0, 2)));
    // Without nemesis.json the 720 ms gap counts.
    let a = advise(&t, &Value::Null, &Pause::Given(50.0), None).unwrap();
    assert_eq!(a.renew_interval.ms, Some(720.0));
    assert_eq!(a.cs_term_ms, Some(200.0));
    // (30 + 200 + 720 + 7 + 50) / 0.999 + 2 = 1010.008 > 1000: not met.
    assert!((a.bound_ms - 1010.008).abs() < 0.001, "{}", a.bound_ms);
    assert!(!a.met);
}

/// No renewals; one hold without a release ends at its last protected op.
#[test]
fn plain_run_with_measured_stalls_and_the_box() {
    let grant = |o: &str| json!({"owner": o, "lease_ms": 500, "fence": 1});
    let lines = vec![
        META.to_string(),
        op(0, 0, json!(0), "invoke", "acquire", json!({})),
        op(1, 10, json!(0), "ok", "acquire", grant("a")),
        op(2, 210, json!(0), "invoke", "release", json!({"owner": "a"})),
        op(3, 211, json!(0), "ok", "release", json!({"owner": "a"})),
        op(4, 300, json!(1), "invoke", "acquire", json!({})),
        op(5, 330, json!(1), "ok", "acquire", grant("b")),
        op(6, 400, json!(1), "invoke", "write", json!({"value": 1})),
        op(7, 530, json!(1), "info", "write", json!({"value": 1})),
        // Worker 0 holds for 1000 ms, paused by an injected fault inside.
        op(8, 590, json!(0), "invoke", "acquire", json!({})),
        op(9, 600, json!(0), "ok", "acquire", grant("c")),
        op(
            10,
            1600,
            json!(0),
            "invoke",
            "release",
            json!({"owner": "c"}),
        ),
        op(11, 1601, json!(0), "ok", "release", json!({"owner": "c"})),
    ];
    let t = timeline(&lines);
    let nemesis = json!({"injections": [{"fault": "pause-holder", "start_ns": 700_000_000u64,
        "stop_ns": 1_500_000_000u64, "target": {"slot": 0}}]});
    let a = advise(&t, &Value::Null, &Pause::Given(0.0), None).unwrap();
    assert_eq!(
        a.critical_section.ms,
        Some(1000.0),
        "without nemesis.json it counts"
    );
    let stalls = StallFile {
        interval_ms: 5.0,
        threshold_ms: 10.0,
        stalls: vec![Stall {
            slot: 1,
            start_ns: 600_000_000,
            end_ns: 640_000_000,
            late_ms: 35.0,
        }],
    };
    let pause = Pause::Measured(stalls::budget(&stalls, &Value::Null));
    let a = advise(&t, &nemesis, &pause, None).unwrap();
    assert!(!a.renews);
    assert_eq!(
        (a.acquire.ms, a.critical_section.ms),
        (Some(30.0), Some(200.0))
    );
    assert_eq!(a.pause.ms, Some(35.0));
    // (30 + 200 + 35) / 0.999 + 2
    assert!((a.bound_ms - 267.265).abs() < 0.001, "{}", a.bound_ms);
    assert!(a.met);
    let md = markdown(&a);
    for want in [
        "## Lease advice",
        "**500 ms**",
        "| acquire round trip | 30.0 ms |",
        "| critical section | 200 ms |",
        "| pause budget | 35.0 ms | longest of 1 worker stall(s)",
        "(30.0 + 200 + 35.0) / (1 − 0.001) + 2.0 = 267 ms",
        "lease of 500 ms met the recommended bound of 267 ms",
        "No lease length is safe without fencing",
    ] {
        assert!(md.contains(want), "{want:?} not in\n{md}");
    }
    // Not measured: the bound lacks it and says so.
    let a = advise(&t, &nemesis, &Pause::NotMeasured(None), None).unwrap();
    assert_eq!(a.missing, ["pause budget"]);
    assert!(text("t", &a).contains("not measured: the run directory has no stalls.json"));
    assert!(text("t", &a).contains("Not measured, so counted as 0: pause budget"));
}

#[test]
fn grants_without_a_lease_get_no_advice() {
    let lines = vec![
        META.to_string(),
        op(0, 0, json!(0), "invoke", "acquire", json!({})),
        op(
            1,
            10,
            json!(0),
            "ok",
            "acquire",
            json!({"owner": "a", "lease_ms": 0}),
        ),
    ];
    assert_eq!(
        advise(&timeline(&lines), &Value::Null, &Pause::Given(1.0), None),
        None
    );
}
