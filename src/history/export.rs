//! Writing lockjaw ops as Jepsen/Knossos EDN.
//!
//! One vector of op maps, one map a line, with keywords where Jepsen uses
//! them (`:type`, `:f`, `:process :nemesis`, transaction micro-op names and
//! keys). A value that was not observed is written as `nil`, which is what
//! Knossos reads as "not observed". Knossos has no way to say "read the
//! absent value": a JSON `null` read also becomes `nil` (a weaker claim).

use super::edn::{write_edn, Edn};
use super::import::EDN_META_PREFIX;
use super::{Meta, Op, OpType, Process};
use serde_json::Value;
use std::io::Write;

fn keyword_safe(s: &str) -> bool {
    !s.is_empty()
        && !s.as_bytes()[0].is_ascii_digit()
        && s.chars()
            .all(|c| c.is_alphanumeric() || "-_.*+!?<>=/".contains(c))
}

fn kw_or_str(s: &str) -> Edn {
    if keyword_safe(s) {
        Edn::Keyword(s.to_string())
    } else {
        Edn::Str(s.to_string())
    }
}

/// A JSON value as EDN: objects become maps with keyword keys where possible.
pub fn json_to_edn(v: &Value) -> Edn {
    match v {
        Value::Null => Edn::Nil,
        Value::Bool(b) => Edn::Bool(*b),
        Value::Number(n) => n
            .as_i64()
            .map_or_else(|| Edn::Float(n.as_f64().unwrap_or(0.0)), Edn::Int),
        Value::String(s) => Edn::Str(s.clone()),
        Value::Array(a) => Edn::Vector(a.iter().map(json_to_edn).collect()),
        Value::Object(m) => Edn::Map(
            m.iter()
                .map(|(k, x)| (kw_or_str(k), json_to_edn(x)))
                .collect(),
        ),
    }
}

/// A transaction's micro-ops `[f k v]` with keyword names and keys.
fn txn_to_edn(v: &Value) -> Edn {
    let Value::Array(mops) = v else {
        return json_to_edn(v);
    };
    Edn::Vector(
        mops.iter()
            .map(|m| match m.as_array() {
                Some(p) if (2..=3).contains(&p.len()) => {
                    let name = |x: &Value| x.as_str().map_or_else(|| json_to_edn(x), kw_or_str);
                    Edn::Vector(vec![
                        name(&p[0]),
                        name(&p[1]),
                        p.get(2).map_or(Edn::Nil, json_to_edn),
                    ])
                }
                _ => json_to_edn(m),
            })
            .collect(),
    )
}

/// One op as a Jepsen op map.
pub fn op_to_edn(op: &Op) -> Edn {
    let kw = |s: &str| Edn::Keyword(s.to_string());
    let kind = match op.kind {
        OpType::Invoke => "invoke",
        OpType::Ok => "ok",
        OpType::Fail => "fail",
        OpType::Info => "info",
    };
    let process = match &op.process {
        Process::Num(n) => Edn::Int(*n),
        Process::Nemesis => kw("nemesis"),
        Process::Named(s) => Edn::Str(s.clone()),
    };
    let value = if op.unobserved {
        Edn::Nil
    } else if op.f == "txn" {
        txn_to_edn(&op.value)
    } else {
        json_to_edn(&op.value)
    };
    let mut m = vec![
        (kw("type"), kw(kind)),
        (kw("f"), kw_or_str(&op.f)),
        (kw("value"), value),
        (kw("process"), process),
        (kw("time"), Edn::Int(op.time as i64)),
        (kw("index"), Edn::Int(op.index as i64)),
    ];
    if let Some(k) = &op.key {
        m.push((kw("key"), Edn::Str(k.clone())));
    }
    let opt_int = [
        ("fence", op.fence),
        ("lease_ms", op.lease_ms),
        ("seq", op.seq),
    ];
    for (name, v) in opt_int {
        if let Some(v) = v {
            m.push((kw(name), Edn::Int(v as i64)));
        }
    }
    if let Some(o) = &op.owner {
        m.push((kw("owner"), Edn::Str(o.clone())));
    }
    if let Some(n) = &op.node {
        m.push((kw("node"), Edn::Str(n.clone())));
    }
    if let Some(e) = &op.error {
        m.push((kw("error"), kw_or_str(e)));
    }
    Edn::Map(m)
}

