//! The pattern of a `match_next` toxic (a lockjaw extension): which Redis
//! or ZooKeeper request it matches, by command (ZooKeeper: operation)
//! name and, for `EVAL`/`EVALSHA`, by a substring of the script or the
//! script's SHA1. An `EVALSHA` carries only
//! the SHA1; its script is the one the proxy saw in an earlier `EVAL` or
//! `SCRIPT LOAD` ([`super::frames`]).

use super::frames::Msg;
use super::model::ToxicKind;
use serde_json::{Map, Value};
use std::sync::Arc;

/// What a `match_next` toxic does to the request it matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatchAction {
    /// Hold it `hold` ms (0: until the toxic is removed or updated).
    Hold,
    /// Reset the connection before forwarding it.
    ResetBefore,
    /// Forward it, reset the connection when its reply arrives (the reply
    /// is lost, the request applied).
    ResetAfter,
    /// Forward it and its reply; from then on hold every upstream byte of
    /// the proxy's connections until the toxic is removed (the nemesis
    /// kills the client and cuts the connections first).
    FreezeAfterReply,
}

impl MatchAction {
    pub const NAMES: [&'static str; 4] =
        ["hold", "reset-before", "reset-after", "freeze-after-reply"];

    pub fn name(self) -> &'static str {
        match self {
            MatchAction::Hold => "hold",
            MatchAction::ResetBefore => "reset-before",
            MatchAction::ResetAfter => "reset-after",
            MatchAction::FreezeAfterReply => "freeze-after-reply",
        }
    }

    pub fn parse(s: &str) -> Option<MatchAction> {
        MatchAction::NAMES.iter().position(|n| *n == s).map(|i| {
            [
                MatchAction::Hold,
                MatchAction::ResetBefore,
                MatchAction::ResetAfter,
                MatchAction::FreezeAfterReply,
            ][i]
        })
    }
}

/// What a `match_next` toxic matches; at least one field is set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Pattern {
    /// The command name, upper case; `A|B` matches either.
    pub command: Option<String>,
    /// A substring of the script (`EVAL`, `EVALSHA`).
    pub script: Option<String>,
    /// The script's SHA1, lower case.
    pub sha1: Option<String>,
}

const FIELDS: [&str; 3] = ["command", "script", "sha1"];

/// Why a `command` pattern (`A|B`) can match no request: a request's name
/// is its first word (Redis: the command, `SET`, `EVALSHA_RO`,
/// `RESTORE-ASKING`, a module's `JSON.SET`), so each alternative must be
/// one non-empty word of letters, digits, `_`, `.` and `-`. `None` when
/// every alternative could match.
pub fn command_flaw(command: &str) -> Option<String> {
    if command.trim().is_empty() {
        return Some(format!(
            "command {command:?} is empty: it matches no request"
        ));
    }
    for alt in command.split('|') {
        if alt.is_empty() {
            return Some(format!(
                "command {command:?} has an empty alternative (a `|` at an end, or two together): it matches no request"
            ));
        }
        if alt.chars().any(char::is_whitespace) {
            return Some(format!(
                "command {command:?}: {alt:?} holds a space, but only a request's name (its first word) is matched, so it matches no request"
            ));
        }
        if let Some(c) = alt
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
        {
            return Some(format!(
                "command {command:?}: {c:?} is in no command name, so {alt:?} matches no request"
            ));
        }
    }
    None
}

/// The hint for a [`command_flaw`].
pub const COMMAND_HINT: &str =
    "give command names alone, separated by `|`, e.g. \"SETNX|SET\"; arguments such as NX are not matched, `script` matches a script's content";

impl Pattern {
    /// A `match_next` toxic's pattern (an error without one); None for
    /// the other kinds.
    pub fn of_kind(
        kind: ToxicKind,
        attrs: &Map<String, Value>,
    ) -> Result<Option<Arc<Pattern>>, String> {
        if !matches!(kind, ToxicKind::MatchNext { .. }) {
            return Ok(None);
        }
        Pattern::from_attrs(attrs)
            .map(|p| Some(Arc::new(p)))
            .map_err(|e| format!("{e} (lockjaw: see docs/toxiproxy.md, match_next)"))
    }

