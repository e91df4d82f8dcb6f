//! `owned-mutex`: a lock that knows its holder.
//!
//! `acquire` needs it free and makes the op's owner (its `owner` field, else
//! the process's default owner) the holder; `release` is legal only by the
//! holder. Not reentrant. Init: `unlocked`/`null`, or the holder's name.

use super::mutex::{lock_input, LockIn, LockOut};
use super::{init_for, Encode, Model, Values};
use crate::history::Op;
use serde_json::Value;

#[derive(Clone, Debug)]
pub struct OwnedMutex {
    owners: Values,
    init: Value,
}

impl OwnedMutex {
    pub fn new(init: Value) -> Result<OwnedMutex, String> {
        Ok(OwnedMutex {
            owners: Values::default(),
            init,
        })
    }
}

/// An owned-mutex op: acquire or release, by an owner (interned id).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OwnedIn {
    pub f: LockIn,
    pub owner: u32,
}

impl Model for OwnedMutex {
    /// The holder, `Values::ABSENT` when free.
    type State = u32;
    type Input = OwnedIn;
    type Output = LockOut;

    fn step(&self, holder: &u32, input: &OwnedIn, _out: &LockOut) -> Option<u32> {
        match input.f {
            LockIn::Acquire => (*holder == Values::ABSENT).then_some(input.owner),
            LockIn::Release => (*holder == input.owner).then_some(Values::ABSENT),
        }
    }

    fn show_state(&self, holder: &u32) -> String {
        if *holder == Values::ABSENT {
            "free".into()
        } else {
            format!("held by {}", self.owners.show(*holder))
        }
    }

    fn show_op(&self, input: &OwnedIn, out: &LockOut) -> String {
        let f = if input.f == LockIn::Acquire {
            "acquire"
        } else {
            "release"
        };
        let unknown = if *out == LockOut::Unknown {
            " (outcome unknown)"
        } else {
            ""
        };
        format!("{f} by {}{unknown}", self.owners.show(input.owner))
    }
}

impl Encode for OwnedMutex {
    fn encode(&mut self, invoke: &Op, ok: Option<&Op>) -> Result<(OwnedIn, LockOut), String> {
        let f = lock_input("owned-mutex", &invoke.f)?;
        let owner = invoke
            .owner
            .clone()
            .or_else(|| ok.and_then(|c| c.owner.clone()))
            .or_else(|| invoke.process.default_owner())
            .ok_or_else(|| "owned-mutex op without an owner".to_string())?;
        let owner = self.owners.intern(&Value::String(owner));
        let out = if ok.is_some() {
            LockOut::Done
        } else {
            LockOut::Unknown
        };
        Ok((OwnedIn { f, owner }, out))
    }

    fn init_state(&mut self, key: Option<&str>) -> Result<u32, String> {
        match init_for(&self.init, key) {
            Value::Null | Value::Bool(false) => Ok(Values::ABSENT),
            Value::String(s) if s == "unlocked" || s == "free" => Ok(Values::ABSENT),
            Value::String(s) => Ok(self.owners.intern(&Value::String(s.clone()))),
            Value::Number(n) => Ok(self.owners.intern(&Value::String(n.to_string()))),
            other => Err(format!(
                "owned-mutex init must be `unlocked` or an owner, got {other}"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{OpType, Process};

    #[test]
    fn only_the_holder_releases() {
        let mut m = OwnedMutex::new(Value::Null).unwrap();
        let s0 = m.init_state(None).unwrap();
        let a = Op::new(0, Process::Num(1), OpType::Invoke, "acquire");
        let r2 = Op::new(
            0,
            Process::Named("2-lease".into()),
            OpType::Invoke,
            "release",
        );
        let r1 = Op::new(0, Process::Num(1), OpType::Invoke, "release");
        let (ia, oa) = m.encode(&a, Some(&a)).unwrap();
        let (i2, o2) = m.encode(&r2, Some(&r2)).unwrap();
        let (i1, o1) = m.encode(&r1, Some(&r1)).unwrap();
        let s1 = m.step(&s0, &ia, &oa).unwrap();
        assert_eq!(m.show_state(&s1), "held by \"1\"");
        assert_eq!(m.step(&s1, &i2, &o2), None);
        assert_eq!(m.step(&s1, &i1, &o1), Some(s0));
        assert_eq!(m.step(&s1, &ia, &oa), None);
    }
}
