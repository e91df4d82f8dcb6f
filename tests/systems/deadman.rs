//! The dead man's switch on the test bed: while a fault holds on an
//! attached etcd member, this machine's packets to that member's host are
//! dropped (an iptables rule the test makes inside the host's network
//! namespace, and removes), so lockjaw cannot take the fault back. The
//! switch lockjaw armed on the host before the fault does: a 10 s
//! `pause-node` ends (the member runs and answers again) and a 10 s
//! `partition-node` leaves no rule of the run, each at the fault's
//! planned end plus the margin, not before. Then the test gives the
//! network back, lets the run end, heals, and finds every member with
//! its pid, answering, no rule and no timer left. In `make test-long`.
//!
//! [`timers`] (no switch of a run is left on a machine) serves the short
//! runs of `attach_run` and `remote_hosts` too.

use crate::attach_util::{BedCluster, Control};
use crate::remote_hosts::host_rules;
use crate::run_util::*;
use lockjaw::process::proc_stat;
use lockjaw::testbed::{Bed, BedHost};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The processes of this machine (the bed's hosts share its process
/// table) whose environment carries a switch's tag of run `run_id`.
pub(crate) fn timers(run_id: &str) -> Vec<String> {
    assert!(!run_id.is_empty());
    let want = format!("LOCKJAW_DEADMAN=lockjaw-{run_id}-");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| {
                env.split(|b| *b == 0)
                    .any(|v| v.starts_with(want.as_bytes()))
            })
        })
        .map(|pid| format!("{pid}"))
        .collect()
}

/// The run's id, from its run.json.
pub(crate) fn run_id(dir: &Path) -> String {
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    v["run_id"].as_str().unwrap().to_string()
}

/// This machine's packets to one bed host dropped, inside the host's
/// namespace (INPUT from and OUTPUT to this machine's bed address); the
/// rules go when it is dropped.
struct Cut {
    netns: String,
    rules: Vec<Vec<String>>,
}

const CUT_COMMENT: &str = "deadman-test-cut";

fn iptables(netns: &str, args: &[String]) -> bool {
    std::process::Command::new("ip")
        .args(["netns", "exec", netns, "iptables", "-w"])
        .args(args)
        .status()
        .unwrap()
        .success()
}

