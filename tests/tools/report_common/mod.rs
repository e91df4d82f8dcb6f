//! Test helpers for the report tests: a small deterministic simulator of a
//! fenced-counter run under a pause-holder (and optionally kill-holder)
//! nemesis, writing a whole run directory (history.jsonl with its meta
//! record, run.json, results.json). results.json is what the checker
//! writes (`lockjaw::check::check_history`), after asserting that its
//! verdict and counts agree with the simulator's own ground truth.

#![allow(dead_code)]

mod chromium;

pub use chromium::{chromium_dom, console_errors};
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};

/// What to simulate.
#[derive(Clone, Debug)]
pub struct Sim {
    pub workers: i64,
    /// Lock steps (acquire, read, hold, write, release).
    pub steps: usize,
    pub fencing: bool,
    /// Steps whose holder is paused past its lease.
    pub pauses: Vec<usize>,
    /// Steps whose holder is killed while holding.
    pub kills: Vec<usize>,
    /// Steps whose write times out (`info`), renumbering the worker.
    pub infos: Vec<usize>,
    pub seed: u64,
}

impl Default for Sim {
    fn default() -> Self {
        Sim {
            workers: 3,
            steps: 12,
            fencing: false,
            pauses: vec![4],
            kills: vec![],
            infos: vec![7],
            seed: 42,
        }
    }
}

const MS: u64 = 1_000_000;
const LEASE_MS: u64 = 2000;

#[derive(Default)]
struct W {
    lines: Vec<Value>,
    t: u64,
    fence: u64,
    seq: u64,
    counter: i64,
    acked: u64,
    /// Process number of each worker (bumped after an info).
    procs: Vec<i64>,
    rng: u64,
    stale: Vec<Value>,
    holders: Vec<Value>,
}

impl W {
    fn op(&mut self, time: u64, process: Value, kind: &str, f: &str, extra: Value) -> u64 {
        let index = self.lines.len() as u64;
        let mut o = json!({"index": index, "time": time, "process": process, "type": kind, "f": f});
        if let Value::Object(e) = extra {
            o.as_object_mut().unwrap().extend(e);
        }
        self.lines.push(o);
        index
    }
    fn jitter(&mut self, max_us: u64) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng % max_us.max(1)) * 1000
    }
    /// A complete op: invoke at `self.t`, completion `lat` later.
    fn pair(
        &mut self,
        p: Value,
        f: &str,
        inv: Value,
        kind: &str,
        done: Value,
        lat: u64,
    ) -> (u64, u64) {
        let t0 = self.t;
        let a = self.op(t0, p.clone(), "invoke", f, inv);
        self.t += lat;
        let b = self.op(self.t, p, kind, f, done);
        (a, b)
    }
    fn seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }
}

fn grant(owner: &str, p: i64, fence: u64, op: u64, inv: u64, done: u64) -> Value {
    json!({"owner": owner, "process": p.to_string(), "fence": fence, "acquire_op": op,
           "invoked_ns": inv, "completed_ns": done, "lease_ms": LEASE_MS})
}

fn secs(ns: u64) -> String {
    format!("{:.3} s", ns as f64 / 1e9)
}

