//! `mutex`: Knossos's lock, locked or not, with no owner.
//!
//! `acquire` needs it unlocked and locks it; `release` needs it locked and
//! unlocks it. A failed acquire or release did not happen and is dropped.
//! Init: `unlocked` (default, also `null`/`false`) or `locked` (`true`).

use super::{init_for, unsupported, Encode, Model};
use crate::history::Op;
use serde_json::Value;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockIn {
    Acquire,
    Release,
}

/// A lock op's result: completed, or unknown (pending).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockOut {
    Done,
    Unknown,
}

#[derive(Clone, Debug)]
pub struct Mutex {
    init: Value,
}

/// Parse a lock's initial state: locked or not.
pub(crate) fn parse_locked(v: &Value) -> Result<bool, String> {
    match v {
        Value::Null | Value::Bool(false) => Ok(false),
        Value::Bool(true) => Ok(true),
        Value::String(s) if s == "unlocked" || s == "free" => Ok(false),
        Value::String(s) if s == "locked" => Ok(true),
        other => Err(format!(
            "mutex init must be `unlocked` or `locked`, got {other}"
        )),
    }
}

impl Mutex {
    pub fn new(init: Value) -> Result<Mutex, String> {
        if !init.is_object() {
            parse_locked(&init)?;
        }
        Ok(Mutex { init })
    }
}

pub(crate) fn lock_input(model: &str, f: &str) -> Result<LockIn, String> {
    match f {
        "acquire" | "lock" => Ok(LockIn::Acquire),
        "release" | "unlock" => Ok(LockIn::Release),
        f => Err(unsupported(model, f, "acquire, release")),
    }
}

impl Model for Mutex {
    type State = bool;
    type Input = LockIn;
    type Output = LockOut;

    fn step(&self, locked: &bool, input: &LockIn, _out: &LockOut) -> Option<bool> {
        match input {
            LockIn::Acquire => (!locked).then_some(true),
            LockIn::Release => locked.then_some(false),
        }
    }

    fn show_state(&self, locked: &bool) -> String {
        if *locked { "locked" } else { "unlocked" }.into()
    }

    fn show_op(&self, input: &LockIn, out: &LockOut) -> String {
        let f = if *input == LockIn::Acquire {
            "acquire"
        } else {
            "release"
        };
        match out {
            LockOut::Done => f.into(),
            LockOut::Unknown => format!("{f} (outcome unknown)"),
        }
    }
}

impl Encode for Mutex {
    fn encode(&mut self, invoke: &Op, ok: Option<&Op>) -> Result<(LockIn, LockOut), String> {
        let out = if ok.is_some() {
            LockOut::Done
        } else {
            LockOut::Unknown
        };
        Ok((lock_input("mutex", &invoke.f)?, out))
    }

    fn init_state(&mut self, key: Option<&str>) -> Result<bool, String> {
        parse_locked(init_for(&self.init, key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acquire_needs_unlocked() {
        let m = Mutex::new(Value::from("unlocked")).unwrap();
        assert_eq!(m.step(&false, &LockIn::Acquire, &LockOut::Done), Some(true));
        assert_eq!(m.step(&true, &LockIn::Acquire, &LockOut::Done), None);
        assert_eq!(m.step(&false, &LockIn::Release, &LockOut::Done), None);
        assert!(Mutex::new(Value::from(3)).is_err());
    }
}
