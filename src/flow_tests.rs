//! The shape tests: no file over 600 lines (two named exceptions), no
//! function over 120; and the layer test: every `crate::X` path in
//! `src/**/*.rs` must point down
//! the module order (docs/ARCHITECTURE.md, "Layers"). A module may use
//! itself and the modules of the layers below its own, nothing else: no
//! exceptions, no allow-list, and no two modules of one layer use each
//! other.
//!
//! ```text
//! cli, main, lib
//!  merge                 `lockjaw merge`: shards joined into one result
//!  explore               `lockjaw explore`: learn, plan, search, judge
//!   bugs                 the catalogue of real bugs
//!   runner                 wiring, the worker, compare and sweep, heal (the undo executor)
//!     combination          what applies: Combination, applies, the generated tables
//!       nemesis            faults, their registry and schedules
//!         service          the registry: one entry per system, its facts, its clients
//!           workload       what each worker does per step
//!             storage      the fenced resource
//!               cluster    starting and handling servers (owns the Servers trait)
//!                 client   lock, register and election clients; their protocols
//!                   remote, testbed   SSH hosts; the namespace test bed
//!                     toxiproxy       the embedded Toxiproxy and its client
//!                       report > check > history
//!                         undo        the undo log (records only)
//!                           auth      credentials and TLS from --auth FILE
//!                             process, exit, toml_file
//! ```

use std::path::{Path, PathBuf};

/// The layers, top to bottom.
const LAYERS: &[&[&str]] = &[
    &["cli", "main", "lib", "flow_tests"],
    &["merge"],
    &["explore"],
    &["bugs"],
    &["runner"],
    &["combination"],
    &["nemesis"],
    &["service"],
    &["workload"],
    &["storage"],
    &["cluster"],
    &["client"],
    &["remote", "testbed"],
    &["toxiproxy"],
    &["report"],
    &["check"],
    &["history"],
    &["undo"],
    &["auth"],
    &["process", "exit", "toml_file"],
];

/// The layer of a module (0 = top); `None` for a module not in the order.
fn layer(m: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&m))
}

/// Whether module `from` may use module `to`.
fn allowed(from: &str, to: &str) -> bool {
    if from == to {
        return true;
    }
    match (layer(from), layer(to)) {
        (Some(a), Some(b)) => a < b,
        // An unknown module: add it to the order above.
        _ => false,
    }
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The modules a line names as `crate::X` (also inside `use crate::{X, Y::..}`),
/// outside comments.
fn targets(line: &str) -> Vec<String> {
    let code = line.split("//").next().unwrap_or("");
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let after = &rest[i + "crate::".len()..];
        let preceded = rest[..i]
            .chars()
            .last()
            .is_some_and(|c| c.is_alphanumeric() || c == '_');
        if !preceded {
            if let Some(group) = after.strip_prefix('{') {
                out.extend(group_items(group).iter().map(|i| first_ident(i.trim())));
            } else {
                out.push(first_ident(after));
            }
        }
        rest = after;
    }
    out.retain(|m| !m.is_empty() && m != "self");
    out
}

/// The top-level items of a `{a::b, c::{d, e}}` group (text after `{`).
fn group_items(group: &str) -> Vec<&str> {
    let (mut depth, mut start, mut out) = (0, 0, Vec::new());
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                out.push(&group[start..i]);
                return out;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&group[start..]);
    out
}

