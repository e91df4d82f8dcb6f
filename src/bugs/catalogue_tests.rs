//! Tests of reading bug files: the fields, and errors naming line and field.

use super::*;

const GOOD: &str = r#"id = "lib-1"
library = "lib (PyPI)"
title = "renew deletes the lock"
links = ["https://example.org/issues/1"]
class = "safety"
system = "redis"
workload = "lock"
nemesis = "none"
args = ["--time-limit", "8", "--fencing", "off"]
expect = "two-holders"
per = "run"

[buggy]
client = "python-lib@0.4.0"

[fixed]
client = "python-lib@0.4.1"
"#;

fn parse(text: &str) -> Result<Bug, FileError> {
    let src = Source {
        name: "bugs/lib-1.toml".into(),
        text: text.into(),
    };
    from_source(&src, "lib-1", Path::new("bugs/lib-1.toml"))
}

fn err(text: &str) -> FileError {
    parse(text).unwrap_err()
}

#[test]
fn a_good_row_parses() {
    let b = parse(GOOD).unwrap();
    assert_eq!(b.id, "lib-1");
    assert_eq!(
        (b.class, b.per, b.expect),
        (Class::Safety, Per::Run, Expect::TwoHolders)
    );
    assert_eq!(b.workload, Part::Name("lock".into()));
    assert_eq!(b.client(Role::Buggy), Some("python-lib@0.4.0"));
    assert_eq!(b.sides_text(), "python-lib@0.4.0 → python-lib@0.4.1");
    assert_eq!(b.args.len(), 4);
    assert_eq!(b.not_reproduced, None);
}

#[test]
fn the_id_must_be_the_file_stem() {
    let e = err(&GOOD.replace("id = \"lib-1\"", "id = \"lib-2\""));
    assert_eq!((e.line, e.field.as_deref()), (1, Some("id")), "{e}");
    assert!(e.to_string().contains("lib-1.toml"), "{e}");
}

#[test]
fn wrong_values_name_their_line_and_field() {
    let e = err(&GOOD.replace("expect = \"two-holders\"", "expect = \"two-holder\""));
    assert_eq!((e.line, e.field.as_deref()), (10, Some("expect")), "{e}");
    assert!(
        e.msg.contains("stale-write-accepted"),
        "the kinds are listed: {e}"
    );
    let e = err(&GOOD.replace("class = \"safety\"", "class = \"speed\""));
    assert_eq!((e.line, e.field.as_deref()), (5, Some("class")), "{e}");
    let e = err(&GOOD.replace("per = \"run\"", "per = \"fault\""));
    assert_eq!((e.line, e.field.as_deref()), (11, Some("per")), "{e}");
    let e = err(&GOOD.replace("per = \"run\"", "per = \"injection\""));
    assert_eq!((e.line, e.field.as_deref()), (11, Some("per")), "{e}");
    assert!(e.msg.contains("no injection can land"), "{e}");
    let e = err(&GOOD.replace("system = \"redis\"", "system = \"redys\""));
    assert_eq!((e.line, e.field.as_deref()), (6, Some("system")), "{e}");
    let e = err(&GOOD.replace("client = \"python-lib@0.4.1\"", "clinet = \"x\""));
    assert_eq!((e.line, e.field.as_deref()), (17, Some("clinet")), "{e}");
    assert!(e.hint.is_some());
}

#[test]
fn args_must_parse_as_lockjaw_run_flags_and_leave_the_rows_own_alone() {
    let e = err(&GOOD.replace("\"--fencing\", \"off\"", "\"--fencing\", \"sideways\""));
    assert_eq!((e.line, e.field.as_deref()), (9, Some("args")), "{e}");
    assert!(e.msg.contains("sideways"), "{e}");
    let e = err(&GOOD.replace("\"--time-limit\", \"8\"", "\"--client\", \"x\""));
    assert_eq!(e.field.as_deref(), Some("args"), "{e}");
    assert!(e.msg.contains("--client"), "{e}");
    let e = err(&GOOD.replace("\"--time-limit\", \"8\"", "\"--runs=3\""));
    assert!(e.msg.contains("--runs"), "{e}");
}