/// Writes ops as one EDN vector, one op map a line.
pub struct EdnWriter<W: Write> {
    out: W,
    first: bool,
    buf: String,
}

impl<W: Write> EdnWriter<W> {
    pub fn new(out: W) -> EdnWriter<W> {
        EdnWriter {
            out,
            first: true,
            buf: String::new(),
        }
    }

    /// A writer whose output starts with lockjaw's meta record in a
    /// comment line ([`EDN_META_PREFIX`]): Jepsen and Knossos skip it,
    /// lockjaw's importer reads it back, so the EDN copy checks the same.
    pub fn with_meta(mut out: W, meta: &Meta) -> std::io::Result<EdnWriter<W>> {
        let mut v = serde_json::to_value(meta)?;
        if let Some(o) = v.as_object_mut() {
            o.insert("type".into(), Value::String("meta".into()));
        }
        writeln!(out, "{EDN_META_PREFIX}{v}")?;
        Ok(EdnWriter::new(out))
    }

    pub fn write(&mut self, op: &Op) -> std::io::Result<()> {
        self.buf.clear();
        self.buf.push_str(if self.first { "[" } else { "\n " });
        self.first = false;
        write_edn(&mut self.buf, &op_to_edn(op));
        self.out.write_all(self.buf.as_bytes())
    }

    /// Close the vector and flush.
    pub fn finish(mut self) -> std::io::Result<W> {
        self.out
            .write_all(if self.first { b"[]\n" } else { b"]\n" })?;
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::import::{open_input, Format};

    #[test]
    fn edn_round_trips_through_the_importer() {
        let mut ops = vec![
            Op::new(5, Process::Num(1), OpType::Invoke, "read"),
            Op::new(6, Process::Nemesis, OpType::Info, "kill"),
            Op::new(7, Process::Num(1), OpType::Ok, "read"),
        ];
        ops[2].unobserved = true;
        ops[1].error = Some("timed-out".into());
        let mut w = EdnWriter::new(Vec::new());
        for o in &ops {
            w.write(o).unwrap();
        }
        let bytes = w.finish().unwrap();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(
            text.starts_with("[{:type :invoke, :f :read, :value nil, :process 1, :time 5"),
            "{text}"
        );
        let back: Vec<Op> = open_input(
            "t".into(),
            Box::new(std::io::Cursor::new(bytes)),
            Format::Edn,
        )
        .unwrap()
        .map(|r| r.unwrap().1)
        .collect();
        assert_eq!(back, ops);
    }

    #[test]
    fn the_meta_record_and_lock_fields_survive_an_edn_round_trip() {
        let meta: Meta = serde_json::from_str(
            r#"{"checkers":["lock"],"workload":"fenced-counter","acquire_sets_ttl":true,"model":"kv","init":""}"#,
        )
        .unwrap();
        let mut inv = Op::new(5, Process::Num(1), OpType::Invoke, "acquire");
        inv.key = Some("l".into());
        let mut ok = Op::new(9, Process::Num(1), OpType::Ok, "acquire");
        ok.key = Some("l".into());
        ok.fence = Some(33);
        ok.lease_ms = Some(2000);
        ok.owner = Some("L3".into());
        ok.seq = Some(7);
        let mut w = EdnWriter::with_meta(Vec::new(), &meta).unwrap();
        w.write(&inv).unwrap();
        w.write(&ok).unwrap();
        let bytes = w.finish().unwrap();
        let src = open_input(
            "t".into(),
            Box::new(std::io::Cursor::new(bytes)),
            Format::Edn,
        )
        .unwrap();
        assert_eq!(src.meta.as_ref(), Some(&meta));
        let back: Vec<Op> = src.map(|r| r.unwrap().1).collect();
        assert_eq!(back, vec![inv, ok]);
    }
}
