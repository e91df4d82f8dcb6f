//! The checker's benchmark: `cargo bench --bench check`.
//!
//! In-process parse + search time per reference history in
//! `tests/corpus/` (or `LOCKJAW_CORPUS`; median of `LOCKJAW_BENCH_REPS` runs, default 5),
//! group totals and the slowest files; Porcupine's kv files per key and as
//! one state (c50 as one state under `LOCKJAW_BENCH_C50_TIMEOUT` seconds,
//! default 60); then a generated 1,000,000-op cas-register history over
//! 1,000 keys, checked by the `lockjaw` binary in a child process so its
//! wall time and peak memory (max RSS) are its own.

use lockjaw::check::linear::{check_file, LinOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Case {
    group: String,
    file: PathBuf,
    opts: LinOptions,
}

fn corpus_cases(corpus: &Path) -> Vec<Case> {
    let mut cases = Vec::new();
    for folder in ["porcupine", "knossos"] {
        let text = std::fs::read_to_string(corpus.join(folder).join("expected.tsv")).unwrap();
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap().split('\t').collect();
        let col = |n: &str| header.iter().position(|h| *h == n);
        for l in lines.filter(|l| !l.is_empty()) {
            let f: Vec<&str> = l.split('\t').collect();
            let file = f[col("file").unwrap()];
            let model = f[col("model").unwrap()].to_string();
            let group = match (folder, model.as_str()) {
                ("porcupine", "kv") => "porcupine-kv per key",
                ("porcupine", _) => "porcupine-etcd",
                _ => "knossos",
            };
            let opts = LinOptions {
                model: Some(model.clone()),
                init: col("init")
                    .map(|i| lockjaw::history::parse_init(f[i]).expect("a valid init")),
                ..LinOptions::default()
            };
            let path = corpus.join(folder).join(file);
            if model == "kv" {
                let c50 = file.contains("c50");
                let timeout = Duration::from_secs(env_num("LOCKJAW_BENCH_C50_TIMEOUT", 60));
                cases.push(Case {
                    group: if c50 {
                        "porcupine-kv one state c50"
                    } else {
                        "porcupine-kv one state c01+c10"
                    }
                    .into(),
                    file: path.clone(),
                    opts: LinOptions {
                        one_state: true,
                        timeout: c50.then_some(timeout),
                        ..opts.clone()
                    },
                });
            }
            cases.push(Case {
                group: group.into(),
                file: path,
                opts,
            });
        }
    }
    cases
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn run_corpus(corpus: &Path) {
    let reps = env_num("LOCKJAW_BENCH_REPS", 5) as usize;
    let cases = corpus_cases(corpus);
    let mut rows: Vec<(String, String, f64, String)> = Vec::new();
    println!(
        "{:<34} {:<52} {:>10}  verdict",
        "group", "file", "median ms"
    );
    for c in &cases {
        // Long cases (c50 one state) run once.
        let n = if c.opts.timeout.is_some() { 1 } else { reps };
        let mut times = Vec::new();
        let mut verdict = String::new();
        for _ in 0..n {
            let t = Instant::now();
            let r = check_file(&c.file, &c.opts).unwrap();
            times.push(t.elapsed().as_secs_f64() * 1e3);
            verdict = r.valid.as_str().to_string();
        }
        let ms = median(times);
        let name = c
            .file
            .strip_prefix(corpus)
            .unwrap_or(&c.file)
            .display()
            .to_string();
        println!("{:<34} {:<52} {:>10.3}  {verdict}", c.group, name, ms);
        rows.push((c.group.clone(), name, ms, verdict));
    }
    println!("\ntotals per group (median per file, summed):");
    let mut groups: Vec<String> = Vec::new();
    for r in &rows {
        if !groups.contains(&r.0) {
            groups.push(r.0.clone());
        }
    }
    let mut grand = 0.0;
    for g in &groups {
        let mut in_g: Vec<&(String, String, f64, String)> =
            rows.iter().filter(|r| &r.0 == g).collect();
        let total: f64 = in_g.iter().map(|r| r.2).sum();
        grand += total;
        in_g.sort_by(|a, b| b.2.total_cmp(&a.2));
        let slow: Vec<String> = in_g
            .iter()
            .take(3)
            .map(|r| format!("{} {:.2} ms", r.1, r.2))
            .collect();
        println!(
            "  {g:<34} {:>4} files {total:>10.2} ms   slowest: {}",
            in_g.len(),
            slow.join(", ")
        );
    }
    println!("  {:<34} {:>4} files {grand:>10.2} ms", "all", rows.len());
}

/// Write a linearizable cas-register history: `n` ops over `keys` keys,
/// 50 client slots, ~0.5% of ops crash (info; the slot takes a new process).
fn generate(path: &Path, n: u64, keys: u64) {
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut rand = move |m: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % m
    };
    let slots = 50u64;
    let mut regs = vec![0i64; keys as usize];
    let mut proc_of = (0..slots).collect::<Vec<u64>>();
    let mut events: Vec<(u64, u8, String)> = Vec::with_capacity(2 * n as usize);
    for i in 0..n {
        let point = 10 * i + 1000;
        let slot = (i % slots) as usize;
        let (call, ret) = (point - rand(200), point + rand(200));
        let key = rand(keys);
        let reg = &mut regs[key as usize];
        let p = proc_of[slot];
        let (f, arg, res) = match rand(3) {
            0 => ("read", "null".to_string(), reg.to_string()),
            1 => {
                *reg = rand(5) as i64;
                ("write", reg.to_string(), reg.to_string())
            }
            _ => {
                let new = rand(5) as i64;
                let v = format!("[{},{}]", *reg, new);
                *reg = new;
                ("cas", v.clone(), v)
            }
        };
        events.push((call, 0, format!(r#"{{"time":{call},"process":{p},"type":"invoke","f":"{f}","key":"k{key}","value":{arg}}}"#)));
        if rand(200) == 0 && f != "read" {
            events.push((ret, 1, format!(r#"{{"time":{ret},"process":{p},"type":"info","f":"{f}","key":"k{key}","error":"timeout"}}"#)));
            proc_of[slot] += slots;
        } else {
            events.push((ret, 1, format!(r#"{{"time":{ret},"process":{p},"type":"ok","f":"{f}","key":"k{key}","value":{res}}}"#)));
        }
    }
    events.sort_by_key(|e| (e.0, e.1));
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    writeln!(out, r#"{{"type":"meta","model":"cas-register","init":0}}"#).unwrap();
    for (_, _, line) in events {
        writeln!(out, "{line}").unwrap();
    }
    out.flush().unwrap();
}

/// Wall time and peak RSS (KiB, as the child reports its own VmHWM) of
/// `lockjaw check FILE` in a child process.
fn run_child(path: &Path) -> (f64, u64, String) {
    let t = Instant::now();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lockjaw"))
        .args(["check", "--json", path.to_str().unwrap()])
        .output()
        .unwrap();
    let secs = t.elapsed().as_secs_f64();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let lin = &v["linearizable"];
    let stats = &v["stats"]["linearizable"];
    let rss = stats["peak_rss_bytes"].as_u64().unwrap_or(0) / 1024;
    let line = format!(
        "{}: {} ops, {} partitions, checker's own time {:.0} ms",
        lin["valid"],
        lin["ops"],
        lin["partitions"],
        stats["elapsed_ms"].as_f64().unwrap_or(0.0)
    );
    (secs, rss, line)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` lists; nothing to list here.
    }
    let corpus = std::env::var_os("LOCKJAW_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus"));
    if corpus.join("README.md").is_file() {
        run_corpus(&corpus);
    } else {
        println!(
            "corpus not found at {} (hint: it is committed under tests/corpus/; unset LOCKJAW_CORPUS or point it at a copy)",
            corpus.display()
        );
    }
    let n = env_num("LOCKJAW_BENCH_GEN_OPS", 1_000_000);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("generated.jsonl");
    let t = Instant::now();
    generate(&path, n, 1000);
    println!(
        "\ngenerated {n} ops over 1000 keys in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let runs: Vec<(f64, u64, String)> = (0..3).map(|_| run_child(&path)).collect();
    let secs = median(runs.iter().map(|r| r.0).collect());
    let rss = runs.iter().map(|r| r.1).max().unwrap_or(0);
    println!(
        "generated history: median {secs:.2} s over 3 runs, peak RSS {:.0} MiB",
        rss as f64 / 1024.0
    );
    println!("  {}", runs[0].2);
}