/// Issue 41, item 7: a row may wait for its fixed side (`lockjaw explore`
/// writes such rows); never for its buggy side.
#[test]
fn a_row_needs_its_buggy_side_unless_not_reproduced() {
    let one = GOOD.split("[fixed]").next().unwrap().to_string();
    assert_eq!(parse(&one).unwrap().fixed, None);
    let e = err(&GOOD.replace("[buggy]\nclient = \"python-lib@0.4.0\"\n", ""));
    assert!(e.msg.contains("[buggy]"), "{e}");
    let e = err(&format!("status = \"not-reproduced\"\n{one}"));
    assert_eq!((e.line, e.field.as_deref()), (0, Some("reason")), "{e}");
    let b = parse(&format!(
        "status = \"not-reproduced\"\nreason = \"no release runs here\"\n{one}"
    ))
    .unwrap();
    assert_eq!(b.not_reproduced.as_deref(), Some("no release runs here"));
    assert_eq!(b.fixed, None);
    let e = err(&format!("reason = \"why\"\n{GOOD}"));
    assert_eq!((e.line, e.field.as_deref()), (1, Some("reason")), "{e}");
}

/// Issue 42: a bug explore found, reported and not yet fixed is `open`:
/// its buggy side runs, and a [fixed] side contradicts it.
#[test]
fn an_open_row_has_its_buggy_side_and_no_fixed_one() {
    let one = GOOD.split("[fixed]").next().unwrap().to_string();
    let b = parse(&format!("status = \"open\"\n{one}")).unwrap();
    assert!(b.open && b.not_reproduced.is_none(), "{b:?}");
    assert_eq!(b.client(Role::Buggy), Some("python-lib@0.4.0"));
    assert!(!parse(GOOD).unwrap().open);
    let e = err(&format!("status = \"open\"\n{GOOD}"));
    assert_eq!((e.line, e.field.as_deref()), (1, Some("status")), "{e}");
    let e = err(&format!(
        "status = \"open\"\n{}",
        GOOD.replace("[buggy]\nclient = \"python-lib@0.4.0\"\n", "")
    ));
    assert!(e.msg.contains("[buggy]"), "{e}");
    let e = err(&format!("status = \"open\"\nreason = \"why\"\n{one}"));
    assert_eq!(e.field.as_deref(), Some("reason"), "{e}");
}

#[test]
fn an_inline_workload_is_checked_on_the_bug_files_own_lines() {
    let inline = GOOD.replace("workload = \"lock\"\n", "")
        + "\n[workload]\nname = \"short-lock\"\nkind = \"lock\"\nttl_ms = 0\n";
    let e = err(&inline);
    assert_eq!(e.field.as_deref(), Some("workload.ttl_ms"), "{e}");
    assert_eq!(e.line, 21, "{e}");
    let ok = parse(&inline.replace("ttl_ms = 0", "ttl_ms = 500")).unwrap();
    match ok.workload {
        Part::Inline(t) => {
            assert!(
                t.contains("ttl_ms = 500") && t.contains("kind = \"lock\""),
                "{t}"
            )
        }
        p => panic!("{p:?}"),
    }
    let e = err(&(GOOD.replace("nemesis = \"none\"\n", "")
        + "\n[nemesis]\nname = \"p\"\nfault = \"pause-holdr\"\n"));
    assert_eq!(
        (e.line, e.field.as_deref()),
        (20, Some("nemesis.fault")),
        "{e}"
    );
    assert!(
        e.hint.as_deref().unwrap_or("").contains("pause-holder"),
        "{e}"
    );
    let e = err(&GOOD.replace(
        "nemesis = \"none\"",
        "nemesis = { name = \"p\", fault = \"nope\" }",
    ));
    assert_eq!(
        (e.line, e.field.as_deref()),
        (8, Some("nemesis.fault")),
        "{e}"
    );
}

#[test]
fn a_directory_loads_every_row_and_find_lists_the_ids() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("lib-1.toml"), GOOD).unwrap();
    std::fs::write(d.path().join("README.md"), "not a bug").unwrap();
    let all = load_dir(d.path()).unwrap();
    assert_eq!(all.len(), 1);
    assert_eq!(find(d.path(), "lib-1").unwrap().id, "lib-1");
    let e = find(d.path(), "lib-9").unwrap_err();
    assert!(e.hint.unwrap().contains("lib-1"));
    std::fs::write(d.path().join("bad.toml"), "id = 3\n").unwrap();
    let e = load_dir(d.path()).unwrap_err();
    assert!(e.file.ends_with("bad.toml"), "{e}");
    assert_eq!(resolve_dir(Some(d.path())), d.path());
}

#[test]
fn the_shipped_catalogue_loads() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("bugs");
    let all = load_dir(&dir).unwrap_or_else(|e| panic!("{e}"));
    for b in &all {
        assert!(
            b.not_reproduced.is_some() || (b.buggy.is_some() && (b.fixed.is_some() || b.open)),
            "{}",
            b.id
        );
    }
}
