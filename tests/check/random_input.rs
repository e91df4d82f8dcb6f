//! `lockjaw check` fed random input: random bytes, random JSON lines and
//! random EDN, each with forms nested past the readers' limits, cut-off
//! last lines and forced formats. Whatever the file, the check path
//! (`check_history`, called in-process for speed) returns results or a
//! clean error, never a panic or an abort; a handful of files also go
//! through the binary, which must exit 0 to 3. `PROPTEST_CASES` sets the
//! cases per kind (default 2,000).

use lockjaw::check::{check_history, CheckOptions};
use lockjaw::history::import::Format;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{json, Map, Value};
use std::time::Duration;

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Field names and words the readers and checkers look for, so random
/// input reaches past the first check.
const FIELDS: &[&str] = &[
    "type",
    "time",
    "process",
    "f",
    "key",
    "value",
    "fence",
    "lease_ms",
    "owner",
    "seq",
    "index",
    "node",
    "error",
    "unobserved",
    "model",
    "init",
    "checkers",
    "workload",
    "version",
    "x",
];
const WORDS: &[&str] = &[
    "invoke",
    "ok",
    "fail",
    "info",
    "meta",
    "acquire",
    "release",
    "renew",
    "read",
    "write",
    "cas",
    "get",
    "put",
    "append",
    "nemesis",
    "start",
    "stop",
    "lock",
    "linearizable",
    "register",
    "cas-register",
    "kv",
    "mutex",
    "owned-mutex",
    "set",
    "multi-register",
    "fenced-counter",
    "lock-set",
    "leader",
    "counter",
    "1-lease",
    "final",
];

/// Options that keep one check short whatever the history.
fn options(format: Option<Format>) -> CheckOptions {
    let mut o = CheckOptions {
        format,
        ..CheckOptions::default()
    };
    o.lin.timeout = Some(Duration::from_secs(2));
    o.lin.max_memory = 64 << 20;
    o.lock.search_timeout = Some(Duration::from_secs(2));
    o.lock.search_max_memory = Some(64 << 20);
    o
}

fn format() -> impl Strategy<Value = Option<Format>> {
    prop_oneof![
        16 => Just(None),
        1 => Just(Some(Format::Jsonl)),
        1 => Just(Some(Format::Edn)),
        1 => Just(Some(Format::PorcupineEtcd)),
        1 => Just(Some(Format::PorcupineKv)),
    ]
}

thread_local! {
    /// Each test thread's folder for the file it checks.
    static DIR: tempfile::TempDir = tempfile::tempdir().unwrap();
}

/// Write `bytes` to a file and check it in-process: results or an error,
/// never a panic (proptest reports one as a failure; an abort ends the
/// test binary).
fn check_bytes(bytes: &[u8], format: Option<Format>) {
    DIR.with(|d| {
        let p = d.path().join("h");
        std::fs::write(&p, bytes).unwrap();
        let _ = check_history(&p, &options(format));
    });
}

/// `n` openers, sometimes closed again: nesting past every limit.
fn deep(open: &'static str, close: &'static str) -> impl Strategy<Value = String> {
    (1usize..3000, any::<bool>()).prop_map(move |(n, closed)| {
        let mut s = open.repeat(n);
        if closed {
            s.push('1');
            s.push_str(&close.repeat(n));
        }
        s
    })
}

/// A history's text: lines joined, the last newline kept or not, and
/// sometimes the last few bytes cut off (a killed writer).
fn assemble(lines: Vec<String>, newline: bool, cut: usize) -> Vec<u8> {
    let mut text = lines.join("\n").into_bytes();
    if newline {
        text.push(b'\n');
    }
    let keep = text.len().saturating_sub(cut);
    text.truncate(keep);
    text
}

// ---- random bytes ----

fn random_bytes() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![
        any::<u8>(),
        select(b"[]{}()\"\\:,#_ \n;0123456789-.etrufnalsix".to_vec()),
    ];
    let plain = prop::collection::vec(byte, 0..400);
    let nested = (deep("[", "]"), prop::collection::vec(any::<u8>(), 0..20))
        .prop_map(|(d, tail)| [d.into_bytes(), tail].concat());
    let gzip_magic =
        prop::collection::vec(any::<u8>(), 0..64).prop_map(|b| [&[0x1f, 0x8b][..], &b].concat());
    prop_oneof![6 => plain, 1 => nested, 1 => gzip_magic]
}

