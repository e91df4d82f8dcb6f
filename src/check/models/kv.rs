//! `kv`: a string register per key with `get`, `put` and `append`.
//!
//! `get` returns the whole value (`null` = absent key), `put` sets it,
//! `append` concatenates (appending to an absent key starts from ""). Keys
//! are independent objects, so histories are checked per key unless asked to
//! check one state over all keys (see `keyed`). A string carries a
//! polynomial hash that concatenation updates in O(1), so states hash in
//! O(1); equality still compares the text.

use super::{arg_value, init_for, unsupported, Encode, Model};
use crate::history::Op;
use serde_json::Value;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

const BASE: u64 = 0x0000_0100_0000_01b3;

/// An immutable string with its rolling hash.
#[derive(Clone, Debug)]
pub struct KvStr {
    hash: u64,
    /// BASE^len, to append in O(1).
    pow: u64,
    s: Arc<str>,
}

impl KvStr {
    pub fn new(s: &str) -> KvStr {
        let mut hash = 0u64;
        let mut pow = 1u64;
        for b in s.bytes() {
            hash = hash.wrapping_mul(BASE).wrapping_add(b as u64 + 1);
            pow = pow.wrapping_mul(BASE);
        }
        KvStr {
            hash,
            pow,
            s: Arc::from(s),
        }
    }

    fn concat(&self, tail: &KvStr) -> KvStr {
        let mut s = String::with_capacity(self.s.len() + tail.s.len());
        s.push_str(&self.s);
        s.push_str(&tail.s);
        KvStr {
            hash: self.hash.wrapping_mul(tail.pow).wrapping_add(tail.hash),
            pow: self.pow.wrapping_mul(tail.pow),
            s: Arc::from(s),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.s
    }
}

impl PartialEq for KvStr {
    fn eq(&self, o: &KvStr) -> bool {
        self.hash == o.hash && (Arc::ptr_eq(&self.s, &o.s) || self.s == o.s)
    }
}
impl Eq for KvStr {}

impl Hash for KvStr {
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write_u64(self.hash);
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum KvIn {
    Get,
    Put(KvStr),
    Append(KvStr),
}

#[derive(Clone, Debug, PartialEq)]
pub enum KvOut {
    /// A get of this value (`None`: absent).
    Get(Option<KvStr>),
    Done,
    /// Pending, or a get whose value was not observed.
    Unknown,
}

/// One key's string register.
#[derive(Clone, Debug)]
pub struct Kv {
    init: Value,
}

impl Kv {
    pub fn new(init: Value) -> Kv {
        Kv { init }
    }
}

fn show(s: &Option<KvStr>) -> String {
    match s {
        None => "absent".into(),
        Some(x) => Value::String(x.s.to_string()).to_string(),
    }
}

impl Model for Kv {
    type State = Option<KvStr>;
    type Input = KvIn;
    type Output = KvOut;

    fn step(&self, s: &Option<KvStr>, input: &KvIn, out: &KvOut) -> Option<Option<KvStr>> {
        match (input, out) {
            (KvIn::Get, KvOut::Get(v)) => (v == s).then(|| s.clone()),
            (KvIn::Get, _) => Some(s.clone()),
            (KvIn::Put(v), _) => Some(Some(v.clone())),
            (KvIn::Append(v), _) => Some(Some(match s {
                None => v.clone(),
                Some(cur) => cur.concat(v),
            })),
        }
    }

    fn read_only(&self, input: &KvIn) -> bool {
        matches!(input, KvIn::Get)
    }

    fn grows(&self, input: &KvIn) -> bool {
        matches!(input, KvIn::Append(_))
    }

    /// Appends only extend the value: a get can still see `v` only if the
    /// value now is a prefix of `v` (an absent key may become anything).
    fn reachable(&self, s: &Option<KvStr>, _input: &KvIn, out: &KvOut) -> bool {
        match (s, out) {
            (None, _) | (_, KvOut::Done | KvOut::Unknown) => true,
            (Some(_), KvOut::Get(None)) => false,
            (Some(cur), KvOut::Get(Some(v))) => v.as_str().starts_with(cur.as_str()),
        }
    }

    fn blind(&self, input: &KvIn) -> bool {
        matches!(input, KvIn::Put(_))
    }

    fn reachable_after(&self, write: &KvIn, input: &KvIn, out: &KvOut) -> bool {
        match write {
            KvIn::Put(v) => self.reachable(&Some(v.clone()), input, out),
            _ => true,
        }
    }

    fn show_state(&self, s: &Option<KvStr>) -> String {
        show(s)
    }

    fn show_op(&self, input: &KvIn, out: &KvOut) -> String {
        let unknown = if matches!(out, KvOut::Unknown) {
            " (outcome unknown)"
        } else {
            ""
        };
        match (input, out) {
            (KvIn::Get, KvOut::Get(v)) => format!("get → {}", show(v)),
            (KvIn::Get, _) => "get → (not observed)".into(),
            (KvIn::Put(v), _) => format!("put {}{unknown}", show(&Some(v.clone()))),
            (KvIn::Append(v), _) => format!("append {}{unknown}", show(&Some(v.clone()))),
        }
    }
}

fn string_arg(v: &Value, what: &str) -> Result<KvStr, String> {
    match v {
        Value::String(s) => Ok(KvStr::new(s)),
        other => Err(format!("kv {what} needs a string value, got {other}")),
    }
}

impl Encode for Kv {
    fn encode(&mut self, invoke: &Op, ok: Option<&Op>) -> Result<(KvIn, KvOut), String> {
        let done = if ok.is_some() {
            KvOut::Done
        } else {
            KvOut::Unknown
        };
        match invoke.f.as_str() {
            "get" | "read" => {
                let out = match ok {
                    None => KvOut::Unknown,
                    Some(c) if c.unobserved => KvOut::Unknown,
                    Some(c) if c.value.is_null() => KvOut::Get(None),
                    Some(c) => KvOut::Get(Some(string_arg(&c.value, "get")?)),
                };
                Ok((KvIn::Get, out))
            }
            "put" | "write" => Ok((KvIn::Put(string_arg(arg_value(invoke, ok), "put")?), done)),
            "append" => Ok((
                KvIn::Append(string_arg(arg_value(invoke, ok), "append")?),
                done,
            )),
            f => Err(unsupported("kv", f, "get, put, append")),
        }
    }

    fn init_state(&mut self, key: Option<&str>) -> Result<Option<KvStr>, String> {
        match init_for(&self.init, key) {
            Value::Null => Ok(None),
            Value::String(s) => Ok(Some(KvStr::new(s))),
            other => Err(format!(
                "kv init must be a string, null or a map of them, got {other}"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_hash_matches_fresh_hash() {
        let a = KvStr::new("x 0 0 y");
        let b = KvStr::new("x 1 2 y");
        let ab = a.concat(&b);
        assert_eq!(ab, KvStr::new("x 0 0 yx 1 2 y"));
        assert_ne!(ab, b.concat(&a));
        let m = Kv::new(Value::from(""));
        let s = m
            .step(
                &Some(KvStr::new("")),
                &KvIn::Append(a.clone()),
                &KvOut::Done,
            )
            .unwrap();
        assert_eq!(s, Some(a.clone()));
        assert!(m.step(&s, &KvIn::Get, &KvOut::Get(Some(b))).is_none());
        assert!(m.step(&s, &KvIn::Get, &KvOut::Get(Some(a))).is_some());
    }
}
