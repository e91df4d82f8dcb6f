//! The brute-force reference: each model's sequential specification written
//! out again here (independently of lockjaw's models), and a search over
//! every order of the ops that respects real time. An op may go next when
//! every completed op that returned strictly before its call has gone
//! already; failed ops did not happen; crashed ops (`info` or no
//! completion) go anywhere after their call or nowhere, with an unknown
//! result. The only pruning is a set of (ops done, state) pairs already
//! found to lead nowhere, which cannot change the answer: what can follow
//! depends on nothing else.

use super::gen::{End, GOp};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// The models under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `register`, init 0: read, write.
    Register,
    /// `cas-register` as Porcupine's etcd logs use it: init absent, read
    /// (`null`: absent; some reads unobserved), write, cas.
    Etcd,
    /// `kv`, init absent: get, put, append.
    Kv,
    /// `set`: add, read.
    Set,
    /// `mutex` (Knossos's): acquire, release.
    Mutex,
    /// `owned-mutex`: release only by the holder.
    OwnedMutex,
}

impl Kind {
    pub const ALL: [Kind; 6] = [
        Kind::Register,
        Kind::Etcd,
        Kind::Kv,
        Kind::Set,
        Kind::Mutex,
        Kind::OwnedMutex,
    ];

    pub fn model(self) -> &'static str {
        match self {
            Kind::Register => "register",
            Kind::Etcd => "cas-register",
            Kind::Kv => "kv",
            Kind::Set => "set",
            Kind::Mutex => "mutex",
            Kind::OwnedMutex => "owned-mutex",
        }
    }

    pub fn init(self) -> Value {
        match self {
            Kind::Register => json!(0),
            _ => Value::Null,
        }
    }

    /// One key's initial state.
    pub fn initial(self) -> St {
        match self {
            Kind::Register => St::Int(0),
            Kind::Set => St::Set(BTreeSet::new()),
            Kind::Mutex | Kind::OwnedMutex => St::Free,
            Kind::Etcd | Kind::Kv => St::Absent,
        }
    }
}

/// One key's state.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum St {
    Absent,
    Int(i64),
    Str(String),
    Set(BTreeSet<i64>),
    Free,
    /// A mutex is held (by this owner; 0 for the plain mutex).
    Held(i64),
}

impl St {
    /// A read's result as the history writes it.
    pub fn as_value(&self) -> Value {
        match self {
            St::Absent => Value::Null,
            St::Int(i) => json!(i),
            St::Str(s) => json!(s),
            St::Set(s) => json!(s.iter().collect::<Vec<_>>()),
            St::Free | St::Held(_) => Value::Null,
        }
    }
}

/// The state after `op` takes effect in `st`, or `None` if it cannot.
/// `out`: what a read returned, `None` when unknown (crashed, unobserved).
pub fn step(st: &St, op: &GOp, out: Option<&Value>) -> Option<St> {
    let read = |st: &St| match out {
        None => Some(st.clone()),
        Some(v) => (st.as_value() == *v).then(|| st.clone()),
    };
    match (op.f, st) {
        ("read" | "get", _) => read(st),
        ("write", _) => Some(St::Int(op.arg.as_i64()?)),
        ("cas", St::Int(cur)) => {
            (op.arg[0].as_i64()? == *cur).then(|| St::Int(op.arg[1].as_i64().unwrap()))
        }
        ("cas", _) => None,
        ("put", _) => Some(St::Str(op.arg.as_str()?.into())),
        ("append", St::Str(cur)) => Some(St::Str(format!("{cur}{}", op.arg.as_str()?))),
        ("append", _) => Some(St::Str(op.arg.as_str()?.into())),
        ("add", St::Set(s)) => {
            let mut s = s.clone();
            s.insert(op.arg.as_i64()?);
            Some(St::Set(s))
        }
        ("acquire", St::Free) => Some(St::Held(op.owner)),
        ("release", St::Held(h)) if *h == op.owner => Some(St::Free),
        _ => None,
    }
}

/// Whether the history `ops` of model `kind` is linearizable.
pub fn linearizable(kind: Kind, ops: &[GOp]) -> bool {
    let ops: Vec<&GOp> = ops
        .iter()
        .filter(|o| !matches!(o.end, End::Fail(_)))
        .collect();
    assert!(ops.len() < 64, "too many ops for the reference");
    let required: u64 = ops
        .iter()
        .enumerate()
        .filter(|(_, o)| !o.is_pending())
        .fold(0, |m, (i, _)| m | 1 << i);
    let mut dead = HashSet::new();
    search(kind, &ops, required, 0, &BTreeMap::new(), &mut dead)
}

type State = BTreeMap<String, St>;

fn search(
    kind: Kind,
    ops: &[&GOp],
    required: u64,
    done: u64,
    st: &State,
    dead: &mut HashSet<(u64, State)>,
) -> bool {
    if done & required == required {
        return true;
    }
    if dead.contains(&(done, st.clone())) {
        return false;
    }
    for (i, op) in ops.iter().enumerate() {
        if done & (1 << i) != 0 {
            continue;
        }
        let blocked = ops
            .iter()
            .enumerate()
            .any(|(j, o)| done & (1 << j) == 0 && matches!(o.end, End::Ok(r) if r < op.call));
        if blocked {
            continue;
        }
        let key = op.key.clone().unwrap_or_default();
        let cur = st.get(&key).cloned().unwrap_or_else(|| kind.initial());
        let out = match op.end {
            End::Ok(_) if !op.unobserved => Some(&op.out),
            _ => None,
        };
        if let Some(next) = step(&cur, op, out) {
            let mut st2 = st.clone();
            st2.insert(key, next);
            if search(kind, ops, required, done | 1 << i, &st2, dead) {
                return true;
            }
        }
    }
    dead.insert((done, st.clone()));
    false
}