impl Sim {
    /// Simulate and write the run directory into `dir`.
    pub fn write(&self, dir: &Path) -> PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        let mut w = W {
            procs: (0..self.workers).collect(),
            rng: self.seed | 1,
            t: 5 * MS,
            ..W::default()
        };
        for step in 0..self.steps {
            self.step(&mut w, step);
        }
        let (fa, fb) = w.pair(
            json!("final"),
            "read",
            json!({"key": "counter"}),
            "ok",
            json!({"key": "counter"}),
            MS,
        );
        let s = w.seq();
        let c = w.counter;
        w.lines[fb as usize]
            .as_object_mut()
            .unwrap()
            .extend([("value".into(), json!(c)), ("seq".into(), json!(s))]);
        let _ = fa;
        self.write_files(dir, &w, fb);
        dir.to_path_buf()
    }

    fn step(&self, w: &mut W, step: usize) {
        let c = self.workers;
        let slot = (step as i64) % c;
        let p = w.procs[slot as usize];
        let other = w.procs[((slot + 1) % c) as usize];
        w.t += 5 * MS + w.jitter(3000);
        w.fence += 1;
        let (fence, owner) = (w.fence, format!("L{}", w.fence));
        let t_inv = w.t;
        let lat = MS + w.jitter(2000);
        let (_, acq) = w.pair(
            json!(p),
            "acquire",
            json!({"key": "lock"}),
            "ok",
            json!({"key": "lock", "fence": fence, "owner": owner, "lease_ms": LEASE_MS}),
            lat,
        );
        let g = grant(&owner, p, fence, acq, t_inv, w.t);
        // Another worker tries and finds it held.
        w.pair(
            json!(other),
            "acquire",
            json!({"key": "lock"}),
            "fail",
            json!({"key": "lock", "error": "held"}),
            MS,
        );
        let s = w.seq();
        let v = w.counter;
        let (_, rd) = w.pair(
            json!(p),
            "read",
            json!({"key": "counter", "fence": fence}),
            "ok",
            json!({"key": "counter", "fence": fence, "value": v, "seq": s}),
            MS / 2,
        );
        let _ = rd;
        if step == 2 {
            let lp = json!(format!("{p}-lease"));
            w.pair(
                lp,
                "renew",
                json!({"key": "lock", "owner": owner}),
                "ok",
                json!({"key": "lock", "owner": owner, "lease_ms": LEASE_MS}),
                MS,
            );
        }
        if self.kills.contains(&step) {
            return self.kill(w, slot, g);
        }
        let paused = self.pauses.contains(&step);
        if paused {
            self.pause(w, slot, &g, v);
        }
        w.t += 20 * MS;
        let info = self.infos.contains(&step);
        let s = w.seq();
        let stale = paused && self.fencing;
        let kind = if info {
            "info"
        } else if stale {
            "fail"
        } else {
            "ok"
        };
        let mut done = json!({"key": "counter", "fence": fence, "value": v + 1});
        match kind {
            "ok" => done["seq"] = json!(s),
            "fail" => {
                done["seq"] = json!(s);
                done["error"] = json!("stale-fence");
            }
            _ => done["error"] = json!("timeout"),
        }
        let (_, wr) = w.pair(
            json!(p),
            "write",
            json!({"key": "counter", "fence": fence, "value": v + 1}),
            kind,
            done,
            MS / 2,
        );
        if kind == "ok" {
            w.acked += 1;
            if paused {
                self.stale_witness(w, &g, wr, v + 1, s);
            } else {
                w.counter = v + 1;
            }
        }
        let rp = if info {
            w.procs[slot as usize] += c;
            w.procs[slot as usize]
        } else {
            p
        };
        let inv = json!({"key": "lock", "owner": owner, "fence": fence});
        let rel = if paused {
            (
                "fail",
                json!({"key": "lock", "owner": owner, "fence": fence, "error": "not-held"}),
            )
        } else {
            ("ok", inv.clone())
        };
        w.pair(json!(rp), "release", inv, rel.0, rel.1, MS);
    }

    /// The holder of `g` pauses past its lease; the next worker acquires,
    /// reads, writes and releases meanwhile.
    fn pause(&self, w: &mut W, slot: i64, g: &Value, v: i64) {
        let c = self.workers;
        let victim = g["process"].as_str().unwrap().to_string();
        w.t += MS;
        w.pair(
            json!("nemesis"),
            "pause-holder",
            json!({"value": {"phase": "start", "target": victim}}),
            "info",
            json!({"value": {"phase": "start", "target": victim, "landed_inside": true}}),
            MS / 10,
        );
        let start = w.t;
        let q = w.procs[((slot + 1) % c) as usize];
        for _ in 0..3 {
            w.t += 600 * MS;
            w.pair(
                json!(q),
                "acquire",
                json!({"key": "lock"}),
                "fail",
                json!({"key": "lock", "error": "held"}),
                MS,
            );
        }
        w.t = start + (LEASE_MS + 150) * MS;
        w.fence += 1;
        let (fence, owner) = (w.fence, format!("L{}", w.fence));
        let inv = w.t;
        let (_, acq) = w.pair(
            json!(q),
            "acquire",
            json!({"key": "lock"}),
            "ok",
            json!({"key": "lock", "fence": fence, "owner": owner, "lease_ms": LEASE_MS}),
            MS,
        );
        let g2 = grant(&owner, q, fence, acq, inv, w.t);
        let s = w.seq();
        w.pair(
            json!(q),
            "read",
            json!({"key": "counter", "fence": fence}),
            "ok",
            json!({"key": "counter", "fence": fence, "value": v, "seq": s}),
            MS / 2,
        );
        w.t += 20 * MS;
        let s = w.seq();
        let (_, wr) = w.pair(
            json!(q),
            "write",
            json!({"key": "counter", "fence": fence, "value": v + 1}),
            "ok",
            json!({"key": "counter", "fence": fence, "value": v + 1, "seq": s}),
            MS / 2,
        );
        w.acked += 1;
        w.counter = v + 1;
        let rel = json!({"key": "lock", "owner": owner, "fence": fence});
        w.pair(json!(q), "release", rel.clone(), "ok", rel, MS);
        w.t += 200 * MS;
        w.pair(
            json!("nemesis"),
            "pause-holder",
            json!({"value": {"phase": "stop", "target": victim}}),
            "info",
            json!({"value": {"phase": "stop", "target": victim}}),
            MS / 10,
        );
        let lease_over = g["invoked_ns"].as_u64().unwrap() + LEASE_MS * MS;
        w.holders.push(json!({"kind": "stale", "key": "lock", "holder": g, "next": g2,
            "lease_over_by_ns": lease_over, "text": format!("owner {} (fence {}) still held the lock when owner {} acquired fence {} (op {}), {} after its lease had ended",
                g["owner"].as_str().unwrap(), g["fence"], owner, fence, acq, secs(inv - lease_over))}));
        w.stale
            .push(json!({"newer": g2, "seen_op": wr, "seen_seq": s}));
    }

    fn stale_witness(&self, w: &mut W, g: &Value, op: u64, value: i64, seq: u64) {
        let newer = w.stale.last().cloned().unwrap();
        let g2 = &newer["newer"];
        let lease_over = g["invoked_ns"].as_u64().unwrap() + LEASE_MS * MS;
        let text = format!(
            "owner {} acquired fence {} at {} (op {}); its lease ended by {}; owner {} acquired fence {} at {} (op {}); {} wrote counter={} with fence {} (op {}) and the storage ACCEPTED it after seeing fence {} (op {})",
            g["owner"].as_str().unwrap(), g["fence"], secs(g["completed_ns"].as_u64().unwrap()), g["acquire_op"],
            secs(lease_over), g2["owner"].as_str().unwrap(), g2["fence"], secs(g2["completed_ns"].as_u64().unwrap()), g2["acquire_op"],
            g["owner"].as_str().unwrap(), value, g["fence"], op, g2["fence"], newer["seen_op"]);
        let i = w.stale.len() - 1;
        w.stale[i] = json!({"kind": "stale-write-accepted", "text": text, "key": "counter",
            "request": {"f": "write", "process": g["process"], "owner": g["owner"], "fence": g["fence"], "op": op, "seq": seq, "value": value},
            "seen": {"f": "write", "process": g2["process"], "owner": g2["owner"], "fence": g2["fence"], "op": newer["seen_op"], "seq": newer["seen_seq"]},
            "order": "seq", "stale_grant": g, "newer_grant": g2, "stale_lease_over_by_ns": lease_over});
    }

    /// The holder is killed while holding; its worker comes back under a
    /// new process number after its lease ran out.
    fn kill(&self, w: &mut W, slot: i64, g: Value) {
        let victim = g["process"].as_str().unwrap().to_string();
        w.t += 5 * MS;
        w.pair(
            json!("nemesis"),
            "kill-holder",
            json!({"value": {"phase": "start", "target": victim}}),
            "info",
            json!({"value": {"phase": "start", "target": victim}}),
            MS / 10,
        );
        w.procs[slot as usize] += self.workers;
        w.t = g["invoked_ns"].as_u64().unwrap() + (LEASE_MS + 30) * MS;
        w.pair(
            json!("nemesis"),
            "kill-holder",
            json!({"value": {"phase": "stop", "target": victim}}),
            "info",
            json!({"value": {"phase": "stop", "target": victim}}),
            MS / 10,
        );
    }

    fn write_files(&self, dir: &Path, w: &W, final_op: u64) {
        let meta = json!({"type": "meta", "checkers": ["lock"], "workload": "fenced-counter", "acquire_sets_ttl": true,
            "initial": 0, "system": "redis", "fencing": self.fencing, "concurrency": self.workers});
        let mut f =
            std::io::BufWriter::new(std::fs::File::create(dir.join("history.jsonl")).unwrap());
        writeln!(f, "{meta}").unwrap();
        for l in &w.lines {
            writeln!(f, "{l}").unwrap();
        }
        f.flush().unwrap();
        let nemesis = if self.kills.is_empty() {
            "pause-holder"
        } else {
            "kill-holder"
        };
        let fencing = if self.fencing { "on" } else { "off" };
        // run.json in the shape `lockjaw run` writes it (RunInfo).
        let run = json!({"run_id": "5eed0001", "system": "redis", "fencing": fencing, "seed": self.seed,
            "ttl_ms": LEASE_MS, "effective_lease_ms": {"min": LEASE_MS, "max": LEASE_MS},
            "workload": {"name": "fenced-counter", "kind": "fenced-counter", "concurrency": self.workers,
                         "ttl_ms": LEASE_MS, "time_limit_s": 10.0},
            "nemesis": {"name": nemesis, "fault": nemesis},
            "command": ["lockjaw", "run", "--system", "redis", "--workload", "fenced-counter", "--nemesis", nemesis,
                     "--fencing", fencing, "--time-limit", "10", "--seed", self.seed.to_string()],
            "lockjaw_version": "0.1.0", "server_version": "redis 7.0.15"});
        std::fs::write(
            dir.join("run.json"),
            serde_json::to_string_pretty(&run).unwrap(),
        )
        .unwrap();
        // results.json is what the checker writes; the simulation's own
        // account of what it injected must agree with its verdict and counts.
        let expected = self.results(w, final_op);
        let checked =
            lockjaw::check::check_history(&dir.join("history.jsonl"), &Default::default())
                .expect("the simulated history is readable");
        let lock = serde_json::to_value(checked.lock.as_ref().expect("a lock report")).unwrap();
        assert_eq!(lock["valid"], expected["valid"], "{lock}");
        for c in ["safety", "fence_order", "stale_writes", "lost_updates"] {
            assert_eq!(
                lock["checks"][c]["count"], expected["checks"][c]["count"],
                "{c}: the checker and the simulation disagree"
            );
        }
        std::fs::write(dir.join("results.json"), checked.to_json_pretty()).unwrap();
    }

    fn results(&self, w: &W, final_op: u64) -> Value {
        let stale: Vec<Value> = w
            .stale
            .iter()
            .filter(|s| s.get("text").is_some())
            .cloned()
            .collect();
        let n_stale = stale.len() as u64;
        let lost = w.acked as i64 - w.counter;
        let lost_w: Vec<Value> = if lost > 0 {
            vec![
                json!({"kind": "lost-updates", "key": "counter", "initial": 0, "final_value": w.counter, "final_read_op": final_op,
                "acknowledged": w.acked, "indeterminate": self.infos.len(), "lost": lost, "phantom": 0,
                "text": format!("{} acknowledged increments of counter, but the final read (op {final_op}) shows {}: {lost} update(s) lost", w.acked, w.counter)}),
            ]
        } else {
            vec![]
        };
        let v = |bad: bool| json!(!bad);
        let check = |bad: bool, count: u64, wit: Vec<Value>, counts: Value| json!({"valid": v(bad), "applicable": true, "count": count, "counts": counts, "witnesses": wit});
        let resource_bad = n_stale > 0 || lost > 0;
        json!({
            "valid": v(resource_bad),
            "service": {"valid": true, "applicable": true},
            "resource": {"valid": v(resource_bad), "applicable": true},
            "checks": {
                "safety": check(false, 0, vec![], json!({})),
                "fence_order": check(false, 0, vec![], json!({})),
                "mutex": {"valid": true, "applicable": false, "count": 0, "witnesses": []},
                "stale_writes": check(n_stale > 0, n_stale, stale, json!({})),
                "lost_updates": check(lost > 0, lost.max(0) as u64, lost_w, json!({"lost": lost, "acknowledged": w.acked})),
            },
            "stale_holders": {"stale": w.holders.len(), "possibly_stale": 0, "list": w.holders},
            "notes": []
        })
    }
}

/// The value of attribute `name` in an opening tag's text.
pub fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let tag = tag.split('>').next()?;
    let needle = format!(" {name}=\"");
    let start = tag.find(&needle)? + needle.len();
    Some(&tag[start..start + tag[start..].find('"')?])
}

/// Values of `name` on elements whose opening tag contains `marker`.
pub fn attrs<'a>(html: &'a str, marker: &str, name: &str) -> Vec<&'a str> {
    html.split('<')
        .filter(|tag| tag.split('>').next().is_some_and(|t| t.contains(marker)))
        .filter_map(|tag| attr(tag, name))
        .collect()
}

/// The page without its `<script>` elements (their text holds markup too).
pub fn without_scripts(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    while let Some(i) = rest.find("<script") {
        out.push_str(&rest[..i]);
        rest = rest[i..]
            .find("</script>")
            .map_or("", |j| &rest[i + j + 9..]);
    }
    out + rest
}

pub fn run_report(dir: &Path) -> std::process::Output {
    lockjaw()
        .arg("report")
        .arg(dir)
        .output()
        .expect("lockjaw runs")
}

/// The lockjaw binary cargo built for these tests.
pub fn lockjaw() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_lockjaw"))
}