// ---- random JSON ----

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-5i64..20).prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        "[a-z\\\\\"\u{e9}]{0,6}".prop_map(Value::from),
        select(WORDS).prop_map(Value::from),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(4, 24, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((select(FIELDS), inner), 0..5).prop_map(|kv| {
                Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            }),
        ]
    })
}

/// Mostly well-formed op objects, with random values and extra fields.
fn json_op() -> impl Strategy<Value = Value> {
    (
        0u64..50,
        prop_oneof![
            (0i64..4).prop_map(Value::from),
            select(WORDS).prop_map(Value::from)
        ],
        select(&["invoke", "ok", "fail", "info", "meta", "begin"][..]),
        select(WORDS),
        prop::collection::vec((select(FIELDS), json_value()), 0..3),
    )
        .prop_map(|(time, process, kind, f, extra)| {
            let mut o = Map::new();
            o.insert("time".into(), time.into());
            o.insert("process".into(), process);
            o.insert("type".into(), kind.into());
            o.insert("f".into(), f.into());
            for (k, v) in extra {
                o.insert(k.into(), v);
            }
            Value::Object(o)
        })
}

fn json_meta() -> impl Strategy<Value = Value> {
    (
        prop::collection::vec(select(&["lock", "linearizable", "bogus"][..]), 0..3),
        prop::option::of(select(WORDS)),
        prop::option::of(json_value()),
        select(
            &[
                "lock",
                "fenced-counter",
                "lock-set",
                "leader",
                "register",
                "x",
            ][..],
        ),
        any::<bool>(),
        prop_oneof![4 => Just(1u32), 1 => any::<u32>()],
    )
        .prop_map(|(checkers, model, init, workload, ttl, version)| {
            json!({"type": "meta", "checkers": checkers, "model": model, "init": init,
                   "workload": workload, "acquire_sets_ttl": ttl, "version": version,
                   "storage_key": "counter", "initial": 0})
        })
}

/// The ops of a family of histories, and a meta record that fits them.
const FAMILIES: &[(&[&str], &str)] = &[
    (
        &["acquire", "release", "renew", "read", "write"],
        r#"{"type":"meta","checkers":["lock"],"workload":"fenced-counter","acquire_sets_ttl":true,"storage_key":"counter","initial":0,"lock_key":"l"}"#,
    ),
    (
        &["acquire", "release"],
        r#"{"type":"meta","checkers":["lock"],"workload":"lock","acquire_sets_ttl":false}"#,
    ),
    (
        &["read", "write", "cas"],
        r#"{"type":"meta","model":"cas-register","init":0}"#,
    ),
    (
        &["acquire", "release"],
        r#"{"type":"meta","model":"mutex"}"#,
    ),
    (
        &["get", "put", "append"],
        r#"{"type":"meta","model":"kv","init":""}"#,
    ),
];

/// A family's meta record and well-formed ops, so the checkers themselves
/// get random input: each step either invokes an op on a free process or
/// completes the op pending on it (`info` retires the process), with
/// lock, storage and register fields drawn at random. Ops as JSON objects.
fn paired_history() -> impl Strategy<Value = (Value, Vec<Value>)> {
    select(FAMILIES).prop_flat_map(|(fs, meta)| {
        let meta: Value = serde_json::from_str(meta).unwrap();
        paired_ops(fs).prop_map(move |ops| (meta.clone(), ops))
    })
}

