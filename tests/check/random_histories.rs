//! Randomized tests: the search against a brute-force checker on small
//! histories. Linearizable ones come from a sequential execution of a
//! cas-register whose ops get random overlapping intervals around their
//! linearization points (some crash: `info`, pending forever); corrupted
//! ones change a read's value or a cas's expected value. Also kv histories
//! checked per key and as one state must agree, and kv histories with
//! puts, appends and crashed writes over a few keys get the brute-force
//! verdict both ways (this exercises the search's look-ahead for growing
//! values and blind writes, and its per-key failure memo and backjumping
//! when all keys are one state). `differential/` adds the same comparison
//! for six models with up to six concurrent processes (see there).

use lockjaw::check::linear::{check_ops, LinOptions};
use lockjaw::check::Validity;
use lockjaw::history::{Meta, Op, OpType, Process};
use proptest::prelude::*;
use serde_json::{json, Value};

/// One generated operation, before it becomes history lines.
#[derive(Clone, Debug)]
struct GenOp {
    process: i64,
    f: &'static str,
    arg: Value,
    result: Value,
    call: u64,
    ret: Option<u64>,
    key: Option<String>,
}

/// A sequential cas-register execution: (f, arg, result) per step.
fn execute(steps: &[(u8, u8, u8)]) -> Vec<(&'static str, Value, Value)> {
    let mut reg = 0i64;
    steps
        .iter()
        .map(|&(kind, a, b)| match kind % 3 {
            0 => ("read", Value::Null, json!(reg)),
            1 => {
                reg = a as i64 % 3;
                ("write", json!(reg), json!(reg))
            }
            _ => {
                let (old, new) = (a as i64 % 3, b as i64 % 3);
                if reg == old {
                    reg = new;
                    ("cas", json!([old, new]), json!([old, new]))
                } else {
                    // A cas that would fail: record it as a read instead.
                    ("read", Value::Null, json!(reg))
                }
            }
        })
        .collect()
}

