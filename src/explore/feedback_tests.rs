//! Tests of the feedback on in-memory wire records: a window in which the
//! struck worker sent what the learn runs showed, and windows in which it
//! sent something new.

use super::*;
use crate::explore::learn::RequestKind;
use serde_json::json;

const MS: u64 = 1_000_000;

/// A request of worker `slot` on its link to `redis1`, connection `conn`.
fn req(slot: usize, conn: u64, t_ms: u64, name: &str, sha1: Option<&str>) -> WireRecord {
    WireRecord {
        t_ns: t_ms * MS,
        proxy: format!("lockjaw-abc-w{slot}-redis1"),
        conn,
        dir: Dir::Request,
        proto: "redis".into(),
        name: name.into(),
        seq: t_ms,
        sha1: sha1.map(str::to_string),
        words: None,
        keepalive: false,
        reply: None,
        token: false,
    }
}

const RELEASE: &str = "fe3d37ab00000000000000000000000000000000";

/// One worker's cycle, `n` times from `t0` (ms): SET (acquire), EVALSHA
/// (release), 100 ms apart.
fn cycles(slot: usize, conn: u64, t0: u64, n: u64) -> Vec<WireRecord> {
    (0..n)
        .flat_map(|i| {
            let t = t0 + i * 200;
            [
                req(slot, conn, t, "SET", None),
                req(slot, conn, t + 100, "EVALSHA", Some(RELEASE)),
            ]
        })
        .collect()
}

/// The phase: the first 100 ms of each 200 ms acquire, then release.
fn phase_at(_: usize, t: u64) -> Phase {
    if (t / MS) % 200 < 100 {
        Phase::Acquire
    } else {
        Phase::Release
    }
}

fn kind(command: &str, sha1: Option<&str>, phase: Phase) -> RequestKind {
    RequestKind {
        proto: "redis".into(),
        link: LinkKind::Lock,
        command: command.into(),
        sha1: sha1.map(str::to_string),
        words: None,
        phases: [phase].into(),
        count: 10,
        errors: 0,
    }
}

/// What learn runs of [`cycles`] show.
fn learned() -> Learned {
    Learned {
        kinds: vec![
            kind("SET", None, Phase::Acquire),
            kind("EVALSHA", Some(RELEASE), Phase::Release),
            kind("CLIENT", None, Phase::Idle),
        ],
        bigrams: Some(bigrams(&[cycles(0, 0, 0, 3), reconnect(1, 0)].concat())),
        ..Learned::default()
    }
}

/// A connection that opens with `CLIENT`, then a cycle, at `t0` (ms).
fn reconnect(conn: u64, t0: u64) -> Vec<WireRecord> {
    let mut v = vec![req(0, conn, t0, "CLIENT", None)];
    v.extend(cycles(0, conn, t0 + 2, 1));
    v
}

fn strike(point: &str, slot: Option<usize>, from_ms: u64, to_ms: u64) -> Struck {
    Struck {
        point: point.into(),
        slot,
        from_ns: from_ms * MS,
        to_ns: to_ms * MS,
    }
}

