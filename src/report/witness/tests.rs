//! The witness section on the committed witness fixtures
//! (histories/examples/witness/, issue 30): sentences, inline ops,
//! Mermaid, links, and when the files are (re)written.

use super::*;
use std::path::PathBuf;

fn fixture(kind: &str) -> Shown {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("histories/examples/witness")
        .join(minimal::file_name(kind));
    Shown {
        file: minimal::file_name(kind),
        w: minimal::read(&p).unwrap(),
    }
}

#[test]
fn issue30_stale_write_reads_as_three_plain_sentences() {
    let s = fixture("stale-write-accepted");
    let t = plain::sentences(&s.w);
    assert_eq!(
        t,
        [
            "Client A held the lock with fencing token 33 until its lease ran out at 1.013 s.",
            "Client B then acquired the lock at 1.510 s with fencing token 34 and read counter at 1.520 s.",
            "A then wrote counter=1 with token 33 at 5.000 s and the storage accepted it, although it had already seen B's newer token 34."
        ]
    );
}

#[test]
fn issue30_stale_write_inline_has_one_line_per_op_with_its_role() {
    let s = fixture("stale-write-accepted");
    let b = lines::block(&s.w);
    let l: Vec<&str> = b.lines().collect();
    assert_eq!(l.len(), 4, "{b}");
    assert!(l[0].starts_with("0.000 s  #0-1 "), "{b}");
    assert!(
        l[0].contains(" A  acquire lock → ok, fence 33, lease 1000 ms "),
        "{b}"
    );
    assert!(
        l[3].contains("A  write counter=1 fence 33 → ok, seq 4"),
        "{b}"
    );
    assert!(l[3].ends_with("# A's write with fence 33, accepted"), "{b}");
    assert!(
        l[2].contains("B  read counter fence 34 → ok, 0, seq 2"),
        "{b}"
    );
}

#[test]
fn issue30_stale_write_mermaid_names_clients_lock_and_storage() {
    let s = fixture("stale-write-accepted");
    let d = mermaid::diagram(&s.w);
    let l: Vec<&str> = d.lines().collect();
    assert_eq!(l[0], "sequenceDiagram");
    assert_eq!(l[1], "    participant A as A (owner a)");
    assert_eq!(l[2], "    participant B as B (owner b)");
    assert_eq!(l[3], "    participant L as lock service");
    assert_eq!(l[4], "    participant S as storage");
    assert!(d.contains("    A->>L: 0.000 s acquire lock\n"), "{d}");
    assert!(
        d.contains("    L-->>A: 0.010 s ok, fence 33, lease 1000 ms\n"),
        "{d}"
    );
    assert!(
        d.contains("    A->>S: 5.000 s write counter=1 fence 33\n"),
        "{d}"
    );
    assert!(
        d.contains("    Note over A: A's write with fence 33, accepted\n"),
        "{d}"
    );
    // Nothing Mermaid would read as markup or a statement break.
    assert!(!d.contains('#') && !d.contains(';'), "{d}");
}

#[test]
fn issue30_two_holders_sentences_and_markdown_section() {
    let s = fixture("safety-violation");
    let t = plain::sentences(&s.w);
    assert_eq!(
        t[0],
        "Client A was granted the lock 'lock' at 0.010 s with fencing token 1 and a lease of 1000 ms, so it held the lock at least until 0.997 s."
    );
    assert_eq!(
        t[1],
        "Client B was then granted the same lock at 0.110 s with fencing token 2, while A's lease was still valid and before A released it."
    );
    assert!(t[2].contains("mutual exclusion"));
    let md = markdown(std::slice::from_ref(&s), &[]);
    assert!(md.starts_with("## Witness histories\n"), "{md}");
    assert!(
        md.contains("[witness-safety-violation.jsonl](witness-safety-violation.jsonl): 8 of 8 op lines; minimal"),
        "{md}"
    );
    assert!(
        md.contains("```text\n0.000 s  #0-1  A  acquire lock"),
        "{md}"
    );
    assert!(md.contains("```mermaid\nsequenceDiagram\n"), "{md}");
    assert!(
        md.contains("    L-->>B: 0.110 s ok, fence 2, lease 1000 ms\n"),
        "{md}"
    );
}

