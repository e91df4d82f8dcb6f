//! `set`: a grow-only set with `add` and `read`.
//!
//! `add` (value: the element) inserts; `read` returns every element (the
//! completion's value is an array; order does not matter). Init: an array,
//! default empty.

use super::{arg_value, init_for, unsupported, Encode, Model, Values};
use crate::history::Op;
use serde_json::Value;
use std::sync::Arc;

/// Sorted, de-duplicated element ids.
pub type Elems = Arc<[u32]>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SetIn {
    Add(u32),
    Read,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SetOut {
    Read(Elems),
    Done,
    Unknown,
}

#[derive(Clone, Debug)]
pub struct Set {
    values: Values,
    init: Value,
}

impl Set {
    pub fn new(init: Value) -> Result<Set, String> {
        Ok(Set {
            values: Values::default(),
            init,
        })
    }

    fn elems(&mut self, v: &Value, what: &str) -> Result<Elems, String> {
        let Value::Array(items) = v else {
            return Err(format!("set {what} must be an array, got {v}"));
        };
        let mut ids: Vec<u32> = items.iter().map(|x| self.values.intern(x)).collect();
        ids.sort_unstable();
        ids.dedup();
        Ok(ids.into())
    }
}

impl Model for Set {
    type State = Elems;
    type Input = SetIn;
    type Output = SetOut;

    fn step(&self, s: &Elems, input: &SetIn, out: &SetOut) -> Option<Elems> {
        match (input, out) {
            (SetIn::Read, SetOut::Read(r)) => (r == s).then(|| s.clone()),
            (SetIn::Read, _) => Some(s.clone()),
            (SetIn::Add(x), _) => match s.binary_search(x) {
                Ok(_) => Some(s.clone()),
                Err(at) => {
                    let mut v = Vec::with_capacity(s.len() + 1);
                    v.extend_from_slice(&s[..at]);
                    v.push(*x);
                    v.extend_from_slice(&s[at..]);
                    Some(v.into())
                }
            },
        }
    }

    fn read_only(&self, input: &SetIn) -> bool {
        *input == SetIn::Read
    }

    fn grows(&self, input: &SetIn) -> bool {
        matches!(input, SetIn::Add(_))
    }

    /// Adds only insert: a read can still see `r` only if `r` holds every
    /// element the set has now.
    fn reachable(&self, s: &Elems, _input: &SetIn, out: &SetOut) -> bool {
        match out {
            SetOut::Read(r) => s.iter().all(|x| r.binary_search(x).is_ok()),
            _ => true,
        }
    }

    fn show_state(&self, s: &Elems) -> String {
        let mut items: Vec<String> = s.iter().map(|&i| self.values.get(i).to_string()).collect();
        items.sort();
        format!("#{{{}}}", items.join(" "))
    }

    fn show_op(&self, input: &SetIn, out: &SetOut) -> String {
        match (input, out) {
            (SetIn::Read, SetOut::Read(r)) => format!("read → {}", self.show_state(r)),
            (SetIn::Read, _) => "read → (not observed)".into(),
            (SetIn::Add(x), SetOut::Unknown) => {
                format!("add {} (outcome unknown)", self.values.get(*x))
            }
            (SetIn::Add(x), _) => format!("add {}", self.values.get(*x)),
        }
    }
}

impl Encode for Set {
    fn encode(&mut self, invoke: &Op, ok: Option<&Op>) -> Result<(SetIn, SetOut), String> {
        match invoke.f.as_str() {
            "add" => {
                let x = self.values.intern(arg_value(invoke, ok));
                let out = if ok.is_some() {
                    SetOut::Done
                } else {
                    SetOut::Unknown
                };
                Ok((SetIn::Add(x), out))
            }
            "read" => {
                let out = match ok {
                    Some(c) if !c.unobserved && !c.value.is_null() => {
                        SetOut::Read(self.elems(&c.value, "read")?)
                    }
                    _ => SetOut::Unknown,
                };
                Ok((SetIn::Read, out))
            }
            f => Err(unsupported("set", f, "add, read")),
        }
    }

    fn init_state(&mut self, key: Option<&str>) -> Result<Elems, String> {
        match init_for(&self.init, key).clone() {
            Value::Null => Ok(Arc::from(Vec::new())),
            v => self.elems(&v, "init"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_see_every_add() {
        let mut m = Set::new(Value::Null).unwrap();
        let s0 = m.init_state(None).unwrap();
        let r = m.elems(&serde_json::json!([2, 1]), "read").unwrap();
        let one = m.values.intern(&Value::from(1));
        let two = m.values.intern(&Value::from(2));
        let s1 = m.step(&s0, &SetIn::Add(two), &SetOut::Done).unwrap();
        let s2 = m.step(&s1, &SetIn::Add(one), &SetOut::Done).unwrap();
        assert!(m
            .step(&s1, &SetIn::Read, &SetOut::Read(r.clone()))
            .is_none());
        assert!(m.step(&s2, &SetIn::Read, &SetOut::Read(r)).is_some());
        assert_eq!(m.show_state(&s2), "#{1 2}");
    }
}