#[test]
fn transitions_are_taken_per_connection_with_its_start() {
    let b = bigrams(&cycles(0, 0, 0, 2));
    let want: BTreeSet<(String, String)> = [
        (START, "SET"),
        ("SET", "EVALSHA fe3d37ab"),
        ("EVALSHA fe3d37ab", "SET"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(b, want);
}

#[test]
fn a_window_in_which_the_worker_sent_what_it_learned_changed_nothing() {
    let mut wire = cycles(0, 0, 0, 10);
    // Worker 1 does something new, but the fault struck worker 0.
    wire.push(req(1, 0, 450, "DEL", None));
    // Worker 0 restarted: a new connection set up as learned, though now
    // in its acquire (the set-up was learned between cycles only).
    wire.extend(reconnect(1, 800));
    let base = Baseline::of(&learned());
    let c = changes(&wire, &[strike("p", Some(0), 400, 1200)], &phase_at, &base);
    assert_eq!(c.get("p"), Some(&vec![]));
}

#[test]
fn a_second_release_a_new_request_and_a_new_phase_are_changes() {
    // Worker 0: a cycle, then its release sent twice (a retry), then a
    // request the learn runs never saw, then a SET in the release phase.
    let mut wire = cycles(0, 0, 0, 1);
    wire.push(req(0, 0, 300, "EVALSHA", Some(RELEASE)));
    wire.push(req(0, 0, 320, "EVALSHA", Some(RELEASE)));
    wire.push(req(0, 0, 350, "PEXPIRE", None));
    wire.push(req(0, 0, 360, "SET", None));
    let base = Baseline::of(&learned());
    let c = changes(&wire, &[strike("p", Some(0), 250, 400)], &phase_at, &base);
    assert_eq!(
        c["p"],
        [
            "EVALSHA fe3d37ab twice in a row",
            "new request PEXPIRE in release",
            "EVALSHA fe3d37ab then PEXPIRE",
            "SET in release, never learned there",
        ]
    );
    // Outside the window the same records change nothing.
    let c = changes(&wire, &[strike("p", Some(0), 0, 250)], &phase_at, &base);
    assert_eq!(c["p"], Vec::<String>::new());
}

#[test]
fn a_reconnect_is_a_change_only_when_it_starts_otherwise_than_learned() {
    // A new connection that starts with SET, as learned: no change.
    let mut wire = cycles(0, 0, 0, 1);
    wire.extend(cycles(0, 1, 400, 1));
    let base = Baseline::of(&learned());
    let c = changes(&wire, &[strike("p", None, 300, 700)], &phase_at, &base);
    assert_eq!(c["p"], Vec::<String>::new());
    // One that goes straight to the release: a change.
    wire.push(req(1, 0, 500, "EVALSHA", Some(RELEASE)));
    let c = changes(&wire, &[strike("p", None, 300, 700)], &phase_at, &base);
    assert_eq!(c["p"], ["EVALSHA fe3d37ab first on a new connection"]);
}

#[test]
fn a_state_learned_before_transitions_judges_kinds_and_phases_only() {
    let mut l = learned();
    l.bigrams = None;
    let mut wire = cycles(0, 0, 0, 1);
    wire.push(req(0, 0, 300, "EVALSHA", Some(RELEASE)));
    let c = changes(
        &wire,
        &[strike("p", Some(0), 0, 400)],
        &phase_at,
        &Baseline::of(&l),
    );
    assert_eq!(c["p"], Vec::<String>::new());
}

#[test]
fn landed_injections_are_read_from_nemesis_json_each_with_its_point_and_worker() {
    let n = json!({
        "name": "explore-run-3",
        "injections": [
            {"id": 1, "fault": "pause-holder", "start_ns": 100, "started_ns": 150,
             "stop_ns": 900, "target": {"mixed": true, "point": "pause", "slot": 2},
             "detail": {}},
            {"id": 2, "fault": "strike-command", "start_ns": 1000, "stop_ns": 1100,
             "target": {"mixed": true, "point": "strike"},
             "detail": {"landed_inside": false}},
            {"id": 3, "fault": "partition", "start_ns": 2000,
             "target": {"mixed": true, "point": "cut"}, "detail": {}},
            {"id": 4, "fault": "x", "start_ns": 3000, "stop_ns": 3100,
             "target": {"mixed": true, "point": "failed"}, "error": "boom"},
            {"id": 5, "fault": "x", "start_ns": 3000, "stop_ns": 3100,
             "target": {"mixed": true, "point": "short"},
             "detail": {"cut_short": true}},
            {"id": 6, "fault": "strike-command", "start_ns": 4000, "stop_ns": 4100,
             "target": {"mixed": true, "point": "strike"},
             "detail": {"fired": true, "landed_inside": true, "slot": 1}}
        ]
    });
    assert_eq!(
        struck(&n, 50),
        [
            Struck {
                point: "pause".into(),
                slot: Some(2),
                from_ns: 100,
                to_ns: 950
            },
            Struck {
                point: "cut".into(),
                slot: None,
                from_ns: 2000,
                to_ns: u64::MAX
            },
            // A strike names the worker it struck when it stops.
            Struck {
                point: "strike".into(),
                slot: Some(1),
                from_ns: 4000,
                to_ns: 4150
            },
        ]
    );
    // A run of one point, recorded without `point`: the file's name.
    let one = json!({"name": "pause-holder-1l", "injections": [
        {"id": 1, "start_ns": 5, "stop_ns": 6, "target": {"slot": 0}, "detail": {}}
    ]});
    assert_eq!(struck(&one, 0)[0].point, "pause-holder-1l");
}

#[test]
fn only_landed_outcomes_get_what_changed() {
    let mk = |p: &str, landed: u64| PointOutcome {
        point: p.into(),
        injections: 1,
        landed,
        hits: vec![],
        dir: "d".into(),
        missed: Default::default(),
        unmeasured: Default::default(),
        changed: None,
    };
    let mut o = vec![mk("a", 1), mk("b", 0), mk("c", 1)];
    let c: BTreeMap<String, Vec<String>> = [
        ("a".to_string(), vec!["SET twice in a row".to_string()]),
        ("b".to_string(), vec![]),
    ]
    .into();
    annotate(&mut o, &c);
    assert_eq!(o[0].changed, Some(vec!["SET twice in a row".to_string()]));
    assert_eq!(o[1].changed, None, "b did not land");
    assert_eq!(o[2].changed, None, "c was not read");
}

#[test]
fn an_op_a_crash_left_open_ends_where_its_workers_next_op_starts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.jsonl");
    let op = |p: u64, kind: &str, f: &str, ms: u64| {
        json!({"process": p, "type": kind, "f": f, "time": ms * MS, "key": "lock"}).to_string()
    };
    // Worker 0 (process 0) is granted, then crashes inside its release;
    // restarted as process 2 (two workers: still worker 0), it acquires.
    let lines = [
        op(0, "invoke", "acquire", 100),
        op(0, "ok", "acquire", 110),
        op(0, "invoke", "release", 200),
        op(2, "invoke", "acquire", 400),
        op(2, "fail", "acquire", 410),
        op(1, "invoke", "acquire", 500),
    ];
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let mut t = Timeline::read(&path, Some(2)).unwrap();
    let before = Phases::of(&t);
    assert_eq!(
        before.at(0, 450 * MS),
        Phase::Release,
        "open to the run's end"
    );
    close_open_ops(&mut t);
    let after = Phases::of(&t);
    assert_eq!(after.at(0, 300 * MS), Phase::Release);
    assert_eq!(after.at(0, 405 * MS), Phase::Acquire);
    assert_eq!(after.at(0, 450 * MS), Phase::Idle);
    // Worker 1's acquire, open at the run's end, stays open.
    assert_eq!(after.at(1, 500 * MS), Phase::Acquire);
}
