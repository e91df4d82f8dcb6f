//! The compact JSON the page's script draws the timeline from: columns of
//! numbers rather than one object per op (start times delta-encoded, times
//! in microseconds), so 100,000 ops stay a few megabytes.

use super::anomaly::Anomaly;
use super::timeline::{Interval, Timeline};
use crate::check::lock::LockFun;
use serde::Serialize;

#[derive(Serialize)]
struct Lane<'a> {
    id: &'a str,
    label: &'a str,
    kind: &'a str,
    procs: &'a [String],
}

/// One column per field; row i of every column is interval i.
#[derive(Serialize, Default)]
struct Ops {
    /// Start, µs, as the difference from the previous row's start.
    s: Vec<u64>,
    /// Duration, µs; -1 = never completed.
    d: Vec<i64>,
    /// Invocation index.
    i: Vec<u64>,
    /// Completion index minus invocation index; 0 = none.
    c: Vec<u64>,
    p: Vec<u32>,
    l: Vec<u32>,
    f: Vec<u32>,
    /// 0 ok, 1 fail, 2 info, 3 pending.
    o: Vec<u8>,
    k: Vec<Option<u32>>,
    fe: Vec<Option<u64>>,
    v: Vec<Option<String>>,
    /// Other details (seq, error, owner, lease) as text.
    x: Vec<Option<String>>,
}

#[derive(Serialize, Default)]
struct Holds {
    s: Vec<u64>,
    /// -1 = never released.
    e: Vec<i64>,
    /// Nominal lease end; -1 = unknown.
    le: Vec<i64>,
    l: Vec<u32>,
    fe: Vec<Option<u64>>,
    ow: Vec<Option<String>>,
    a: Vec<u64>,
    r: Vec<Option<u64>>,
}

#[derive(Serialize)]
struct Band<'a> {
    s: u64,
    e: u64,
    label: &'a str,
    open: bool,
    ops: &'a [u64],
}

#[derive(Serialize)]
struct Anom<'a> {
    side: &'a str,
    check: &'a str,
    kind: Option<&'a str>,
    text: &'a str,
    ops: &'a [u64],
}

#[derive(Serialize)]
struct Data<'a> {
    end: u64,
    lanes: Vec<Lane<'a>>,
    procs: &'a [String],
    fs: &'a [String],
    keys: &'a [String],
    ops: Ops,
    holds: Holds,
    bands: Vec<Band<'a>>,
    anoms: Vec<Anom<'a>>,
}

fn us(ns: u64) -> u64 {
    ns / 1000
}

fn extra(t: &Timeline, iv: &Interval) -> Option<String> {
    let mut parts = vec![];
    if let Some(s) = iv.seq {
        parts.push(format!("seq {s}"));
    }
    if let Some(e) = &iv.error {
        parts.push(e.clone());
    }
    if matches!(
        LockFun::parse(t.f(iv)),
        Some(LockFun::Acquire | LockFun::Renew | LockFun::Release)
    ) {
        if let Some(o) = &iv.owner {
            parts.push(format!("owner {o}"));
        }
        if let Some(l) = iv.lease_ms {
            parts.push(format!("lease {l} ms"));
        }
    }
    if !iv.detail.is_null() {
        parts.push(super::timeline::short_value(&iv.detail).unwrap_or_default());
    }
    (!parts.is_empty()).then(|| parts.join(" · "))
}

fn ops(t: &Timeline) -> Ops {
    let mut o = Ops::default();
    let mut prev = 0;
    for iv in &t.intervals {
        let s = us(iv.start);
        o.s.push(s - prev);
        prev = s;
        o.d.push(iv.end.map_or(-1, |e| (us(e) - s) as i64));
        o.i.push(iv.invoke_index);
        o.c.push(
            iv.complete_index
                .map_or(0, |c| c.saturating_sub(iv.invoke_index).max(1)),
        );
        o.p.push(iv.process);
        o.l.push(iv.lane);
        o.f.push(iv.f);
        o.o.push(iv.outcome as u8);
        o.k.push(iv.key);
        o.fe.push(iv.fence);
        o.v.push(iv.value.clone());
        o.x.push(extra(t, iv));
    }
    o
}

fn holds(t: &Timeline) -> Holds {
    let mut h = Holds::default();
    for x in &t.holds {
        h.s.push(us(x.start));
        h.e.push(x.end.map_or(-1, |e| us(e) as i64));
        h.le.push(x.lease_end.map_or(-1, |e| us(e) as i64));
        h.l.push(x.lane);
        h.fe.push(x.fence);
        h.ow.push(x.owner.clone());
        h.a.push(x.acquire_op);
        h.r.push(x.release_op);
    }
    h
}

/// The timeline and anomalies as JSON, safe to put inside a `<script>`
/// element (every `<` escaped).
pub fn timeline_json(t: &Timeline, anomalies: &[Anomaly]) -> String {
    let data = Data {
        end: us(t.end_ns),
        lanes: t
            .lanes
            .iter()
            .map(|l| Lane {
                id: &l.id,
                label: &l.label,
                kind: l.kind.as_str(),
                procs: &l.processes,
            })
            .collect(),
        procs: &t.procs,
        fs: &t.fs,
        keys: &t.keys,
        ops: ops(t),
        holds: holds(t),
        bands: t
            .bands
            .iter()
            .map(|b| Band {
                s: us(b.start),
                e: us(b.end),
                label: &b.label,
                open: b.open,
                ops: &b.ops,
            })
            .collect(),
        anoms: anomalies
            .iter()
            .map(|a| Anom {
                side: &a.side,
                check: &a.check,
                kind: a.kind.as_deref(),
                text: &a.text,
                ops: &a.ops,
            })
            .collect(),
    };
    let json = serde_json::to_string(&data).expect("plain data serializes");
    json.replace('<', "\\u003c")
}
