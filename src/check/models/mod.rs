//! Sequential specifications for the linearizability search, one file each.
//!
//! A model is a plain value with a pure `step` function (state, input,
//! output) → next state or `None` when that output is impossible. The
//! search only sees the [`Model`] trait; [`Encode`] translates lockjaw ops
//! into a model's inputs and outputs, interning values to small integers so
//! states are cheap to hash and compare.

pub mod cas_register;
pub mod keyed;
pub mod kv;
pub mod multi_register;
pub mod mutex;
pub mod owned_mutex;
pub mod register;
pub mod set;
mod values;

use crate::history::Op;
use serde_json::Value;
use std::hash::Hash;

pub use values::Values;

/// A sequential specification. The search knows nothing else about models.
pub trait Model: Sync {
    type State: Clone + Eq + Hash + Send + Sync;
    type Input: PartialEq + Send + Sync;
    type Output: PartialEq + Send + Sync;

    /// The state after applying `input` with result `output` to `state`, or
    /// `None` if the object could not have returned `output` from `state`.
    /// An unknown output (a pending or unobserved op) takes effect if it can.
    fn step(
        &self,
        state: &Self::State,
        input: &Self::Input,
        output: &Self::Output,
    ) -> Option<Self::State>;

    /// Whether ops with this input never change the state. Pending ones are
    /// then dropped before the search: they constrain nothing.
    fn read_only(&self, _input: &Self::Input) -> bool {
        false
    }

    /// Which independent part of the state an op reads and writes (the key
    /// of a keyed model checked as one state). Ops on different parts
    /// commute, and whether the rest of a history can be linearized is
    /// decided per part; the search uses this to branch only on ops of the
    /// part that must move next. One part unless a model says otherwise.
    fn component(&self, _input: &Self::Input) -> u32 {
        0
    }

    /// A hash of component `k`'s part of `state`, and whether two states
    /// have equal parts `k`. Only models with several components need
    /// these (with one, the search compares whole states).
    fn part_hash(&self, _state: &Self::State, _k: u32) -> u64 {
        0
    }

    /// See [`Model::part_hash`].
    fn part_eq(&self, a: &Self::State, b: &Self::State, _k: u32) -> bool {
        a == b
    }

    /// Whether ops with this input only grow the state (kv `append`, set
    /// `add`): from state `s` they lead to states that
    /// [`Model::reachable`] accounts for.
    fn grows(&self, _input: &Self::Input) -> bool {
        false
    }

    /// Whether the read-only op (`input`, `output`) could be legal in some
    /// state reached from `state` by growing ops alone (see
    /// [`Model::grows`]). Must answer `true` when unsure: `false` lets the
    /// search drop every configuration in that state.
    fn reachable(
        &self,
        _state: &Self::State,
        _input: &Self::Input,
        _output: &Self::Output,
    ) -> bool {
        true
    }

    /// Whether ops with this input leave a state that does not depend on
    /// the state before them (kv `put`, register `write`).
    fn blind(&self, _input: &Self::Input) -> bool {
        false
    }

    /// Whether the read-only op (`input`, `output`) could be legal in some
    /// state reached by growing ops from the state the blind op `write`
    /// leaves (see [`Model::blind`]). Must answer `true` when unsure.
    fn reachable_after(
        &self,
        _write: &Self::Input,
        _input: &Self::Input,
        _output: &Self::Output,
    ) -> bool {
        true
    }

    /// A state as a person reads it.
    fn show_state(&self, state: &Self::State) -> String;

    /// An operation (input and result) as a person reads it.
    fn show_op(&self, input: &Self::Input, output: &Self::Output) -> String;
}

/// Translating lockjaw ops into a model's inputs and outputs.
pub trait Encode: Model + Sized {
    /// `invoke` and its `ok` completion, or `None` when the op is pending
    /// (ended in `info` or never completed): its output is then unknown.
    fn encode(
        &mut self,
        invoke: &Op,
        ok: Option<&Op>,
    ) -> Result<(Self::Input, Self::Output), String>;

    /// The initial state of one key's object (`None`: ops without a key).
    fn init_state(&mut self, key: Option<&str>) -> Result<Self::State, String>;

    /// Which independent object an op belongs to (P-compositionality): by
    /// default its `key`. `None` for models that must see all ops at once.
    fn partition_key(&self, invoke: &Op) -> Option<String> {
        invoke.key.clone()
    }
}

/// Every model name `--model` accepts.
pub const MODEL_NAMES: &[&str] = &[
    "register",
    "cas-register",
    "kv",
    "multi-register",
    "mutex",
    "owned-mutex",
    "set",
];

/// Runs generic code with a concrete model chosen by name at run time.
pub trait ModelVisitor {
    type Out;
    fn visit<M: Encode>(self, model: M) -> Self::Out;
}

/// Build the model called `name` with initial value `init` and pass it to `v`.
pub fn with_model<V: ModelVisitor>(
    name: &str,
    init: Option<&Value>,
    v: V,
) -> Result<V::Out, String> {
    let init = init.cloned().unwrap_or(Value::Null);
    Ok(match name {
        "register" => v.visit(register::register(init)),
        "cas-register" => v.visit(cas_register::CasRegister::new(init, true)),
        "kv" => v.visit(kv::Kv::new(init)),
        "multi-register" => v.visit(multi_register::MultiRegister::new(init)?),
        "mutex" => v.visit(mutex::Mutex::new(init)?),
        "owned-mutex" => v.visit(owned_mutex::OwnedMutex::new(init)?),
        "set" => v.visit(set::Set::new(init)?),
        other => {
            return Err(format!(
                "unknown model `{other}` (hint: one of {})",
                MODEL_NAMES.join(", ")
            ))
        }
    })
}

/// The model a history's ops suggest, from the `f` of its first client op.
pub fn guess_model(f: &str) -> Option<&'static str> {
    Some(match f {
        "read" | "write" | "cas" => "cas-register",
        "get" | "put" | "append" => "kv",
        "txn" => "multi-register",
        "acquire" | "release" => "mutex",
        "add" => "set",
        _ => return None,
    })
}

/// The init value for one key: a map's entry for that key, else the whole
/// value (every key starts the same).
pub(crate) fn init_for<'a>(init: &'a Value, key: Option<&str>) -> &'a Value {
    match (init, key) {
        (Value::Object(m), Some(k)) => m.get(k).unwrap_or(&Value::Null),
        _ => init,
    }
}

/// The argument of a write-like op: the invoke's value, else the completion's.
pub(crate) fn arg_value<'a>(invoke: &'a Op, ok: Option<&'a Op>) -> &'a Value {
    match ok {
        Some(c) if invoke.value.is_null() => &c.value,
        _ => &invoke.value,
    }
}

fn unsupported(model: &str, f: &str, known: &str) -> String {
    format!("the {model} model has no operation `{f}` (hint: it knows {known}; choose another model with --model)")
}
