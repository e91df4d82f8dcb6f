//! Unit tests of the renewal cross-check: wire renewals paired with the
//! adapter's events, each side's unpaired ones reported.

use super::*;
use crate::toxiproxy::tap::{Dir, WireRecord};

const MS: u64 = 1_000_000;

/// A request (and its reply `reply` 1 ms later) on worker `slot`'s link
/// to node `n1`, sent at `t` ms.
fn call(slot: usize, seq: u64, t: u64, name: &str, token: bool, reply: &str) -> [WireRecord; 2] {
    let mut c = exchange(slot, "n1", seq, t, 1, reply);
    c[0].name = name.into();
    c[1].name = name.into();
    c[0].token = token;
    c
}

/// A token-carrying `EVALSHA` sent at `t` ms on worker `slot`'s link to
/// `node`, and its reply `reply` `rtt` ms later.
pub(crate) fn exchange(
    slot: usize,
    node: &str,
    seq: u64,
    t: u64,
    rtt: u64,
    reply: &str,
) -> [WireRecord; 2] {
    let req = WireRecord {
        t_ns: t * MS,
        proxy: format!("lockjaw-run1-w{slot}-{node}"),
        conn: 0,
        dir: Dir::Request,
        proto: "redis".into(),
        name: "EVALSHA".into(),
        seq,
        sha1: None,
        words: None,
        keepalive: false,
        reply: None,
        token: true,
    };
    let mut rep = req.clone();
    rep.t_ns += rtt * MS;
    rep.dir = Dir::Reply;
    rep.reply = Some(reply.into());
    rep.token = false;
    [req, rep]
}

fn span(slot: usize, from: u64, to: u64) -> Span {
    Span {
        slot,
        from_ns: from * MS,
        to_ns: to * MS,
    }
}

#[test]
fn wire_renewals_pair_with_events_and_each_side_unpaired_is_reported() {
    let mut wire = Vec::new();
    wire.extend(call(0, 1, 10, "SET", true, "ok")); // the acquire (before the hold)
    wire.extend(call(0, 2, 100, "PEXPIRE", true, "int:1")); // renewal, reported
    wire.extend(call(0, 3, 200, "PEXPIRE", true, "int:1")); // renewal, not reported
    wire.extend(call(0, 4, 300, "PEXPIRE", true, "int:0")); // failed: no renewal
    wire.extend(call(0, 5, 350, "EVALSHA", true, "int:900")); // lockjaw's probe
    wire.extend(call(0, 6, 380, "GET", false, "other")); // not the token
    wire.extend(call(1, 1, 120, "PEXPIRE", true, "int:1")); // worker 1 holds nothing
    let holds = [span(0, 12, 400)];
    let own = [span(0, 349, 352)];
    let events = [span(0, 99, 102), span(0, 299, 302), span(0, 500, 501)];
    let c = cross_check(&wire, &events, &holds, &own);
    // The event at 500 ms began after the hold (its release invoked at
    // 400 ms): the wire's side has no renewal there to compare with.
    assert_eq!((c.wire, c.events), (2, 2));
    assert_eq!(c.wire_unreported, vec![(0, 200 * MS)]);
    assert_eq!(c.events_unseen, vec![span(0, 299, 302)]);
    assert!(c.disagrees());
    // Both sides agreeing: nothing to report.
    let agree = cross_check(&wire, &[span(0, 99, 102), span(0, 199, 202)], &holds, &own);
    assert!(!agree.disagrees(), "{agree:?}");
}

#[test]
fn spans_come_from_the_history() {
    let op = |t: u64, p: Process, kind: OpType, f: &str| {
        let mut o = Op::new(t * MS, p, kind, f);
        o.owner = Some("tok".into());
        o
    };
    let a = || Process::Named("0-adapter".into());
    let l = || Process::Named("0-lease".into());
    let ops = vec![
        op(1, Process::Num(0), OpType::Invoke, "acquire"),
        op(2, Process::Num(0), OpType::Ok, "acquire"),
        op(3, l(), OpType::Invoke, "renew"),
        op(4, l(), OpType::Fail, "renew"),
        op(10, a(), OpType::Invoke, "renew"),
        op(11, a(), OpType::Ok, "renew"),
        op(20, Process::Num(0), OpType::Invoke, "release"),
        op(21, Process::Num(0), OpType::Ok, "release"),
        op(30, Process::Num(2), OpType::Invoke, "acquire"),
        op(31, Process::Num(2), OpType::Ok, "acquire"),
        op(40, Process::Num(1), OpType::Invoke, "acquire"),
    ];
    let [events, holds, own] = spans(&ops, |p| Some((p % 2) as usize));
    assert_eq!(events, vec![span(0, 10, 11)]);
    assert_eq!(own, vec![span(0, 3, 4)]);
    assert_eq!(holds, vec![span(0, 2, 20), span(0, 31, 40)]);
}
