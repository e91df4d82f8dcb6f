//! `register`: a read/write register (no compare-and-set).
//!
//! The same sequential object as `cas-register` with `cas` refused, so a
//! history that uses `cas` under this model is reported as bad input rather
//! than checked against the wrong specification.

use super::cas_register::CasRegister;
use serde_json::Value;

/// A read/write register starting at `init` (`null` = absent).
pub fn register(init: Value) -> CasRegister {
    CasRegister::new(init, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::models::{Encode, Model};
    use crate::history::{Op, OpType, Process};

    #[test]
    fn write_then_read() {
        let mut m = register(Value::Null);
        let s0 = m.init_state(None).unwrap();
        let mut w = Op::new(0, Process::Num(0), OpType::Invoke, "write");
        w.value = Value::from("a");
        let (i, o) = m.encode(&w, Some(&w)).unwrap();
        let s1 = m.step(&s0, &i, &o).unwrap();
        assert_eq!(m.show_state(&s0), "absent");
        assert_eq!(m.show_state(&s1), "\"a\"");
    }
}
