//! Benchmarks of the lock checks.
//!
//! 1. criterion: `check_ops` on a simulated 50,000-op history in memory.
//! 2. The streaming goal: `check_file` on a simulated lock history of
//!    `LOCKJAW_BENCH_OPS` ops (default 10,000,000; 20 workers, 4 lock keys,
//!    fenced counters, keep-alive renewals, pauses past the lease, lines of
//!    paused workers written late). The file is generated once, by a child
//!    process, into `target/lock-bench/`; the parent then checks it and
//!    prints ops/s and its own peak RSS (getrusage), which therefore
//!    covers the check alone.
//!
//! Run: `cargo bench --bench lock_check` (add `-- --big-only` to skip 1).

use criterion::Criterion;
// The test-only simulator (its `SimBugs` re-export is unused here).
#[allow(unused_imports)]
#[path = "../tests/check/sim/mod.rs"]
mod sim;

use lockjaw::check::lock::{check_file, check_ops, LockOptions};
use lockjaw::history::jsonl::JsonlWriter;
use sim::{sim_meta, simulate, simulate_vec, SimConfig, SimWorkload};
use std::path::{Path, PathBuf};
use std::time::Instant;

fn big_config(ops: u64) -> SimConfig {
    SimConfig {
        seed: 42,
        workers: 20,
        lock_keys: 4,
        // About 21 ops per critical section with renewals and retries.
        steps: (ops / 20 / 21).max(1) as usize,
        lease_ms: 2000,
        sets_ttl: false,
        workload: SimWorkload::Counter,
        pause_prob: 0.01,
        late_prob: 0.5,
        info_prob: 0.001,
        ..SimConfig::default()
    }
}

fn generate(path: &Path, ops: u64) {
    let cfg = big_config(ops);
    let tmp = path.with_extension("partial");
    let mut w = JsonlWriter::create(&tmp, &sim_meta(&cfg)).expect("create history");
    let mut n = 0u64;
    simulate(&cfg, &mut |mut op| {
        w.write(&mut op).expect("write op");
        n += 1;
    });
    w.flush().unwrap();
    std::fs::rename(&tmp, path).unwrap();
    eprintln!("generated {n} ops into {}", path.display());
}

fn peak_rss_mib() -> f64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct we pass.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    u.ru_maxrss as f64 / 1024.0
}

fn big(ops: u64) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/lock-bench");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("lock-{ops}.jsonl"));
    if !path.exists() {
        let st = std::process::Command::new(std::env::current_exe().unwrap())
            .env("LOCKJAW_BENCH_GENERATE", &path)
            .env("LOCKJAW_BENCH_OPS", ops.to_string())
            .status()
            .unwrap();
        assert!(st.success(), "generator failed");
    }
    let size = std::fs::metadata(&path).unwrap().len();
    let t = Instant::now();
    let r = check_file(&path, &LockOptions::default()).unwrap();
    let secs = t.elapsed().as_secs_f64();
    println!(
        "lock_check/file: {} ops ({:.0} MB) in {:.2} s = {:.2} M ops/s; peak RSS {:.0} MiB; \
         verdict {}; passes {}; max lateness {:.0} ms; grants {}",
        r.stats.ops,
        size as f64 / 1e6,
        secs,
        r.stats.ops as f64 / secs / 1e6,
        peak_rss_mib(),
        r.valid.as_str(),
        r.stats.passes,
        r.stats.max_lateness_ms,
        r.stats.grants,
    );
}

fn small(c: &mut Criterion) {
    let cfg = SimConfig {
        seed: 7,
        workers: 8,
        steps: 500,
        ..SimConfig::default()
    };
    let (meta, ops, _) = simulate_vec(&cfg);
    let n = ops.len();
    c.bench_function(&format!("lock_check/check_ops {n} ops"), |b| {
        b.iter(|| check_ops(&meta, ops.iter().cloned().map(Ok)).unwrap())
    });
}

fn main() {
    let ops: u64 = std::env::var("LOCKJAW_BENCH_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000_000);
    if let Some(p) = std::env::var_os("LOCKJAW_BENCH_GENERATE") {
        generate(Path::new(&p), ops);
        return;
    }
    let big_only = std::env::args().any(|a| a == "--big-only");
    if !big_only {
        let mut c = Criterion::default().configure_from_args().sample_size(20);
        small(&mut c);
        c.final_summary();
    }
    big(ops);
}
