//! Unit tests of the wire as the lease source: wire renewals become
//! `renew` ops of the grant's process with the lease their paired event
//! reported (else the ttl), events the wire did not show extend nothing,
//! and an unusable wire hands the source back to the events.

use super::*;

const MS: u64 = 1_000_000;

use crate::runner::renewal_check::tests::exchange as call;

fn op(t: u64, p: &str, kind: OpType, f: &str) -> Op {
    let process = p
        .parse::<i64>()
        .map(Process::Num)
        .unwrap_or_else(|_| Process::Named(p.into()));
    let mut o = Op::new(t * MS, process, kind, f);
    o.owner = Some("tok".into());
    o.key = Some("lockjaw".into());
    o
}

/// Worker 0 (process 0) holds from 2 ms to 500 ms; the adapter reports
/// renewals at 100 ms (lease 900) and 300 ms (which the wire never saw).
fn history() -> Vec<Op> {
    let reported = |t: u64| {
        let mut o = op(t, "0-adapter", OpType::Ok, REPORTED);
        o.lease_ms = Some(900);
        o
    };
    vec![
        op(1, "0", OpType::Invoke, "acquire"),
        op(2, "0", OpType::Ok, "acquire"),
        op(99, "0-adapter", OpType::Invoke, REPORTED),
        reported(102),
        op(299, "0-adapter", OpType::Invoke, REPORTED),
        reported(301),
        op(500, "0", OpType::Invoke, "release"),
        op(501, "0", OpType::Ok, "release"),
    ]
}

fn slot(p: i64) -> Option<usize> {
    Some((p % 2) as usize)
}

#[test]
fn wire_renewals_extend_the_lease_and_lying_events_do_not() {
    let mut wire = Vec::new();
    wire.extend(call(0, "n1", 1, 100, 1, "int:1")); // paired with the event at 99..102
    wire.extend(call(0, "n1", 2, 200, 1, "int:1")); // no event: the ttl
    wire.extend(call(0, "n1", 3, 400, 1, "int:0")); // failed: no renewal
    let s = lease_ops(Ok(&wire), None, &history(), slot, 400);
    assert_eq!(s.source, Source::Wire);
    assert_eq!((s.check.wire, s.check.events), (2, 2));
    assert_eq!(s.check.events_unseen.len(), 1, "{:?}", s.check);
    assert_eq!(s.check.wire_unreported, vec![(0, 200 * MS)]);
    assert_eq!(s.appended(), 2);
    let got: Vec<_> = s
        .ops
        .iter()
        .map(|o| {
            (
                o.process.to_string(),
                o.kind,
                o.f.as_str(),
                o.time / MS,
                o.lease_ms,
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("0-wire".into(), OpType::Invoke, "renew", 100, None),
            ("0-wire".into(), OpType::Ok, "renew", 101, Some(900)),
            ("0-wire".into(), OpType::Invoke, "renew", 200, None),
            ("0-wire".into(), OpType::Ok, "renew", 201, Some(400)),
        ]
    );
    assert!(s
        .ops
        .iter()
        .all(|o| o.owner.as_deref() == Some("tok") && o.key.as_deref() == Some("lockjaw")));
    assert!(s.line("lib 1").contains("disagree"), "{}", s.line("lib 1"));
}

#[test]
fn overlapping_wire_renewals_go_under_processes_of_their_own() {
    let mut wire = Vec::new();
    wire.extend(call(0, "n1", 1, 100, 50, "ok"));
    let mut second = call(0, "n1", 2, 120, 5, "ok");
    for r in &mut second {
        r.conn = 1;
    }
    wire.extend(second);
    let s = lease_ops(Ok(&wire), None, &history(), slot, 400);
    let names: Vec<_> = s.ops.iter().map(|o| o.process.to_string()).collect();
    assert_eq!(names, ["0-wire", "0-wire", "0-wire.1", "0-wire.1"]);
}

#[test]
fn an_unusable_wire_hands_the_source_to_the_events() {
    let mut wire = call(0, "n1", 1, 100, 1, "int:1").to_vec();
    let mut opaque = wire[0].clone();
    opaque.proto = "opaque".into();
    opaque.name = "TLS".into();
    opaque.proxy = "lockjaw-run1-w1-n1".into();
    wire.push(opaque);
    let s = lease_ops(Ok(&wire), None, &history(), slot, 400);
    assert_eq!(s.source, Source::Events);
    assert!(
        s.why
            .as_deref()
            .is_some_and(|w| w.contains("not framed (TLS)")),
        "{:?}",
        s.why
    );
    // Both reported renewals, as renew pairs of their own process.
    let got: Vec<_> = s
        .ops
        .iter()
        .map(|o| (o.process.to_string(), o.kind, o.f.as_str()))
        .collect();
    assert_eq!(got.len(), 4);
    assert!(got
        .iter()
        .all(|(p, _, f)| p == "0-adapter-renew" && *f == "renew"));
    assert_eq!(s.appended(), 2);
    // A storage link that is not framed is no reason.
    let mut storage = call(0, "n1", 1, 100, 1, "int:1").to_vec();
    let mut st = storage[0].clone();
    st.proto = "opaque".into();
    st.proxy = "lockjaw-run1-w0-storage".into();
    storage.push(st);
    assert_eq!(
        lease_ops(Ok(&storage), None, &history(), slot, 400).source,
        Source::Wire
    );
    // Nor can a tap that dropped records, or one that does not read.
    let dropped = lease_ops(
        Ok(&storage),
        Some("the tap dropped 3 record(s)".into()),
        &history(),
        slot,
        400,
    );
    assert_eq!(dropped.source, Source::Events);
    let gone = lease_ops(
        Err("wire.jsonl: cannot read".into()),
        None,
        &history(),
        slot,
        400,
    );
    assert_eq!((gone.source, gone.appended()), (Source::Events, 2));
}

#[test]
fn appended_ops_are_numbered_on_and_read_back() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("history.jsonl");
    let mut w = crate::history::jsonl::JsonlWriter::create(&path, &crate::history::Meta::default())
        .unwrap();
    let mut ops = history();
    for o in &mut ops {
        w.write(o).unwrap();
    }
    w.flush().unwrap();
    drop(w);
    let wire = call(0, "n1", 1, 100, 1, "int:1");
    let mut s = lease_ops(Ok(&wire), None, &ops, slot, 400);
    append(&path, ops.len() as u64, &mut s.ops).unwrap();
    let (_, back) = crate::history::jsonl::read_all(&path).unwrap();
    assert_eq!(back.len(), ops.len() + 2);
    let idx: Vec<u64> = back.iter().map(|o| o.index).collect();
    assert_eq!(idx, (0..back.len() as u64).collect::<Vec<_>>());
    assert_eq!(
        back.last().unwrap().process,
        Process::Named("0-wire".into())
    );
}

