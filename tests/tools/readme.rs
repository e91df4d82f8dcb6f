//! The README against the code it names: at most 150 lines, every `make`
//! target it mentions exists in the Makefile, every `lockjaw ...` command
//! line in it parses (the built binary, run with the line's arguments and
//! `--help` appended, exits 0), and every chapter it links exists.

use pulldown_cmark::{Event, Parser, Tag, TagEnd};
use std::process::Command;

const README: &str = include_str!("../../README.md");
const MAKEFILE: &str = include_str!("../../Makefile");
/// Issue 28: a newcomer reads the README in five minutes.
const MAX_LINES: usize = 150;

/// The code of a markdown text: each line of each code block (a line
/// ending in `\` joined with the next, `# comments` cut) and each inline
/// code span, in order.
fn code_lines(md: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut block: Option<String> = None;
    for event in Parser::new(md) {
        match event {
            Event::Start(Tag::CodeBlock(_)) => block = Some(String::new()),
            Event::End(TagEnd::CodeBlock) => {
                let text = block.take().unwrap_or_default().replace("\\\n", " ");
                for line in text.lines() {
                    let line = line.split(" #").next().unwrap_or("").trim();
                    if !line.is_empty() && !line.starts_with('#') {
                        out.push(line.to_string());
                    }
                }
            }
            Event::Text(t) if block.is_some() => block.as_mut().unwrap().push_str(&t),
            Event::Code(span) => out.push(span.trim().to_string()),
            _ => {}
        }
    }
    out
}

/// The arguments of every `lockjaw` command line in the code of `md`
/// (the program as `lockjaw` or a path ending in `/lockjaw`).
fn lockjaw_commands(md: &str) -> Vec<Vec<String>> {
    code_lines(md)
        .iter()
        .filter_map(|line| shlex::split(line))
        .filter(|words| {
            words
                .first()
                .is_some_and(|w| w == "lockjaw" || w.ends_with("/lockjaw"))
        })
        .map(|words| words[1..].to_vec())
        .collect()
}

/// The targets `make TARGET` names in the code of `md`.
fn make_targets_named(md: &str) -> Vec<String> {
    let mut out: Vec<String> = code_lines(md)
        .iter()
        .filter_map(|line| line.strip_prefix("make "))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_string)
        .collect();
    out.dedup();
    out
}

/// The targets a Makefile defines: rule lines `a b: ...` (not `a := v`,
/// not special targets like `.PHONY`).
fn makefile_targets(makefile: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in makefile.lines() {
        if line.starts_with(['\t', '#', ' ', '.']) {
            continue;
        }
        let Some((names, rest)) = line.split_once(':') else {
            continue;
        };
        if rest.starts_with('=') || names.contains('=') {
            continue;
        }
        out.extend(names.split_whitespace().map(str::to_string));
    }
    out
}

/// Run `lockjaw ARGS --help`: `Ok` when it exits 0, else the reason.
fn parses(args: &[String]) -> Result<(), String> {
    let o = Command::new(env!("CARGO_BIN_EXE_lockjaw"))
        .args(args)
        .arg("--help")
        .output()
        .map_err(|e| format!("cannot run lockjaw: {e}"))?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!(
            "exit {:?}: {}",
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).trim()
        ))
    }
}

#[test]
fn the_readme_is_short() {
    let n = README.lines().count();
    assert!(
        n <= MAX_LINES,
        "README.md has {n} lines, more than {MAX_LINES} (hint: move the detail to a chapter in docs/ and link it)"
    );
}

#[test]
fn every_make_target_the_readme_names_exists() {
    let named = make_targets_named(README);
    assert!(
        named.iter().any(|t| t == "test") && named.iter().any(|t| t == "demo"),
        "the README names `make test` and `make demo` (CI runs `make test`): {named:?}"
    );
    let defined = makefile_targets(MAKEFILE);
    for t in &named {
        assert!(
            defined.contains(t),
            "README.md names `make {t}`, which the Makefile does not define (hint: fix the README or add the target)"
        );
    }
}

#[test]
fn every_lockjaw_command_line_in_the_readme_parses() {
    let commands = lockjaw_commands(README);
    assert!(
        commands.len() >= 10,
        "found only {} lockjaw command lines in README.md: {commands:?}",
        commands.len()
    );
    let failures: Vec<String> = commands
        .iter()
        .filter_map(|args| {
            parses(args)
                .err()
                .map(|e| format!("lockjaw {}: {e}", args.join(" ")))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "README.md shows command lines lockjaw does not accept (hint: fix the line or the flag's name):\n{}",
        failures.join("\n")
    );
}

/// The relative link targets of `md` (no `http`, no `#` alone), without
/// their anchors.
fn local_links(md: &str) -> Vec<String> {
    Parser::new(md)
        .filter_map(|e| match e {
            Event::Start(Tag::Link { dest_url, .. }) => Some(dest_url.to_string()),
            _ => None,
        })
        .filter(|d| !d.starts_with('#') && !d.contains("://"))
        .map(|d| d.split('#').next().unwrap_or("").to_string())
        .collect()
}

#[test]
fn every_chapter_the_readme_links_exists() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let links = local_links(README);
    assert!(links.len() >= 15, "{links:?}");
    for l in &links {
        assert!(
            root.join(l).is_file(),
            "README.md links {l}, which does not exist (hint: fix the link)"
        );
    }
}

#[test]
fn the_checks_can_fail() {
    let md = "```sh\n./target/release/lockjaw run --system etcd \\\n    --no-such-flag 1  # a comment\nmake no-such-target\n```\n\n| `lockjaw bogus` | x |\n";
    let commands = lockjaw_commands(md);
    assert_eq!(
        commands,
        [
            vec!["run", "--system", "etcd", "--no-such-flag", "1"],
            vec!["bogus"]
        ]
    );
    for args in &commands {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        assert!(parses(&args).is_err(), "lockjaw {args:?} --help must fail");
    }
    let bad_value = ["run", "--system", "no-such-system"].map(String::from);
    assert!(parses(&bad_value).is_err(), "an unknown --system must fail");
    let ok = ["run", "--system", "etcd"].map(String::from);
    assert_eq!(parses(&ok), Ok(()));

    assert_eq!(make_targets_named(md), ["no-such-target"]);
    let defined = makefile_targets(MAKEFILE);
    assert!(!defined.contains(&"no-such-target".to_string()));
    for t in ["test", "demo", "demo-alternatives", "test-long", "deps"] {
        assert!(defined.contains(&t.to_string()), "{t}: {defined:?}");
    }
    assert!(!defined
        .iter()
        .any(|t| t.starts_with('.') || t.contains('=')));

    let links = local_links("[a](docs/a.md#x) [b](#top) [c](https://x.org/c.md)");
    assert_eq!(links, ["docs/a.md"]);
}
