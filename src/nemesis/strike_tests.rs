//! Unit tests of the `strike` table: its checks (a strike that can
//! match no request is refused naming file, line and field) and the
//! `match_next` toxic it builds.

use super::*;
use crate::nemesis::spec::from_source;
use crate::toml_file::Source;

fn spec(strike: &str) -> Result<crate::nemesis::NemesisSpec, String> {
    let src = Source {
        name: "nemesis/s.toml".into(),
        text: format!("name = \"s\"\nfault = \"strike-command\"\n{strike}"),
    };
    from_source(&src).map_err(|e| e.to_string())
}

#[test]
fn the_strike_table_is_checked_and_builds_a_match_next_toxic() {
    let s = spec("strike = { command = \"setnx|set\", action = \"crash-after\" }\n").unwrap();
    let t = s.strike.clone().unwrap();
    assert_eq!(t.action, StrikeAction::CrashAfter);
    let toxic = t.toxic(Duration::from_secs(1));
    assert_eq!(toxic.kind, "match_next");
    assert_eq!(toxic.attributes["action"], "freeze-after-reply");
    assert_eq!(toxic.attributes["command"], "setnx|set");
    assert_eq!(toxic.attributes["window"], 10_000);
    for (bad, why) in [
        ("", "needs a `strike` table"),
        ("strike = { action = \"hold\" }\n", "names no request"),
        (
            "strike = { command = \"DEL\", action = \"reset-before\", hold_ms = 5 }\n",
            "belong to action",
        ),
        ("strike = { sha1 = \"abc\" }\n", "40 hex"),
        ("strike = { command = \"DEL\", nope = 1 }\n", "nope"),
    ] {
        let e = spec(bad).unwrap_err();
        assert!(e.contains(why), "{bad}: {e}");
    }
    let src = Source {
        name: "nemesis/p.toml".into(),
        text: "name = \"p\"\nfault = \"pause-holder\"\nstrike = { command = \"DEL\" }\n".into(),
    };
    let e = from_source(&src).unwrap_err().to_string();
    assert!(e.contains("strike-command only"), "{e}");
}

/// Trust on the operator's hosts, part 8: a strike that can match no
/// request is refused when the file is read, naming the file, the
/// line that sets the field, and the field, with a hint; before, it
/// ran to "unknown" (an empty command) or to "0 of 1 faults landed".
#[test]
fn a_strike_that_can_never_match_is_refused_naming_file_line_and_field() {
    let head = "name = \"s\"\nfault = \"strike-command\"\n";
    for (table, field, line, why) in [
        ("strike = { command = \"\" }", "command", 3, "is empty"),
        (
            "strike = { command = \"|\" }",
            "command",
            3,
            "empty alternative",
        ),
        (
            "strike = { command = \"SET|\" }",
            "command",
            3,
            "empty alternative",
        ),
        (
            "strike = { command = \"SET NX\" }",
            "command",
            3,
            "holds a space",
        ),
        (
            "strike = { command = \"SET$\" }",
            "command",
            3,
            "in no command name",
        ),
        (
            "[strike]\naction = \"hold\"\ncommand = \"SETNX||SET\"",
            "command",
            5,
            "empty alternative",
        ),
        ("strike.command = \" \"", "command", 3, "is empty"),
        ("strike = { script = \"\" }", "script", 3, "is empty"),
        (
            "strike = { command = \"DEL\", sha1 = \"xyz\" }",
            "sha1",
            3,
            "40 hex",
        ),
    ] {
        let src = Source {
            name: "nemesis/bad.toml".into(),
            text: format!("{head}{table}\n"),
        };
        let e = from_source(&src).unwrap_err();
        assert_eq!(
            (e.line, e.field.clone()),
            (line, Some(format!("strike.{field}"))),
            "{table}: {e}"
        );
        let text = e.to_string();
        let at = format!("nemesis/bad.toml:{line}: field `strike.{field}`: ");
        assert!(text.starts_with(&at), "{text}");
        assert!(text.contains(why) && text.contains("(hint: "), "{text}");
    }
}

#[test]
fn only_lock_taking_replies_say_whether_the_key_was_taken() {
    assert_eq!(took_key("SETNX", ":1"), Some(true));
    assert_eq!(took_key("SETNX", ":0"), Some(false));
    assert_eq!(took_key("SET", "+OK"), Some(true));
    assert_eq!(took_key("SET", "$-1"), Some(false));
    assert_eq!(took_key("EVALSHA", ":1"), None);
}