impl Cut {
    fn new(bed: &Bed, h: &BedHost) -> Cut {
        let c = bed.control_address.to_string();
        let rule = |chain: &str, dir: &str| -> Vec<String> {
            [
                chain,
                dir,
                &c,
                "-m",
                "comment",
                "--comment",
                CUT_COMMENT,
                "-j",
                "DROP",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect()
        };
        let rules = vec![rule("INPUT", "-s"), rule("OUTPUT", "-d")];
        for r in &rules {
            let mut a = vec!["-I".to_string()];
            a.extend(r.iter().cloned());
            assert!(iptables(&h.netns, &a), "cut {}", h.name);
        }
        Cut {
            netns: h.netns.clone(),
            rules,
        }
    }
}

impl Drop for Cut {
    fn drop(&mut self) {
        for r in &self.rules {
            let mut a = vec!["-D".to_string()];
            a.extend(r.iter().cloned());
            iptables(&self.netns, &a);
        }
    }
}

/// Whether the member on bed host `h` answers its `/health` with a
/// healthy cluster, asked from inside the host's own namespace (this
/// machine's packets to it are dropped).
fn healthy_inside(h: &BedHost) -> bool {
    let script = format!(
        "exec 3<>/dev/tcp/{}/2379 && printf 'GET /health HTTP/1.0\\r\\n\\r\\n' >&3 && timeout 2 cat <&3",
        h.address
    );
    let out = std::process::Command::new("ip")
        .args([
            "netns", "exec", &h.netns, "timeout", "3", "bash", "-c", &script,
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).contains("\"health\":\"true\"")
}

/// A nemesis file: `fault` on the leader, 10 s, once, after 1 s.
fn ten_seconds(dir: &Path, fault: &str) -> PathBuf {
    let p = dir.join(format!("{fault}-10s.toml"));
    std::fs::write(
        &p,
        format!(
            "name = \"{fault}-10s\"\nfault = \"{fault}\"\ntarget = \"leader\"\n\
             first_delay_ms = 1000\nduration_ms = {HOLD_MS}\nmax_injections = 1\n"
        ),
    )
    .unwrap();
    p
}

const HOLD_MS: u64 = 10_000;
/// The default margin (`--dead-man-margin-ms` left out).
const MARGIN_MS: u64 = 10_000;

/// `lockjaw run --attach` with `nemesis`, long enough for the switch to
/// fire while this machine is cut off.
fn spawn_run(c: &BedCluster, dir: &Path, nemesis: &Path) -> Guard {
    Guard::spawn(
        lockjaw()
            .args(["run", "--system", "etcd", "--attach", "--hosts"])
            .arg(&c.hosts_file)
            .arg("--nemesis")
            .arg(nemesis)
            .args(["--time-limit", "32", "--ttl-ms", "2000", "--seed", "5"])
            .args(["--no-progress", "--out"])
            .arg(dir),
    )
}

/// Let the run end (network back), heal it, and check that nothing is
/// left: no rule, no timer, every member with its pid, answering.
async fn after(c: &BedCluster, mut g: Guard, dir: &Path, before: &[(String, u32)]) {
    let code = g.wait(Duration::from_secs(180));
    eprintln!(
        "run exited {code:?}; nemesis.json: {}",
        std::fs::read_to_string(dir.join("nemesis.json")).unwrap_or_default()
    );
    heal_ok(dir);
    assert_eq!(host_rules(&c.bed), Vec::<String>::new(), "no rule left");
    assert_eq!(timers(&run_id(dir)), Vec::<String>::new(), "no timer left");
    assert_eq!(c.pids(), before, "the same members");
    crate::attach_long::eventually_answer(c).await;
}

#[tokio::test]
#[ignore = "make test-long: the switch ends a 10 s pause and a 10 s partition on an attached etcd while lockjaw is cut off, ~90 s"]
async fn the_switch_ends_a_pause_and_a_partition_when_lockjaw_is_cut_off() {
    let c = BedCluster::etcd(Control::Pidfile).await;
    let t = tempfile::tempdir().unwrap();
    let before = c.pids();
    let planned = Duration::from_millis(HOLD_MS + MARGIN_MS);
    let state = |pid: u32| proc_stat(pid as i32).map(|s| s.state);

    // pause-node: the member stays stopped past the fault's end (lockjaw
    // cannot reach its host), until the switch continues it.
    let dir = t.path().join("pause");
    let g = spawn_run(&c, &dir, &ten_seconds(t.path(), "pause-node"));
    let mut paused = None;
    eventually("a member stopped", Duration::from_secs(90), || {
        paused = before
            .iter()
            .position(|(_, p)| matches!(state(*p), Some('T' | 't')));
        paused.is_some()
    });
    let stopped_at = Instant::now();
    let k = paused.unwrap();
    let (name, pid) = before[k].clone();
    let h = &c.bed.hosts[c.node(&name).host];
    let cut = Cut::new(&c.bed, h);
    eventually(
        "the switch continued it",
        planned + Duration::from_secs(20),
        || !matches!(state(pid), Some('T' | 't')),
    );
    let resumed = stopped_at.elapsed();
    eprintln!("pause-node on {name}: stopped for {resumed:?} (planned {HOLD_MS} ms + margin {MARGIN_MS} ms)");
    assert!(
        resumed + Duration::from_secs(1) >= planned,
        "not before the planned end and the margin: {resumed:?}"
    );
    let until = Instant::now() + Duration::from_secs(30);
    while !healthy_inside(h) {
        assert!(
            Instant::now() < until,
            "{name} answers again, lockjaw still cut off"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    drop(cut);
    after(&c, g, &dir, &before).await;

    // partition-node: the rules stay past the fault's end, until the
    // switch deletes them.
    let dir = t.path().join("cut");
    let g = spawn_run(&c, &dir, &ten_seconds(t.path(), "partition-node"));
    eventually("rules on a host", Duration::from_secs(90), || {
        !host_rules(&c.bed).is_empty()
    });
    let cut_at = Instant::now();
    // All 4 (2 peers, in and out): the fault is in place.
    eventually("4 rules", Duration::from_secs(10), || {
        host_rules(&c.bed).len() == 4
    });
    let rules = host_rules(&c.bed);
    let host = rules[0].split(':').next().unwrap().to_string();
    let h = c.bed.hosts.iter().find(|x| x.name == host).unwrap();
    let cut = Cut::new(&c.bed, h);
    eventually(
        "the switch deleted the rules",
        planned + Duration::from_secs(20),
        || host_rules(&c.bed).is_empty(),
    );
    let gone = cut_at.elapsed();
    eprintln!("partition-node on {host}: {} rules for {gone:?} (planned {HOLD_MS} ms + margin {MARGIN_MS} ms)", rules.len());
    assert!(
        gone + Duration::from_secs(1) >= planned,
        "not before the planned end and the margin: {gone:?}"
    );
    let until = Instant::now() + Duration::from_secs(30);
    while !healthy_inside(h) {
        assert!(
            Instant::now() < until,
            "{host}'s member answers again, lockjaw still cut off"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    drop(cut);
    after(&c, g, &dir, &before).await;
    c.down().await;
}
