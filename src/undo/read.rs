//! Reading an undo log line by line: what is pending, and each line that
//! cannot be read (not UTF-8, not JSON, not a record, an iptables record of
//! the old untyped form), named by file and line and skipped alone.

use super::{Line, Pending, Undo};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// An undo log as read: what is pending, and what could not be read.
pub(super) struct Parsed {
    pub pending: BTreeMap<u64, Pending>,
    pub last_id: u64,
    /// Complete lines (a partial last line not counted).
    pub lines: usize,
    pub skipped: Vec<String>,
    /// A last line without its newline: (its number, the length to keep).
    pub torn: Option<(usize, u64)>,
}

/// Read an undo log line by line: a line that is not UTF-8 or not a record
/// is skipped (and reported unless a later `done` covers its id), the
/// others still count.
pub(super) fn parse(bytes: &[u8], shown: &Path) -> Parsed {
    let mut out = Parsed {
        pending: BTreeMap::new(),
        last_id: 0,
        lines: 0,
        skipped: Vec::new(),
        torn: None,
    };
    let mut bad: BTreeMap<u64, String> = BTreeMap::new();
    let mut start = 0usize;
    for (i, chunk) in bytes.split_inclusive(|&b| b == b'\n').enumerate() {
        let n = i + 1;
        let keep = start as u64;
        start += chunk.len();
        let Some(text) = chunk.strip_suffix(b"\n") else {
            out.torn = Some((n, keep));
            break;
        };
        out.lines = n;
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let at = format!("{}:{n}", shown.display());
        if let Err(e) = std::str::from_utf8(text) {
            out.skipped.push(format!(
                "{at}: skipped: not UTF-8 (byte {} of the line)",
                e.valid_up_to() + 1
            ));
            continue;
        }
        match serde_json::from_slice::<Line>(text) {
            Ok(Line::Entry { id, undo }) => {
                out.last_id = out.last_id.max(id);
                out.pending.insert(id, Pending { line: n, undo });
            }
            Ok(Line::Done { done }) => {
                out.pending.remove(&done);
                bad.remove(&done);
            }
            Err(_) => {
                let v: Option<Value> = serde_json::from_slice(text).ok();
                let id = v.as_ref().and_then(|v| v.get("id")).and_then(Value::as_u64);
                let msg = format!("{at}: skipped: {}", why_not_a_record(v.as_ref()));
                match id {
                    Some(id) => {
                        out.last_id = out.last_id.max(id);
                        bad.insert(id, msg);
                    }
                    None => out.skipped.push(msg),
                }
            }
        }
    }
    out.skipped.extend(bad.into_values());
    out
}

/// Why a line of the undo log is no record lockjaw can undo.
fn why_not_a_record(v: Option<&Value>) -> String {
    let Some(v) = v else {
        return "not JSON".into();
    };
    let undo = v.get("undo");
    let kind = undo.and_then(|u| u.get("kind")).and_then(Value::as_str);
    if kind == Some("iptables") && undo.is_some_and(|u| u.get("args").is_some()) {
        return "an iptables rule in the old untyped form, which heal no longer passes to iptables (hint: if `iptables -S OUTPUT` still lists a rule commented with this run's id, delete it by hand)".into();
    }
    match kind {
        Some(k) => format!("a {k:?} record with missing or malformed fields"),
        None => "not an undo record".into(),
    }
}

/// The pending entries of an undo file (lines that cannot be read are
/// left out).
pub fn read_pending(path: &Path) -> std::io::Result<BTreeMap<u64, Undo>> {
    let bytes = std::fs::read(path)?;
    Ok(parse(&bytes, path)
        .pending
        .into_iter()
        .map(|(id, p)| (id, p.undo))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::super::log::tests::{open, PAUSE_1};
    use super::super::{Undo, UNDO_FILE};
    use super::*;

    #[test]
    fn a_bad_line_is_reported_with_its_number_and_the_others_still_count() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(UNDO_FILE);
        let mut bytes = PAUSE_1.as_bytes().to_vec();
        bytes.extend(b"{\"id\":2,\"undo\":{\"kind\":\"redis-client-pause\",\"addr\":\"\xff\"}}\n");
        bytes.extend(b"{\"id\":3,\"undo\":{\"kind\":\"iptables\",\"args\":[\"-F\"]}}\n");
        bytes.extend(
            b"{\"id\":4,\"undo\":{\"kind\":\"iptables\",\"args\":[\"-F\"]}}\n{\"done\":4}\n",
        );
        bytes.extend(b"[1]\n");
        bytes.extend(b"{\"id\":5,\"undo\":{\"kind\":\"redis-client-pause\",\"addr\":\"c\"}}\n");
        std::fs::write(&p, &bytes).unwrap();
        let log = open(&p);
        assert_eq!(
            log.pending().iter().map(|(id, _)| *id).collect::<Vec<_>>(),
            vec![1, 5]
        );
        let s = log.skipped();
        assert_eq!(s.len(), 3, "{s:?}");
        assert!(s[0].contains("undo.jsonl:2: skipped: not UTF-8"), "{s:?}");
        assert!(
            s[1].contains("undo.jsonl:6: skipped: not an undo record"),
            "{s:?}"
        );
        assert!(
            s[2].contains("undo.jsonl:3: skipped: an iptables rule in the old untyped form"),
            "{s:?}"
        );
        // Record 4 was undone before: nothing to report. New ids go past 5.
        assert_eq!(
            log.push(Undo::RedisClientPause { addr: "d".into() })
                .unwrap(),
            6
        );
    }

    #[test]
    fn a_torn_last_line_is_ignored() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(UNDO_FILE);
        std::fs::write(&p, format!("{PAUSE_1}{{\"id\":2,\"und")).unwrap();
        assert_eq!(read_pending(&p).unwrap().len(), 1);
    }
}