#[test]
fn issue30_a_long_witness_is_a_link_and_its_size() {
    let s = fixture("lost-updates");
    assert!(s.w.info.witness_ops > INLINE_MAX);
    let md = markdown(std::slice::from_ref(&s), &[]);
    assert!(
        md.contains("[witness-lost-updates.jsonl](witness-lost-updates.jsonl): 34 of 770 op lines"),
        "{md}"
    );
    assert!(md.contains("34 op lines: too long to print here"), "{md}");
    assert!(md.contains("How the total is proven: every-write."), "{md}");
    assert!(
        !md.contains("```mermaid") && !md.contains("```text"),
        "{md}"
    );
    let t = plain::sentences(&s.w);
    assert!(
        t[1].starts_with("The final read of 'counter' (op "),
        "{t:?}"
    );
    assert!(
        t[2].starts_with("So 2 update(s) the storage had confirmed were lost"),
        "{t:?}"
    );
}

#[test]
fn issue30_non_linearizable_sentences_and_register_diagram() {
    let s = fixture("non-linearizable");
    let t = plain::sentences(&s.w);
    assert!(
        t[0].starts_with("These 2 operations on key 'x' by 2 clients"),
        "{t:?}"
    );
    assert!(t[1].contains("one copy of a cas-register"), "{t:?}");
    let d = mermaid::diagram(&s.w);
    assert!(d.contains("    participant p0 as process 0\n"), "{d}");
    assert!(d.contains("    participant R as cas-register\n"), "{d}");
    assert!(d.contains("    p1->>R: 0.003 s read x\n"), "{d}");
    assert!(d.contains("    R-->>p1: 0.004 s ok, 0\n"), "{d}");
}

