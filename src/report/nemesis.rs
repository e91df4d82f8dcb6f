//! Nemesis periods ("bands") from the history's `process: "nemesis"` ops.
//!
//! Each nemesis op (an invocation with its completion, or a lone
//! completion) is a start or a stop of a fault:
//! - `f` = `start`/`stop` (Jepsen), or `start-X`/`stop-X` (fault X);
//! - else `value.phase` (or `action`/`event`) = `start`/`stop` (or
//!   `begin`/`end`, `inject`/`heal`), with `f` naming the fault;
//! - else the ops of one fault alternate: start, stop, start, ...
//!
//! A band runs from its start op's invocation to its stop op's completion;
//! a fault never stopped runs to the end of the history.

use super::timeline::{Interval, Lane, LaneKind};
use serde_json::Value;

/// One fault period.
#[derive(Clone, Debug, PartialEq)]
pub struct Band {
    pub start: u64,
    pub end: u64,
    /// The fault's name and, when the op says so, its target.
    pub label: String,
    /// No stop op was found: the band runs to the end of the history.
    pub open: bool,
    /// Invocation indexes of the nemesis ops that opened and closed it.
    pub ops: Vec<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    Start,
    Stop,
    Toggle,
}

fn word_phase(w: &str) -> Option<Phase> {
    match w {
        "start" | "begin" | "inject" | "on" => Some(Phase::Start),
        "stop" | "end" | "heal" | "recover" | "off" => Some(Phase::Stop),
        _ => None,
    }
}

/// (phase, fault name) of one nemesis op.
fn classify(f: &str, value: &Value) -> (Phase, String) {
    let named = |v: &Value| {
        ["fault", "name", "kind"]
            .iter()
            .find_map(|k| v.get(k).and_then(Value::as_str))
            .unwrap_or("")
            .to_string()
    };
    for sep in ['-', '_', ':'] {
        if let Some((head, rest)) = f.split_once(sep) {
            if let Some(p) = word_phase(head) {
                return (p, rest.to_string());
            }
        }
    }
    if let Some(p) = word_phase(f) {
        return (p, named(value));
    }
    let phase = ["phase", "action", "event"]
        .iter()
        .find_map(|k| value.get(k).and_then(Value::as_str))
        .and_then(word_phase);
    (phase.unwrap_or(Phase::Toggle), f.to_string())
}

fn target(v: &Value) -> Option<String> {
    let t = v
        .get("target")
        .or_else(|| v.get("node"))
        .or_else(|| v.get("process"))?;
    super::timeline::short_value(t)
}

/// The bands of the nemesis ops among `intervals` (sorted by start).
pub fn bands(intervals: &[Interval], lanes: &[Lane], fs: &[String], end_ns: u64) -> Vec<Band> {
    let mut open: Vec<(String, Band)> = vec![];
    let mut done = vec![];
    for iv in intervals {
        if lanes[iv.lane as usize].kind != LaneKind::Nemesis {
            continue;
        }
        let (mut phase, name) = classify(&fs[iv.f as usize], &iv.detail);
        // A stop closes the start with the same injection id, else the
        // latest open fault of the same name.
        let id = iv.detail.get("id").map(|v| v.to_string());
        let key = format!("{name}#{}", id.as_deref().unwrap_or(""));
        let at = open.iter().rposition(|(k, _)| {
            *k == key || (id.is_none() && (k.starts_with(&format!("{name}#")) || name.is_empty()))
        });
        if phase == Phase::Toggle {
            phase = if at.is_some() {
                Phase::Stop
            } else {
                Phase::Start
            };
        }
        match (phase, at) {
            (Phase::Stop, Some(i)) => {
                let (_, mut b) = open.remove(i);
                b.end = iv.end.unwrap_or(iv.start).max(b.start);
                b.open = false;
                b.ops.push(iv.invoke_index);
                done.push(b);
            }
            (Phase::Stop, None) => {} // a stop with nothing open: a heal at the end
            _ => {
                let label = match target(&iv.detail) {
                    Some(t) if !name.is_empty() => format!("{name} ({t})"),
                    _ if name.is_empty() => "fault".to_string(),
                    _ => name.clone(),
                };
                let b = Band {
                    start: iv.start,
                    end: end_ns,
                    label,
                    open: true,
                    ops: vec![iv.invoke_index],
                };
                open.push((key, b));
            }
        }
    }
    done.extend(open.into_iter().map(|(_, b)| b));
    done.sort_by_key(|b| (b.start, b.end));
    done
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn classify_covers_the_vocabularies() {
        assert_eq!(
            classify("start", &json!({"fault": "pause"})),
            (Phase::Start, "pause".into())
        );
        assert_eq!(
            classify("stop-partition", &Value::Null),
            (Phase::Stop, "partition".into())
        );
        assert_eq!(
            classify("pause-holder", &json!({"phase": "stop"})),
            (Phase::Stop, "pause-holder".into())
        );
        assert_eq!(
            classify("clock-jump", &Value::Null),
            (Phase::Toggle, "clock-jump".into())
        );
    }

    #[test]
    fn overlapping_faults_close_by_id() {
        use crate::report::timeline::{Interval, Lane, LaneKind, Outcome};
        let lane = Lane::new("nemesis", "nemesis", LaneKind::Nemesis);
        let op = |i: u64, t: u64, f: u32, id: u64| Interval {
            invoke_index: i,
            complete_index: Some(i + 1),
            start: t,
            end: Some(t + 1),
            process: 0,
            lane: 0,
            f,
            outcome: Outcome::Info,
            key: None,
            fence: None,
            lease_ms: None,
            owner: None,
            seq: None,
            error: None,
            value: None,
            detail: json!({"fault": "pause-holder", "id": id, "process": id}),
        };
        let fs = ["start".to_string(), "stop".to_string()];
        let ivs = [
            op(0, 10, 0, 1),
            op(2, 20, 0, 2),
            op(4, 30, 1, 1),
            op(6, 40, 1, 2),
        ];
        let b = bands(&ivs, &[lane], &fs, 100);
        assert_eq!(b.len(), 2);
        assert_eq!(
            (b[0].start, b[0].end, b[0].label.as_str()),
            (10, 31, "pause-holder (1)")
        );
        assert_eq!((b[1].start, b[1].end), (20, 41));
    }
}