    /// The pattern in a `match_next` toxic's attributes; an error names the
    /// attribute.
    pub fn from_attrs(attrs: &Map<String, Value>) -> Result<Pattern, String> {
        let mut got = [None, None, None];
        for (i, f) in FIELDS.iter().enumerate() {
            got[i] = match attrs.get(*f) {
                None | Some(Value::Null) => None,
                // An empty command is named by `command_flaw` below.
                Some(Value::String(s)) if !s.is_empty() || *f == "command" => Some(s.clone()),
                Some(v) => {
                    return Err(format!("attribute {f} must be a non-empty string, got {v}"))
                }
            };
        }
        let [command, script, sha1] = got;
        if let Some(why) = command.as_deref().and_then(command_flaw) {
            return Err(format!("attribute {why} (hint: {COMMAND_HINT})"));
        }
        if let Some(h) = &sha1 {
            if h.len() != 40 || !h.bytes().all(|c| c.is_ascii_hexdigit()) {
                return Err(format!("attribute sha1 must be 40 hex digits, got {h:?}"));
            }
        }
        let p = Pattern {
            command: command.map(|c| c.to_ascii_uppercase()),
            script,
            sha1: sha1.map(|h| h.to_ascii_lowercase()),
        };
        if p == Pattern::default() {
            return Err(
                "match_next needs at least one of the attributes command, script, sha1".into(),
            );
        }
        Ok(p)
    }

    /// Add the pattern's attributes to a toxic's JSON.
    pub fn write(&self, attrs: &mut Map<String, Value>) {
        for (f, v) in FIELDS.iter().zip([&self.command, &self.script, &self.sha1]) {
            if let Some(v) = v {
                attrs.insert((*f).to_string(), Value::from(v.as_str()));
            }
        }
    }