fn first_ident(s: &str) -> String {
    s.chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

#[test]
fn no_use_crate_path_runs_against_the_data_flow() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rs_files(&src, &mut files);
    files.sort();
    let mut bad = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap().to_string_lossy().to_string();
        let from = rel
            .split('/')
            .next()
            .unwrap()
            .trim_end_matches(".rs")
            .to_string();
        if rel == "flow_tests.rs" {
            continue; // its examples are strings
        }
        let text = std::fs::read_to_string(f).unwrap();
        for (i, line) in text.lines().enumerate() {
            for to in targets(line) {
                if !allowed(&from, &to) {
                    bad.push(format!(
                        "src/{rel}:{}: {from} uses {to}: {}",
                        i + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{} use(s) against the module layers (src/flow_tests.rs, docs/ARCHITECTURE.md; \
         hint: move the code down, or let the lower module own a small trait the upper one implements):\n{}",
        bad.len(),
        bad.join("\n")
    );
}

#[test]
fn the_path_scanner_finds_grouped_and_inline_paths() {
    assert_eq!(targets("use crate::check::Validity;"), ["check"]);
    assert_eq!(
        targets("use crate::{history::Op, report::{a, b}};"),
        ["history", "report"]
    );
    assert_eq!(
        targets("let x = crate::runner::f(); // crate::cli"),
        ["runner"]
    );
    assert!(targets("//! see [`crate::runner`]").is_empty());
    assert!(!allowed("check", "report") && allowed("report", "check"));
    assert!(allowed("nemesis", "undo") && !allowed("nemesis", "runner"));
    assert!(allowed("nemesis", "workload") && !allowed("history", "check"));
    assert!(allowed("combination", "nemesis") && !allowed("service", "nemesis"));
    assert!(allowed("cluster", "client") && !allowed("client", "cluster"));
    assert!(allowed("undo", "process") && !allowed("undo", "remote"));
    assert!(!allowed("remote", "testbed") && !allowed("testbed", "remote"));
    assert!(!allowed("runner", "somewhere_new"));
}

/// Files that may be longer than [`MAX_FILE_LINES`]: one job each, long
/// by nature (the EDN reader, the proxy link's byte pump).
const LONG_FILES: &[&str] = &["history/edn.rs", "toxiproxy/link.rs"];
const MAX_FILE_LINES: usize = 600;
const MAX_FN_LINES: usize = 120;

/// Every file in `src/` with its path relative to `src/`, sorted.
fn src_files() -> Vec<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rs_files(&src, &mut files);
    files.sort();
    files
        .iter()
        .map(|f| {
            let rel = f.strip_prefix(&src).unwrap().to_string_lossy().to_string();
            (rel, std::fs::read_to_string(f).unwrap())
        })
        .collect()
}

/// The functions of a rustfmt-formatted file longer than `max` lines, as
/// (name, first line, lines): a `fn` line, then the body up to the `}`
/// at the same indentation.
fn long_functions(text: &str, max: usize) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_start();
        let indent = &l[..l.len() - t.len()];
        let Some(rest) = ["pub ", "pub(crate) ", "pub(super) ", "async ", "const ", ""]
            .iter()
            .find_map(|p| t.strip_prefix(p).and_then(|r| r.strip_prefix("fn ")))
            .or_else(|| t.strip_prefix("pub async fn "))
            .or_else(|| t.strip_prefix("pub(crate) async fn "))
        else {
            continue;
        };
        let name: String = first_ident(rest);
        // The signature ends at the first line ending in `{` (a body) or
        // `;` (a declaration).
        let Some(open) = (i..lines.len()).find(|&j| {
            let e = lines[j].trim_end();
            e.ends_with('{') || e.ends_with(';')
        }) else {
            continue;
        };
        if lines[open].trim_end().ends_with(';') {
            continue;
        }
        let close = format!("{indent}}}");
        if let Some(end) = (open + 1..lines.len()).find(|&j| lines[j].trim_end() == close) {
            let n = end - i + 1;
            if n > max {
                out.push((name, i + 1, n));
            }
        }
    }
    out
}

#[test]
fn files_and_functions_stay_short() {
    let mut bad = Vec::new();
    for (rel, text) in src_files() {
        let n = text.lines().count();
        if n > MAX_FILE_LINES && !LONG_FILES.contains(&rel.as_str()) {
            bad.push(format!("src/{rel}: {n} lines (at most {MAX_FILE_LINES})"));
        }
        for (name, line, n) in long_functions(&text, MAX_FN_LINES) {
            bad.push(format!(
                "src/{rel}:{line}: fn {name} is {n} lines (at most {MAX_FN_LINES})"
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "too long (hint: split a file by job, a function into named steps):\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_length_scanner_finds_a_long_function() {
    let body = "    x();\n".repeat(130);
    let text = format!("impl A {{\n    pub async fn long(\n        a: u8,\n    ) {{\n{body}    }}\n\n    fn short() {{}}\n}}\n");
    let found = long_functions(&text, MAX_FN_LINES);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, "long");
    assert_eq!(found[0].2, 134);
    assert!(long_functions(&text, 200).is_empty());
}