fn paired_ops(fs: &'static [&'static str]) -> impl Strategy<Value = Vec<Value>> {
    let step = (
        0i64..3,
        select(fs),
        select(&["ok", "ok", "ok", "fail", "info"][..]),
        (0i64..3, 0i64..3),
        (
            prop::option::of(0u64..6),
            prop::option::of(0u64..3000),
            prop::option::of(0u64..4),
        ),
        select(&["l", "counter", "x"][..]),
    );
    prop::collection::vec(step, 0..40).prop_map(|steps| {
        let mut pending: std::collections::BTreeMap<i64, Value> = Default::default();
        let mut retired = std::collections::BTreeSet::new();
        let mut out = Vec::new();
        for (i, (p, f, done, (a, b), (fence, lease, owner), key)) in steps.into_iter().enumerate() {
            let time = i as u64 * 1_000_000;
            if let Some(mut op) = pending.remove(&p) {
                op["type"] = done.into();
                op["time"] = time.into();
                match op["f"].as_str() {
                    Some("read") if done == "ok" => op["value"] = a.into(),
                    Some("get") if done == "ok" => op["value"] = a.to_string().into(),
                    _ => {}
                }
                if done == "info" {
                    retired.insert(p);
                }
                out.push(op);
            } else if !retired.contains(&p) {
                let value = match f {
                    "cas" => json!([a, b]),
                    "read" | "get" | "acquire" | "release" | "renew" => Value::Null,
                    "put" | "append" => json!(a.to_string()),
                    _ => json!(a),
                };
                let mut op = json!({"time": time, "process": p, "type": "invoke", "f": f,
                                    "key": key, "value": value});
                for (k, v) in [("fence", fence), ("lease_ms", lease), ("owner", owner)] {
                    if let Some(v) = v {
                        op[k] = v.into();
                    }
                }
                out.push(op.clone());
                pending.insert(p, op);
            }
        }
        out
    })
}

fn json_history() -> impl Strategy<Value = Vec<u8>> {
    let line = prop_oneof![
        12 => json_op().prop_map(|v| v.to_string()),
        3 => json_value().prop_map(|v| v.to_string()),
        1 => deep("[", "]"),
        1 => deep("{\"value\":", "}"),
        1 => Just(String::new()),
    ];
    let random = (
        prop::option::of(json_meta()),
        prop::collection::vec(line, 0..24),
    )
        .prop_map(|(meta, ops)| meta.map(|m| m.to_string()).into_iter().chain(ops).collect());
    let paired = paired_history().prop_map(|(meta, ops)| {
        std::iter::once(&meta)
            .chain(&ops)
            .map(Value::to_string)
            .collect()
    });
    (
        prop_oneof![random, paired],
        any::<bool>(),
        prop_oneof![3 => Just(0usize), 1 => 0usize..40],
    )
        .prop_map(|(lines, newline, cut)| assemble(lines, newline, cut))
}

// ---- random EDN ----

fn edn_leaf() -> impl Strategy<Value = String> {
    prop_oneof![
        select(
            &[
                "nil",
                "true",
                "false",
                "\\a",
                "\\newline",
                "1N",
                "2.5M",
                "-0",
                "#inst \"2020\""
            ][..]
        )
        .prop_map(str::to_string),
        (-5i64..20).prop_map(|i| i.to_string()),
        any::<i64>().prop_map(|i| i.to_string()),
        any::<f64>().prop_map(|f| format!("{f:?}")),
        "\"[a-z\\\\\"\u{e9}]{0,5}\"",
        select(WORDS).prop_map(|w| format!(":{w}")),
        select(FIELDS).prop_map(|w| format!(":{w}")),
        "[a-z][a-z0-9]{0,4}",
    ]
}

fn edn_value() -> impl Strategy<Value = String> {
    edn_leaf().prop_recursive(4, 24, 5, |inner| {
        let items = prop::collection::vec(inner.clone(), 0..5).prop_map(|v| v.join(" "));
        prop_oneof![
            items.clone().prop_map(|s| format!("[{s}]")),
            items.clone().prop_map(|s| format!("({s})")),
            items.clone().prop_map(|s| format!("#{{{s}}}")),
            items.prop_map(|s| format!("{{{s}}}")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("#_ {a} {b}")),
            inner.prop_map(|a| format!("#tag {a}")),
        ]
    })
}

