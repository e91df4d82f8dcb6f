//! Unit tests of the search on a cas-register.

use super::*;
use crate::check::models::cas_register::{CasRegister, RegIn, RegOut};

fn op(call: u64, ret: u64, input: RegIn, output: RegOut) -> SearchOp<RegIn, RegOut> {
    SearchOp {
        call,
        ret,
        input,
        output,
    }
}

fn run(ops: &[SearchOp<RegIn, RegOut>]) -> Searched {
    let m = CasRegister::new(serde_json::Value::Null, true);
    search(&m, 0, ops, &Control::new(None, usize::MAX))
}

#[test]
fn concurrent_write_explains_read() {
    // write 1 overlaps read → 1: linearizable.
    let r = run(&[
        op(0, 10, RegIn::Write(1), RegOut::Done),
        op(5, 6, RegIn::Read, RegOut::Read(1)),
    ]);
    assert_eq!(r.outcome, Outcome::Linearizable);
    assert_eq!(r.best, vec![0, 1]);
}

#[test]
fn stale_read_is_illegal() {
    // write 1 completes, then a read → 0 (absent) starts: illegal.
    let r = run(&[
        op(0, 1, RegIn::Write(1), RegOut::Done),
        op(2, 3, RegIn::Read, RegOut::Read(0)),
    ]);
    assert_eq!(r.outcome, Outcome::Illegal);
    assert_eq!(r.best, vec![0]);
}

#[test]
fn pending_write_may_or_may_not_happen() {
    let w = op(0, PENDING, RegIn::Write(1), RegOut::Unknown);
    let seen = run(&[op(2, 3, RegIn::Read, RegOut::Read(1)), w.clone()]);
    assert_eq!(seen.outcome, Outcome::Linearizable);
    let unseen = run(&[op(2, 3, RegIn::Read, RegOut::Read(0)), w]);
    assert_eq!(unseen.outcome, Outcome::Linearizable);
}

#[test]
fn memory_cap_gives_up() {
    let mut ops: Vec<_> = (0..40u64)
        .map(|i| op(0, 100 + i, RegIn::Write(i as u32 % 3), RegOut::Done))
        .collect();
    ops.push(op(1000, 1001, RegIn::Read, RegOut::Read(7)));
    let m = CasRegister::new(serde_json::Value::Null, true);
    let r = search(&m, 0, &ops, &Control::new(None, 1 << 16));
    assert_eq!(r.outcome, Outcome::MemoryCap);
}
