//! The linearizability counterexample as a page section: the longest
//! linearizable prefix (its last steps, with the model state after each)
//! and the ops that could not follow it, each linked to the timeline.

use super::html::{esc, op_links};
use serde_json::Value;
use std::fmt::Write as _;

/// How many of the prefix's last steps the page lists.
const PREFIX_SHOWN: usize = 30;

fn text(v: &Value, k: &str) -> String {
    match v.get(k) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

fn time(v: &Value, k: &str) -> String {
    v.get(k)
        .and_then(Value::as_u64)
        .map_or("—".into(), |ns| format!("{:.4} s", ns as f64 / 1e9))
}

fn ops(v: &Value) -> String {
    let ids: Vec<u64> = ["index", "complete_index"]
        .iter()
        .filter_map(|k| v.get(*k).and_then(Value::as_u64))
        .collect();
    op_links(&ids)
}

/// The section for a `violation` object (`prefix`, `stuck`, `state`, `key`).
pub fn section(v: &Value) -> String {
    let arr = |k: &str| {
        v.get(k)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let (prefix, stuck) = (arr("prefix"), arr("stuck"));
    let mut h = String::from(
        r#"<section id="linearizability" class="lin"><h2>Linearizability counterexample</h2>"#,
    );
    let key = text(v, "key");
    let _ = write!(
        h,
        "<p>{}The longest linearizable prefix has {} op(s), starting from state <code>{}</code> and ending in state <code>{}</code>; none of the ops below could be linearized next.</p>",
        if key.is_empty() { String::new() } else { format!("Key <code>{}</code>. ", esc(&key)) },
        prefix.len(),
        esc(&text(v, "initial_state")),
        esc(&text(v, "state"))
    );
    h.push_str(r#"<table class="t"><tr><th>step</th><th>ops</th><th>process</th><th>op</th><th>invoked</th><th>completed</th><th>state after</th></tr>"#);
    let skip = prefix.len().saturating_sub(PREFIX_SHOWN);
    if skip > 0 {
        let _ = write!(
            h,
            r#"<tr><td colspan="7" class="note">… {skip} earlier step(s)</td></tr>"#
        );
    }
    for (i, p) in prefix.iter().enumerate().skip(skip) {
        let _ = write!(
            h,
            "<tr><td class=\"num\">{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
            i + 1,
            ops(p),
            esc(&text(p, "process")),
            esc(&text(p, "op")),
            time(p, "invoked"),
            time(p, "completed"),
            esc(&text(p, "state_after"))
        );
    }
    for s in &stuck {
        let mut why = vec![];
        if s.get("completed_first").and_then(Value::as_bool) == Some(true) {
            why.push("completed first: had to come next");
        }
        match s.get("legal_after_prefix").and_then(Value::as_bool) {
            Some(true) => why.push("legal here, but nothing can follow it"),
            Some(false) => why.push("not legal in this state"),
            None => {}
        }
        let _ = write!(
            h,
            "<tr><td class=\"stuck\">cannot follow</td><td class=\"stuck\">{}</td><td class=\"stuck\">{}</td><td class=\"stuck\"><code>{}</code></td><td class=\"stuck\">{}</td><td class=\"stuck\">{}</td><td class=\"stuck\">{}</td></tr>",
            ops(s),
            esc(&text(s, "process")),
            esc(&text(s, "op")),
            time(s, "invoked"),
            time(s, "completed"),
            esc(&why.join("; "))
        );
    }
    h.push_str("</table></section>");
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lists_prefix_and_stuck_ops() {
        let v = json!({"key": "r", "initial_state": "null", "state": "3",
            "prefix": [{"op": "write 3", "process": "1", "index": 2, "complete_index": 3, "invoked": 1000, "completed": 2000, "state_after": "3"}],
            "stuck": [{"op": "read → 1", "process": "2", "index": 4, "complete_index": 5, "invoked": 1500, "completed": 2500, "legal_after_prefix": false, "completed_first": true}]});
        let h = section(&v);
        assert!(
            h.contains("data-op=\"4\"")
                && h.contains("read → 1")
                && h.contains("not legal in this state"),
            "{h}"
        );
    }
}