/// Mostly op maps, with random values and extra entries.
fn edn_op() -> impl Strategy<Value = String> {
    (
        select(&[":invoke", ":ok", ":fail", ":info", ":begin", "1"][..]),
        select(WORDS),
        prop_oneof![
            (0i64..4).prop_map(|p| p.to_string()),
            Just(":nemesis".to_string())
        ],
        prop::option::of(0u64..50),
        prop::collection::vec((select(FIELDS), edn_value()), 0..3),
    )
        .prop_map(|(kind, f, process, time, extra)| {
            let mut s = format!("{{:type {kind}, :f :{f}, :process {process}");
            if let Some(t) = time {
                s.push_str(&format!(" :time {t}"));
            }
            for (k, v) in extra {
                s.push_str(&format!(" :{k} {v}"));
            }
            s.push('}');
            s
        })
}

/// A JSON value as EDN: strings of `type`, `f` and `process` become
/// keywords, objects maps with keyword keys.
fn to_edn(v: &Value, keyword: bool) -> String {
    match v {
        Value::Null => "nil".into(),
        Value::String(s) if keyword => format!(":{s}"),
        Value::Array(a) => format!(
            "[{}]",
            a.iter()
                .map(|x| to_edn(x, false))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        Value::Object(o) => {
            let kv = o.iter().map(|(k, x)| {
                format!(
                    ":{k} {}",
                    to_edn(x, matches!(k.as_str(), "type" | "f" | "process"))
                )
            });
            format!("{{{}}}", kv.collect::<Vec<_>>().join(", "))
        }
        other => other.to_string(),
    }
}

fn edn_history() -> impl Strategy<Value = Vec<u8>> {
    let form = prop_oneof![
        12 => edn_op(),
        3 => edn_value(),
        1 => deep("[", "]"),
        1 => deep("#_", ""),
        1 => deep("{:value ", "}"),
        1 => Just("; a comment".to_string()),
    ];
    let random = (
        prop::option::of(json_meta()),
        prop::collection::vec(form, 0..20),
    );
    let paired = paired_history()
        .prop_map(|(meta, ops)| (Some(meta), ops.iter().map(|o| to_edn(o, false)).collect()));
    (
        prop_oneof![random, paired],
        any::<bool>(),
        any::<bool>(),
        prop_oneof![3 => Just(0usize), 1 => 0usize..40],
    )
        .prop_map(|((meta, forms), vector, newline, cut)| {
            let mut lines: Vec<String> = meta
                .map(|m| format!("; lockjaw-meta {m}"))
                .into_iter()
                .collect();
            if vector {
                lines.push(format!("[{}]", forms.join("\n ")));
            } else {
                lines.extend(forms);
            }
            assemble(lines, newline, cut)
        })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(2000),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_bytes_never_panic(bytes in random_bytes(), format in format()) {
        check_bytes(&bytes, format);
    }

    #[test]
    fn random_json_never_panics(bytes in json_history(), format in format()) {
        check_bytes(&bytes, format);
    }

    #[test]
    fn random_edn_never_panics(bytes in edn_history(), format in format()) {
        check_bytes(&bytes, format);
    }
}

/// The binary, on a few files of each kind: exit 0 to 3, never killed by
/// a signal. (Eight cases, whatever `PROPTEST_CASES` says.)
#[test]
fn the_binary_exits_0_to_3() {
    use proptest::test_runner::{Config, TestRunner};
    let mut runner = TestRunner::new(Config {
        cases: 8,
        failure_persistence: None,
        ..Config::default()
    });
    let files = (random_bytes(), json_history(), edn_history());
    runner
        .run(&files, |(bytes, json, edn)| {
            let dir = tempfile::tempdir().unwrap();
            for (name, body) in [("b.txt", bytes), ("j.jsonl", json), ("e.edn", edn)] {
                let p = dir.path().join(name);
                std::fs::write(&p, &body).unwrap();
                let o = std::process::Command::new(env!("CARGO_BIN_EXE_lockjaw"))
                    .arg("check")
                    .arg(&p)
                    .output()
                    .unwrap();
                let err = String::from_utf8_lossy(&o.stderr);
                prop_assert!(
                    matches!(o.status.code(), Some(0..=3)),
                    "{name}: {:?} {err}",
                    o.status
                );
                prop_assert!(!err.contains("panicked"), "{name}: {err}");
            }
            Ok(())
        })
        .unwrap();
}