/// Found on a real run (tooz 2.0.0 under `kill-holder`): worker 0's
/// process 0 was killed while holding; its successor, process 2, took the
/// lock later and released it with its token. That release, sent just
/// after its own hold ended, fell in the dead holder's hold (never
/// released) and was read as its renewal: a lease proven long after the
/// holder died, and two holders blamed on Redis. The dead holder's hold
/// ends at its successor's first op.
#[test]
fn a_killed_holders_hold_ends_when_its_successor_runs() {
    let mut ops = vec![
        op(1, "0", OpType::Invoke, "acquire"),
        op(2, "0", OpType::Ok, "acquire"),
        // Killed here; its successor (process 2, same slot) starts at 50.
        op(50, "2", OpType::Invoke, "acquire"),
        op(52, "2", OpType::Ok, "acquire"),
        op(100, "2", OpType::Invoke, "release"),
        op(102, "2", OpType::Ok, "release"),
    ];
    ops[3].owner = Some("next".into());
    ops[4].owner = Some("next".into());
    ops[5].owner = Some("next".into());
    // The successor's release script, carrying its token, just after its
    // release was invoked.
    let wire = call(0, "n1", 1, 101, 1, "int:1");
    let s = lease_ops(Ok(&wire), None, &ops, slot, 400);
    assert_eq!((s.check.wire, s.appended()), (0, 0), "{:?}", s.ops);
    let holds = renewal_check::collect(&ops, slot).holds;
    let spans: Vec<(i64, u64, u64)> = holds
        .iter()
        .map(|h| (h.process, h.span.from_ns / MS, h.span.to_ns / MS))
        .collect();
    assert_eq!(spans, [(0, 2, 50), (2, 52, 100)]);
}

#[test]
fn the_librarys_lost_event_ends_the_hold() {
    let mut ops = history();
    ops.truncate(2);
    ops.push(op(
        150,
        "0-adapter",
        OpType::Invoke,
        crate::client::adapter::LOST,
    ));
    ops.push(op(
        150,
        "0-adapter",
        OpType::Ok,
        crate::client::adapter::LOST,
    ));
    let wire = call(0, "n1", 1, 200, 1, "int:1");
    let s = lease_ops(Ok(&wire), None, &ops, slot, 400);
    assert_eq!(
        s.check.wire, 0,
        "a request after the lock was lost renews nothing"
    );
}