/// Give step i a linearization point 10*i and an interval around it.
fn intervals(exec: Vec<(&'static str, Value, Value)>, spread: &[(u8, u8, bool)]) -> Vec<GenOp> {
    exec.into_iter()
        .zip(spread)
        .enumerate()
        .map(|(i, ((f, arg, result), &(before, after, crash)))| {
            let point = 10 * i as u64 + 100;
            GenOp {
                process: i as i64,
                f,
                arg,
                result,
                call: point - (before as u64 % 40),
                ret: (!crash || f == "read").then_some(point + after as u64 % 40),
                key: None,
            }
        })
        .collect()
}

fn to_history(ops: &[GenOp]) -> Vec<Op> {
    let mut events: Vec<(u64, Op)> = Vec::new();
    for g in ops {
        let mut inv = Op::new(g.call, Process::Num(g.process), OpType::Invoke, g.f);
        inv.value = g.arg.clone();
        inv.key = g.key.clone();
        let mut done = inv.clone();
        match g.ret {
            Some(t) => {
                done.kind = OpType::Ok;
                done.time = t;
                done.value = g.result.clone();
            }
            None => {
                done.kind = OpType::Info;
                done.time = g.call + 1000;
            }
        }
        events.push((g.call, inv));
        events.push((done.time, done));
    }
    events.sort_by_key(|(t, o)| (*t, o.kind != OpType::Invoke));
    events.into_iter().map(|(_, o)| o).collect()
}

/// Brute force: is there an order of all completed ops (plus any subset of
/// crashed ones) that respects real time and the register's semantics?
fn brute(ops: &[GenOp]) -> bool {
    fn go(ops: &[GenOp], done: &mut Vec<bool>, reg: i64) -> bool {
        if ops
            .iter()
            .zip(done.iter())
            .all(|(o, d)| *d || o.ret.is_none())
        {
            return true;
        }
        for i in 0..ops.len() {
            if done[i] {
                continue;
            }
            // o may go next unless an unfinished completed op returned before it was called.
            let blocked = (0..ops.len())
                .any(|j| !done[j] && j != i && ops[j].ret.is_some_and(|r| r < ops[i].call));
            if blocked {
                continue;
            }
            let o = &ops[i];
            let next = match o.f {
                "read" if o.ret.is_none() => Some(reg),
                "read" => (o.result == json!(reg)).then_some(reg),
                "write" => o.arg.as_i64(),
                _ => {
                    let old = o.arg[0].as_i64().unwrap();
                    (old == reg).then(|| o.arg[1].as_i64().unwrap())
                }
            };
            if let Some(r) = next {
                done[i] = true;
                if go(ops, done, r) {
                    return true;
                }
                done[i] = false;
            }
        }
        false
    }
    go(ops, &mut vec![false; ops.len()], 0)
}

fn check(ops: &[GenOp], model: &str, init: Value, one_state: bool) -> Validity {
    let meta = Meta {
        model: Some(model.into()),
        init: Some(init),
        ..Meta::default()
    };
    let opts = LinOptions {
        one_state,
        ..LinOptions::default()
    };
    check_ops("generated", Some(meta), to_history(ops), &opts)
        .unwrap()
        .valid
}

/// Steps of the sequential execution and each op's interval spread.
type Steps = (Vec<(u8, u8, u8)>, Vec<(u8, u8, bool)>);

fn gen_steps() -> impl Strategy<Value = Steps> {
    (1usize..8).prop_flat_map(|n| {
        (
            proptest::collection::vec(any::<(u8, u8, u8)>(), n),
            proptest::collection::vec(
                (any::<u8>(), any::<u8>(), proptest::bool::weighted(0.15)),
                n,
            ),
        )
    })
}

/// Brute force for kv (every key starts at ""): is there an order of all
/// completed ops (plus any subset of crashed ones) that respects real time
/// and get/put/append semantics?
fn brute_kv(ops: &[GenOp]) -> bool {
    use std::collections::HashMap;
    fn go(ops: &[GenOp], done: &mut Vec<bool>, st: &mut HashMap<String, String>) -> bool {
        if ops
            .iter()
            .zip(done.iter())
            .all(|(o, d)| *d || o.ret.is_none())
        {
            return true;
        }
        for i in 0..ops.len() {
            let blocked = (0..ops.len())
                .any(|j| !done[j] && j != i && ops[j].ret.is_some_and(|r| r < ops[i].call));
            if done[i] || blocked {
                continue;
            }
            let o = &ops[i];
            let key = o.key.clone().unwrap();
            let cur = st.get(&key).cloned().unwrap_or_default();
            let next = match o.f {
                "get" if o.result.as_str() != Some(cur.as_str()) => continue,
                "get" => cur.clone(),
                "put" => o.arg.as_str().unwrap().to_string(),
                _ => format!("{cur}{}", o.arg.as_str().unwrap()),
            };
            done[i] = true;
            st.insert(key.clone(), next);
            if go(ops, done, st) {
                return true;
            }
            st.insert(key, cur);
            done[i] = false;
        }
        false
    }
    go(ops, &mut vec![false; ops.len()], &mut HashMap::new())
}

/// A sequential kv execution over up to three keys, with intervals of up
/// to `width` either side of each op's point (10 apart); writes may crash (pending forever). `victim` picks a
/// get to corrupt: it returns what another get of that key returned, or
/// its value with a character appended.
fn kv_history(
    steps: &[(u8, u8, u8)],
    spread: &[(u8, u8, bool)],
    keys: &[u8],
    victim: Option<(usize, bool)>,
    width: u64,
) -> Vec<GenOp> {
    let mut vals = vec![String::new(); 3];
    let mut ops = Vec::new();
    for (i, (&(kind, a, _), &(before, after, crash))) in steps.iter().zip(spread).enumerate() {
        let k = keys[i % keys.len()] as usize;
        let point = 10 * i as u64 + 100;
        let (f, arg, result) = match kind % 5 {
            0 | 1 => ("get", Value::Null, json!(vals[k])),
            2 => {
                vals[k] = format!("p{}", a % 2);
                ("put", json!(vals[k]), json!(vals[k]))
            }
            _ => {
                let tok = format!("{}.", a % 3);
                vals[k].push_str(&tok);
                ("append", json!(tok), json!(tok))
            }
        };
        ops.push(GenOp {
            process: i as i64,
            f,
            arg,
            result,
            call: point - before as u64 % width,
            ret: (!crash || f == "get").then_some(point + after as u64 % width),
            key: Some(k.to_string()),
        });
    }
    if let Some((v, swap)) = victim {
        let gets: Vec<usize> = (0..ops.len()).filter(|&i| ops[i].f == "get").collect();
        if !gets.is_empty() {
            let g = gets[v % gets.len()];
            let same: Vec<usize> = gets
                .iter()
                .copied()
                .filter(|&j| j != g && ops[j].key == ops[g].key)
                .collect();
            ops[g].result = if swap && !same.is_empty() {
                ops[same[v % same.len()]].result.clone()
            } else {
                json!(format!("{}0.", ops[g].result.as_str().unwrap()))
            };
        }
    }
    ops
}

fn gen_kv_steps() -> impl Strategy<Value = Steps> {
    (1usize..10).prop_flat_map(|n| {
        (
            proptest::collection::vec(any::<(u8, u8, u8)>(), n),
            proptest::collection::vec(
                (any::<u8>(), any::<u8>(), proptest::bool::weighted(0.15)),
                n,
            ),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn kv_one_state_agrees_with_per_key_on_longer_histories(
        (steps, spread) in (8usize..24).prop_flat_map(|n| (
            proptest::collection::vec(any::<(u8, u8, u8)>(), n),
            proptest::collection::vec((any::<u8>(), any::<u8>(), proptest::bool::weighted(0.1)), n),
        )),
        keys in proptest::collection::vec(0u8..3, 2..5),
        victim in proptest::option::weighted(0.7, (any::<usize>(), any::<bool>())),
    ) {
        // Longer and more concurrent than brute force affords: the one-state
        // search (failure memo per key, backjumping across keys) must agree
        // with the per-key search, which the test below checks by brute force.
        let ops = kv_history(&steps, &spread, &keys, victim, 80);
        let per_key = check(&ops, "kv", json!(""), false);
        prop_assert_eq!(check(&ops, "kv", json!(""), true), per_key);
    }

    #[test]
    fn kv_with_puts_and_crashes_agree_with_brute_force(
        (steps, spread) in gen_kv_steps(),
        keys in proptest::collection::vec(0u8..3, 1..4),
        victim in proptest::option::weighted(0.6, (any::<usize>(), any::<bool>())),
    ) {
        let ops = kv_history(&steps, &spread, &keys, victim, 40);
        let expected = if brute_kv(&ops) { Validity::True } else { Validity::False };
        prop_assert_eq!(check(&ops, "kv", json!(""), false), expected);
        prop_assert_eq!(check(&ops, "kv", json!(""), true), expected);
    }

    #[test]
    fn generated_histories_are_linearizable((steps, spread) in gen_steps()) {
        let ops = intervals(execute(&steps), &spread);
        prop_assert!(brute(&ops));
        prop_assert_eq!(check(&ops, "cas-register", json!(0), false), Validity::True);
    }

    #[test]
    fn corrupted_histories_agree_with_brute_force(
        (steps, spread) in gen_steps(),
        victim in any::<prop::sample::Index>(),
        bump in 1i64..3,
    ) {
        let mut ops = intervals(execute(&steps), &spread);
        let i = victim.index(ops.len());
        match ops[i].f {
            "read" => ops[i].result = json!((ops[i].result.as_i64().unwrap() + bump) % 3),
            "cas" => {
                let old = (ops[i].arg[0].as_i64().unwrap() + bump) % 3;
                ops[i].arg[0] = json!(old);
                ops[i].result = ops[i].arg.clone();
            }
            _ => ops[i].arg = json!((ops[i].arg.as_i64().unwrap() + bump) % 3),
        }
        let expected = if brute(&ops) { Validity::True } else { Validity::False };
        prop_assert_eq!(check(&ops, "cas-register", json!(0), false), expected);
    }

    #[test]
    fn kv_per_key_and_one_state_agree(
        (steps, spread) in gen_steps(),
        keys in proptest::collection::vec(0u8..3, 8),
        victim in any::<prop::sample::Index>(),
    ) {
        // Append-only kv per key: an append of "i" and gets of the value.
        let mut vals = vec![String::new(); 3];
        let mut ops = Vec::new();
        for (i, (&(kind, _, _), &(before, after, _))) in steps.iter().zip(&spread).enumerate() {
            let k = keys[i % keys.len()] as usize;
            let point = 10 * i as u64 + 100;
            let (f, arg, result) = if kind % 2 == 0 {
                ("get", Value::Null, json!(vals[k]))
            } else {
                vals[k].push_str(&i.to_string());
                ("append", json!(i.to_string()), json!(i.to_string()))
            };
            ops.push(GenOp { process: i as i64, f, arg, result, call: point - before as u64 % 40,
                ret: Some(point + after as u64 % 40), key: Some(k.to_string()) });
        }
        let i = victim.index(ops.len());
        if ops[i].f == "get" {
            ops[i].result = json!(format!("{}x", ops[i].result.as_str().unwrap()));
        }
        let per_key = check(&ops, "kv", json!(""), false);
        let one = check(&ops, "kv", json!(""), true);
        prop_assert_eq!(per_key, one);
    }
}
