//! `cas-register`: a register with `read`, `write` and compare-and-set.
//!
//! Ops: `read` (completion value: what was read; `null` = absent;
//! `unobserved` matches anything), `write` (value: what to write), `cas`
//! (value `[old, new]`; ok = swapped; a failed cas did not take effect and is
//! dropped before the search). The plain `register` model is this one
//! without `cas`.

use super::{arg_value, init_for, unsupported, Encode, Model, Values};
use crate::history::Op;
use serde_json::Value;

/// What a register op asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegIn {
    Read,
    Write(u32),
    Cas(u32, u32),
}

/// What a register op returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegOut {
    /// A read of this value.
    Read(u32),
    /// Completed (write, cas).
    Done,
    /// Unknown: a pending op, or a read whose value was not observed.
    Unknown,
}

/// A single register (per key when ops carry keys).
#[derive(Clone, Debug)]
pub struct CasRegister {
    pub(crate) values: Values,
    init: Value,
    allow_cas: bool,
}

impl CasRegister {
    pub fn new(init: Value, allow_cas: bool) -> CasRegister {
        CasRegister {
            values: Values::default(),
            init,
            allow_cas,
        }
    }

    fn name(&self) -> &'static str {
        if self.allow_cas {
            "cas-register"
        } else {
            "register"
        }
    }
}

impl Model for CasRegister {
    type State = u32;
    type Input = RegIn;
    type Output = RegOut;

    fn step(&self, s: &u32, input: &RegIn, out: &RegOut) -> Option<u32> {
        match (input, out) {
            (RegIn::Read, RegOut::Read(v)) => (v == s).then_some(*s),
            (RegIn::Read, _) => Some(*s),
            (RegIn::Write(v), _) => Some(*v),
            // Done: it swapped, so it saw `old`. Unknown: if it took
            // effect it swapped; not taking effect is the search's other
            // option (a pending op need not be linearized).
            (RegIn::Cas(old, new), _) => (old == s).then_some(*new),
        }
    }

    fn read_only(&self, input: &RegIn) -> bool {
        *input == RegIn::Read
    }

    fn show_state(&self, s: &u32) -> String {
        self.values.show(*s)
    }

    fn show_op(&self, input: &RegIn, out: &RegOut) -> String {
        let v = |id: &u32| self.values.show(*id);
        match (input, out) {
            (RegIn::Read, RegOut::Read(x)) => format!("read → {}", v(x)),
            (RegIn::Read, _) => "read → (not observed)".into(),
            (RegIn::Write(x), RegOut::Unknown) => format!("write {} (outcome unknown)", v(x)),
            (RegIn::Write(x), _) => format!("write {}", v(x)),
            (RegIn::Cas(a, b), RegOut::Unknown) => {
                format!("cas {} → {} (outcome unknown)", v(a), v(b))
            }
            (RegIn::Cas(a, b), _) => format!("cas {} → {}", v(a), v(b)),
        }
    }
}

impl Encode for CasRegister {
    fn encode(&mut self, invoke: &Op, ok: Option<&Op>) -> Result<(RegIn, RegOut), String> {
        let unknown_or = |o: RegOut| if ok.is_some() { o } else { RegOut::Unknown };
        match invoke.f.as_str() {
            "read" | "get" => {
                let out = match ok {
                    Some(c) if c.unobserved => RegOut::Unknown,
                    Some(c) => RegOut::Read(self.values.intern(&c.value)),
                    None => RegOut::Unknown,
                };
                Ok((RegIn::Read, out))
            }
            "write" | "put" => {
                let v = self.values.intern(arg_value(invoke, ok));
                Ok((RegIn::Write(v), unknown_or(RegOut::Done)))
            }
            "cas" if self.allow_cas => match arg_value(invoke, ok) {
                Value::Array(pair) if pair.len() == 2 => {
                    let old = self.values.intern(&pair[0]);
                    let new = self.values.intern(&pair[1]);
                    Ok((RegIn::Cas(old, new), unknown_or(RegOut::Done)))
                }
                other => Err(format!("cas value must be [old, new], got {other}")),
            },
            f => Err(unsupported(
                self.name(),
                f,
                if self.allow_cas {
                    "read, write, cas"
                } else {
                    "read, write"
                },
            )),
        }
    }

    fn init_state(&mut self, key: Option<&str>) -> Result<u32, String> {
        let init = init_for(&self.init, key).clone();
        Ok(self.values.intern(&init))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{OpType, Process};

    fn op(kind: OpType, f: &str, v: Value) -> Op {
        let mut o = Op::new(0, Process::Num(0), kind, f);
        o.value = v;
        o
    }

    #[test]
    fn cas_register_steps() {
        let mut m = CasRegister::new(Value::from(0), true);
        let s0 = m.init_state(None).unwrap();
        let inv = op(OpType::Invoke, "cas", serde_json::json!([0, 5]));
        let (i, o) = m.encode(&inv, Some(&inv)).unwrap();
        let s1 = m.step(&s0, &i, &o).unwrap();
        assert_eq!(m.show_state(&s1), "5");
        assert_eq!(m.step(&s0, &i, &RegOut::Unknown), Some(s1));
        assert_eq!(m.step(&s1, &i, &o), None);
        let r = op(OpType::Invoke, "read", Value::Null);
        let (i, o) = m
            .encode(&r, Some(&op(OpType::Ok, "read", Value::from(0))))
            .unwrap();
        assert_eq!(m.step(&s0, &i, &o), Some(s0));
        assert_eq!(m.step(&s1, &i, &o), None);
        assert!(m
            .encode(&op(OpType::Invoke, "acquire", Value::Null), None)
            .is_err());
        let mut plain = CasRegister::new(Value::Null, false);
        assert!(plain.encode(&inv, Some(&inv)).is_err());
    }
}
