//! `multi-register`: Knossos's map of registers updated by transactions.
//!
//! An op has `f: "txn"` and a value that lists micro-ops `[f, key, value]`:
//! `["read", "x", 3]` reads 3 from x, `["read", "x"]` reads x without
//! observing the value (a Knossos read of `nil`), `["write", "y", 2]` writes.
//! A transaction applies atomically, so all keys form one state.
//! Init: a map such as `{"x": 0, "y": 0}`; unlisted keys start absent.

use super::{unsupported, Encode, Model, Values};
use crate::history::Op;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// One micro-op: (is_write, key index, value id). A read's value id is
/// `None` when not observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Micro {
    pub write: bool,
    pub key: u32,
    pub value: Option<u32>,
}

#[derive(Clone, Debug)]
pub struct MultiRegister {
    values: Values,
    keys: HashMap<String, u32>,
    key_names: Vec<String>,
    init: Value,
}

impl MultiRegister {
    pub fn new(init: Value) -> Result<MultiRegister, String> {
        if !matches!(init, Value::Null | Value::Object(_)) {
            return Err(format!(
                "multi-register init must be a map such as {{\"x\": 0}}, got {init}"
            ));
        }
        Ok(MultiRegister {
            values: Values::default(),
            keys: HashMap::new(),
            key_names: Vec::new(),
            init,
        })
    }

    fn key(&mut self, k: &Value) -> u32 {
        let name = match k {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if let Some(&i) = self.keys.get(&name) {
            return i;
        }
        let i = self.key_names.len() as u32;
        self.keys.insert(name.clone(), i);
        self.key_names.push(name);
        i
    }

    fn micro(&mut self, m: &Value, known: bool) -> Result<Micro, String> {
        let parts = m.as_array().filter(|p| (2..=3).contains(&p.len()));
        let Some(parts) = parts else {
            return Err(format!(
                "a txn micro-op is [f, key] or [f, key, value], got {m}"
            ));
        };
        let write = match parts[0].as_str() {
            Some("read" | "r") => false,
            Some("write" | "w") => true,
            _ => {
                return Err(unsupported(
                    "multi-register",
                    &parts[0].to_string(),
                    "txn of read, write",
                ))
            }
        };
        let key = self.key(&parts[1]);
        let value = match parts.get(2) {
            Some(v) if write || known => Some(self.values.intern(v)),
            None if write => return Err(format!("a write micro-op needs a value: {m}")),
            _ => None,
        };
        Ok(Micro { write, key, value })
    }
}

impl Model for MultiRegister {
    /// One value id per key.
    type State = Arc<[u32]>;
    type Input = Box<[Micro]>;
    /// Whether the txn completed (else pending: reads unobserved).
    type Output = bool;

    fn step(&self, s: &Arc<[u32]>, txn: &Box<[Micro]>, _done: &bool) -> Option<Arc<[u32]>> {
        let mut next: Option<Vec<u32>> = None;
        for m in txn.iter() {
            let cur = next.as_deref().unwrap_or(s);
            match (m.write, m.value) {
                (true, Some(v)) => next.get_or_insert_with(|| s.to_vec())[m.key as usize] = v,
                (false, Some(v)) if cur[m.key as usize] != v => return None,
                _ => {}
            }
        }
        Some(next.map_or_else(|| s.clone(), Arc::from))
    }

    fn read_only(&self, txn: &Box<[Micro]>) -> bool {
        txn.iter().all(|m| !m.write)
    }

    fn show_state(&self, s: &Arc<[u32]>) -> String {
        let mut parts: Vec<String> = s
            .iter()
            .enumerate()
            .map(|(k, v)| format!("{} {}", self.key_names[k], self.values.show(*v)))
            .collect();
        parts.sort();
        format!("{{{}}}", parts.join(", "))
    }

    fn show_op(&self, txn: &Box<[Micro]>, done: &bool) -> String {
        let parts: Vec<String> = txn
            .iter()
            .map(|m| {
                let v = m.value.map_or("?".into(), |v| self.values.show(v));
                let f = if m.write { "write" } else { "read" };
                format!("{f} {} {v}", self.key_names[m.key as usize])
            })
            .collect();
        let unknown = if *done { "" } else { " (outcome unknown)" };
        format!("txn [{}]{unknown}", parts.join(", "))
    }
}

impl Encode for MultiRegister {
    fn encode(&mut self, invoke: &Op, ok: Option<&Op>) -> Result<(Box<[Micro]>, bool), String> {
        if invoke.f != "txn" {
            return Err(unsupported("multi-register", &invoke.f, "txn"));
        }
        let v = match ok {
            Some(c) if !c.value.is_null() => &c.value,
            _ => &invoke.value,
        };
        let Value::Array(mops) = v else {
            return Err(format!("a txn value is a list of micro-ops, got {v}"));
        };
        let known = ok.is_some();
        let txn = mops
            .iter()
            .map(|m| self.micro(m, known))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((txn.into(), known))
    }

    fn init_state(&mut self, _key: Option<&str>) -> Result<Arc<[u32]>, String> {
        let init = self.init.clone();
        if let Value::Object(m) = &init {
            for k in m.keys() {
                self.key(&Value::String(k.clone()));
            }
        }
        let names = self.key_names.clone();
        Ok(names
            .iter()
            .map(|k| match &init {
                Value::Object(m) => self.values.intern(m.get(k).unwrap_or(&Value::Null)),
                _ => Values::ABSENT,
            })
            .collect())
    }

    fn partition_key(&self, _invoke: &Op) -> Option<String> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{OpType, Process};

    #[test]
    fn txn_reads_and_writes() {
        let mut m = MultiRegister::new(serde_json::json!({"x": 0, "y": 0})).unwrap();
        let mut w = Op::new(0, Process::Num(0), OpType::Invoke, "txn");
        w.value = serde_json::json!([["write", "y", 2]]);
        let mut r = Op::new(0, Process::Num(1), OpType::Ok, "txn");
        r.value = serde_json::json!([["read", "x", 0], ["read", "y", 2]]);
        let mut unobserved = r.clone();
        unobserved.value = serde_json::json!([["read", "x"], ["read", "y", 0]]);
        let (wi, wo) = m.encode(&w, Some(&w)).unwrap();
        let (ri, ro) = m.encode(&r, Some(&r)).unwrap();
        let (ui, uo) = m.encode(&unobserved, Some(&unobserved)).unwrap();
        let s0 = m.init_state(None).unwrap();
        assert!(m.step(&s0, &ri, &ro).is_none());
        assert!(m.step(&s0, &ui, &uo).is_some());
        let s1 = m.step(&s0, &wi, &wo).unwrap();
        assert!(m.step(&s1, &ri, &ro).is_some());
        assert_eq!(m.show_state(&s1), "{x 0, y 2}");
    }
}