    /// Whether a request matches: its name is one of `command`'s, in any
    /// case (Redis names are upper case, ZooKeeper's as [`super::frames`]
    /// names them; any name when unset), and a script request (`EVAL`, `EVALSHA`) also
    /// matches `script` and `sha1` where set. Without `command`, only
    /// script requests match a `script` or `sha1`; with it, a listed
    /// command that runs no script matches by its name alone (`DEL|EVALSHA`
    /// with script `'del'`: a plain `DEL`, or a script that deletes).
    pub fn matches(&self, m: &Msg) -> bool {
        if self
            .command
            .as_deref()
            .is_some_and(|c| !c.split('|').any(|c| c.eq_ignore_ascii_case(&m.name)))
        {
            return false;
        }
        let scripted = matches!(&*m.name, "EVAL" | "EVALSHA" | "EVAL_RO" | "EVALSHA_RO");
        if !scripted {
            return self.command.is_some() || (self.script.is_none() && self.sha1.is_none());
        }
        if let Some(want) = &self.sha1 {
            if m.sha1.as_deref() != Some(want.as_str()) {
                return false;
            }
        }
        if let Some(part) = &self.script {
            let Some(s) = &m.script else { return false };
            let part = part.as_bytes();
            if !s.windows(part.len()).any(|w| w == part) {
                return false;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use serde_json::json;

    fn msg(name: &str, script: Option<&'static str>, sha1: Option<&str>) -> Msg {
        Msg {
            name: name.into(),
            seq: 1,
            keepalive: false,
            paired: true,
            script: script.map(|s| Bytes::from_static(s.as_bytes())),
            sha1: sha1.map(str::to_string),
        }
    }

    fn pattern(v: Value) -> Result<Pattern, String> {
        Pattern::from_attrs(v.as_object().unwrap())
    }

    #[test]
    fn command_script_and_sha1_match() {
        let del = pattern(json!({"command": "del"})).unwrap();
        assert!(del.matches(&msg("DEL", None, None)));
        assert!(!del.matches(&msg("GET", None, None)));
        let either = pattern(json!({"command": "setnx|set"})).unwrap();
        assert!(
            either.matches(&msg("SET", None, None)) && either.matches(&msg("SETNX", None, None))
        );
        assert!(!either.matches(&msg("SETEX", None, None)));
        let s = pattern(json!({"script": "pexpire"})).unwrap();
        assert!(s.matches(&msg(
            "EVALSHA",
            Some("return redis.call('pexpire')"),
            Some("ab")
        )));
        assert!(
            !s.matches(&msg("EVALSHA", None, Some("ab"))),
            "script unknown"
        );
        assert!(!s.matches(&msg("SET", Some("pexpire"), None)));
        let del = pattern(json!({"command": "DEL|EVALSHA", "script": "'del'"})).unwrap();
        assert!(del.matches(&msg("DEL", None, None)));
        assert!(del.matches(&msg("EVALSHA", Some("redis.call('del', KEYS[1])"), None)));
        assert!(!del.matches(&msg("EVALSHA", Some("redis.call('pttl', KEYS[1])"), None)));
        assert!(!del.matches(&msg("EVAL", Some("redis.call('del', KEYS[1])"), None)));
        let h = "E0E1F9FABFC9D4800C877A703B823AC0578FF8DB";
        let sha = pattern(json!({ "sha1": h })).unwrap();
        assert!(sha.matches(&msg("EVALSHA", None, Some(&h.to_ascii_lowercase()))));
        assert!(!sha.matches(&msg("EVALSHA", None, Some("00"))));
        let mut attrs = Map::new();
        sha.write(&mut attrs);
        assert_eq!(attrs["sha1"], json!(h.to_ascii_lowercase()));
    }

    /// ZooKeeper's operations carry the names frames gives them
    /// (`getChildren2`); a pattern matches them in any case.
    #[test]
    fn zookeeper_operations_match_by_name() {
        let del = pattern(json!({"command": "delete"})).unwrap();
        assert!(del.matches(&msg("delete", None, None)));
        assert!(!del.matches(&msg("create", None, None)));
        let either = pattern(json!({"command": "create|getChildren2"})).unwrap();
        assert!(either.matches(&msg("getChildren2", None, None)));
        assert!(!either.matches(&msg("getChildren", None, None)));
    }

    #[test]
    fn bad_patterns_are_named() {
        assert!(pattern(json!({})).unwrap_err().contains("at least one"));
        assert!(pattern(json!({"command": 3}))
            .unwrap_err()
            .contains("command"));
        assert!(pattern(json!({"sha1": "xyz"}))
            .unwrap_err()
            .contains("40 hex"));
    }

    /// A command pattern no request's name can equal is refused, by the
    /// API as by a strike file; every real name passes.
    #[test]
    fn a_command_that_can_never_match_is_refused() {
        for (bad, why) in [
            ("", "is empty"),
            ("   ", "is empty"),
            ("|", "empty alternative"),
            ("SET|", "empty alternative"),
            ("|DEL", "empty alternative"),
            ("SET||DEL", "empty alternative"),
            ("SET NX", "holds a space"),
            ("SETNX|SET PX", "holds a space"),
            ("DEL\t", "holds a space"),
            ("SE$T", "'$' is in no command name"),
            ("SET,DEL", "',' is in no command name"),
            ("\"DEL\"", "is in no command name"),
        ] {
            let e = command_flaw(bad).unwrap_or_else(|| panic!("{bad:?} passed"));
            assert!(e.contains(why), "{bad:?}: {e}");
            let e = pattern(json!({ "command": bad })).unwrap_err();
            assert!(
                e.contains("attribute command") && e.contains("hint"),
                "{bad:?}: {e}"
            );
        }
        for good in [
            "DEL",
            "setnx|set",
            "EVALSHA_RO",
            "RESTORE-ASKING",
            "JSON.SET",
            "getData",
        ] {
            assert_eq!(command_flaw(good), None, "{good}");
            assert!(pattern(json!({ "command": good })).is_ok(), "{good}");
        }
    }
}