#[test]
fn issue30_not_minimal_is_said_and_html_is_escaped_and_offline() {
    let mut s = fixture("safety-violation");
    s.w.info.minimal = false;
    s.w.info.oracle_calls = s.w.info.budget;
    let md = markdown(std::slice::from_ref(&s), &[]);
    assert!(
        md.contains("**not minimal**: the budget of 2000 checks ran out"),
        "{md}"
    );
    let h = html(
        std::slice::from_ref(&s),
        &["witness-x.jsonl: broken".into()],
    );
    assert!(
        h.contains("not minimal: the budget of 2000 checks ran out"),
        "{h}"
    );
    assert!(
        h.contains(r#"<a href="witness-safety-violation.jsonl">"#),
        "{h}"
    );
    assert!(h.contains("L--&gt;&gt;B: 0.110 s"), "{h}");
    assert!(
        h.contains("unreadable witness: witness-x.jsonl: broken"),
        "{h}"
    );
    assert!(!h.contains("http"), "no network assets: {h}");
    assert_eq!(markdown(&[], &[]), "");
    assert_eq!(html(&[], &[]), "");
}

#[test]
fn issue30_witness_files_are_rewritten_only_when_missing_or_older() {
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("history.jsonl");
    assert!(stale(dir.path(), &history), "no files: write them");
    std::fs::write(&history, "{}\n").unwrap();
    assert!(stale(dir.path(), &history));
    let s = fixture("safety-violation");
    let p = minimal::write(dir.path(), &s.w).unwrap();
    let later = modified(&history).unwrap() + std::time::Duration::from_secs(5);
    std::fs::File::options()
        .write(true)
        .open(&p)
        .unwrap()
        .set_modified(later)
        .unwrap();
    assert!(!stale(dir.path(), &history), "current files stay");
    let earlier = modified(&history).unwrap() - std::time::Duration::from_secs(5);
    std::fs::File::options()
        .write(true)
        .open(&p)
        .unwrap()
        .set_modified(earlier)
        .unwrap();
    assert!(stale(dir.path(), &history), "older than the history: again");
    std::fs::write(dir.path().join("witness-bad.jsonl"), "nope\n").unwrap();
    let (shown, errors) = load(dir.path());
    assert_eq!(shown.len(), 1);
    assert!(errors[0].starts_with("witness-bad.jsonl: "), "{errors:?}");
}

#[test]
fn issue30_ensure_leaves_a_valid_run_alone() {
    let dir = tempfile::tempdir().unwrap();
    let ex = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("histories/examples/redis-fenced-counter-pause-holder");
    for f in ["history.jsonl", "run.json", "results.json"] {
        std::fs::copy(ex.join(f), dir.path().join(f)).unwrap();
    }
    let r = std::fs::read_to_string(dir.path().join("results.json")).unwrap();
    let valid = r.replacen("\"valid\": false", "\"valid\": true", 1);
    assert_ne!(r, valid, "results.json starts with its verdict");
    std::fs::write(dir.path().join("results.json"), valid).unwrap();
    let made = ensure(dir.path(), &WitnessOptions::default()).unwrap();
    assert!(made.written.is_empty() && files(dir.path()).is_empty());
    assert!(ensure(&dir.path().join("nope"), &WitnessOptions::default()).is_err());
}

#[test]
fn issue30_two_leaders_read_as_split_brain() {
    let mut s = fixture("safety-violation");
    s.w.meta.params.insert("workload".into(), "leader".into());
    let t = plain::sentences(&s.w);
    assert!(
        t[0].starts_with("Client A was elected leader of 'lock' at 0.010 s"),
        "{t:?}"
    );
    assert!(t[1].contains("while A's term was still valid"), "{t:?}");
    assert!(t[2].contains("split brain"), "{t:?}");
}

#[test]
fn issue30_an_unknown_anomaly_still_gets_three_sentences() {
    let mut s = fixture("safety-violation");
    s.w.info.kind = "something-new".into();
    s.w.info.anomaly = serde_json::Value::Null;
    let t = plain::sentences(&s.w);
    assert_eq!(t.len(), 3);
    assert!(
        t[0].starts_with("The checker found a something-new anomaly: owner a (op 1)"),
        "{t:?}"
    );
    assert!(t[1].contains("between clients A, B"), "{t:?}");
    assert_eq!(t[2], "The ops that prove it are 1, 3.");
}

/// Every lock kind the committed example histories show gets three
/// filled-in sentences naming the clients by letter.
#[test]
fn issue30_every_lock_kind_reads_as_three_sentences() {
    use crate::check::lock::{check_file, LockOptions};
    use crate::history::jsonl::read_all;
    let ex = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("histories/examples/lock");
    let mut kinds = std::collections::BTreeSet::new();
    for f in [
        "fence-order",
        "mutex-violation",
        "set-lost",
        "phantom-write",
        "lost-update-unfenced",
    ] {
        let p = ex.join(format!("{f}.jsonl"));
        let r = serde_json::to_value(check_file(&p, &LockOptions::default()).unwrap()).unwrap();
        let (meta, ops) = read_all(&p).unwrap();
        for (check, c) in r["checks"].as_object().unwrap() {
            for a in c["witnesses"].as_array().unwrap() {
                let kind = a["kind"].as_str().unwrap().to_string();
                let owners: Vec<String> = ["first", "second"]
                    .iter()
                    .filter_map(|k| a[k]["owner"].as_str().map(str::to_string))
                    .collect();
                let mut w = fixture("safety-violation").w;
                w.meta = meta.clone().unwrap_or_default();
                w.ops = ops.clone();
                w.info.kind = kind.clone();
                w.info.check = check.clone();
                w.info.owners = owners.clone();
                w.info.anomaly = a.clone();
                let t = plain::sentences(&w);
                assert_eq!(t.len(), 3, "{f} {kind}: {t:?}");
                for s in &t {
                    assert!(s.ends_with('.') && !s.contains('{'), "{f} {kind}: {s}");
                    assert!(
                        !s.starts_with("The checker found"),
                        "{f} {kind}: generic {s}"
                    );
                }
                if !owners.is_empty() {
                    assert!(t[0].starts_with("Client A "), "{f} {kind}: {t:?}");
                    assert!(t[1].contains("Client B "), "{f} {kind}: {t:?}");
                }
                kinds.insert(kind);
            }
        }
    }
    for k in ["fence-order", "mutex-violation", "set-lost", "lost-updates"] {
        assert!(kinds.contains(k), "{k} among {kinds:?}");
    }
}
