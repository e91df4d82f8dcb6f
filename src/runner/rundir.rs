//! The run directory and `run.json`.
//!
//! ```text
//! histories/<system>-<workload>-<nemesis>-<UTC time>/   (or --out DIR)
//!   history.jsonl   meta record first, then every op, streamed
//!   run.json        every parameter, seed, versions, effective lease, outcome
//!   results.json    the checker's report
//!   nemesis.json    every injection (landed inside, kill gaps)
//!   undo.jsonl      the undo log (`lockjaw heal DIR` replays it)
//!   logs/           server logs (NODE.log) and worker stderr (worker-N.log)
//!   workers/        the worker specs
//!   cluster.json    the local cluster's state file
//! histories/latest → the newest run directory
//! ```

use super::analysis::LeaseRange;
use crate::nemesis::NemesisSpec;
use crate::service::System;
use crate::storage::Fencing;
use crate::workload::Workload;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

pub const HISTORY: &str = "history.jsonl";
pub const RUN: &str = "run.json";
pub const RESULTS: &str = "results.json";
pub const NEMESIS: &str = "nemesis.json";

/// A node as `run.json` lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeSummary {
    pub name: String,
    pub addr: String,
    pub role: String,
    /// What the node said its version is (None if it did not answer).
    pub version: Option<String>,
}

/// Running totals at the end of the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Counts {
    pub ops: u64,
    pub grants: u64,
    pub writes: u64,
    pub stale_rejected: u64,
    pub infos: u64,
    pub faults: u64,
    pub workers_started: u64,
    /// Steps and grants as the workers counted them (also with recording off).
    pub worker_steps: u64,
    pub worker_grants: u64,
    /// Protected writes the workers' lease guards abandoned (workload
    /// `lease_guard = "on"`): never sent, so not in the history.
    #[serde(default)]
    pub abandoned_writes: u64,
}

/// `run.json`: everything needed to understand and repeat the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    /// The run's id: its cgroups (`lockjaw/ID/NODE`), iptables comments
    /// (`lockjaw:ID ...`) and Toxiproxy proxy names (`lockjaw-ID-...`)
    /// carry it, so parallel runs on one host never share a name. Empty in
    /// run directories written before run ids existed.
    #[serde(default)]
    pub run_id: String,
    pub lockjaw_version: String,
    /// The command line that started the run.
    pub command: Vec<String>,
    pub system: System,
    /// True when lockjaw started the cluster (here or on `--hosts`).
    pub local_cluster: bool,
    /// The hosts file the servers were started on (`--hosts`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hosts_file: Option<std::path::PathBuf>,
    pub endpoints: Vec<String>,
    pub nodes: Vec<NodeSummary>,
    pub server_version: Option<String>,
    /// Server settings the verdicts depend on, as the servers report them
    /// (Redis Cluster: `cluster-node-timeout`, `appendfsync`, ...).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub server_settings: std::collections::BTreeMap<String, String>,
    /// `--auth`: which credentials were used (TLS, the server name, the
    /// user name), never a secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<crate::auth::Summary>,
    /// `--attach`: each node's server as discovery found it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attached: Vec<super::attach::AttachedRecord>,
    pub toxiproxy_url: Option<String>,
    pub toxiproxy_embedded: bool,
    pub toxiproxy_version: Option<String>,
    /// `--client`: `builtin` (lockjaw's own) or an adapter.
    #[serde(default = "builtin")]
    pub client: String,
    /// The library a client adapter runs and its version (`redis-py 4.3.4`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_library: Option<String>,
    /// `--storage`.
    #[serde(default = "builtin_storage")]
    pub storage: crate::combination::StorageChoice,
    pub workload: Workload,
    pub nemesis: NemesisSpec,
    pub fencing: Fencing,
    pub seed: u64,
    /// The lease asked for.
    pub ttl_ms: u64,
    /// The leases the service actually granted.
    pub effective_lease_ms: Option<LeaseRange>,
    pub started_utc: String,
    pub finished_utc: Option<String>,
    pub duration_s: Option<f64>,
    pub counts: Counts,
    /// The storage's value read after healing (storage workloads).
    pub final_value: Option<Value>,
    /// `completed`, `interrupted` or `failed: ...`.
    pub outcome: String,
    pub exit_code: Option<u8>,
    /// `--pause-budget-ms`: the pause budget of the lease advice (else
    /// the workers' stall meters measure one, in stalls.json).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_budget_ms: Option<f64>,
    /// `--hosts`: the margin after a fault's planned end at which its dead
    /// man's switch on the host takes it back (`--dead-man-margin-ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_man_margin_ms: Option<u64>,
    /// `--max-rate` and `--max-workers` (`null`: not given).
    #[serde(default)]
    pub load: super::load::Load,
    /// Where the wall time went, phase by phase (`--timings` prints it).
    #[serde(default, skip_serializing_if = "super::timings::Timings::is_empty")]
    pub timings: super::timings::Timings,
    /// The local cluster the run used: its id, and whether an earlier run
    /// of its campaign used it first (`None`: no local cluster, or a run
    /// written before this was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<super::shared::ClusterUse>,
}

fn builtin() -> String {
    "builtin".into()
}

fn builtin_storage() -> crate::combination::StorageChoice {
    crate::combination::StorageChoice::Builtin
}

impl RunInfo {
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        write_json(&dir.join(RUN), self)
    }

    /// The `run.json` of the run in `dir`.
    pub fn read(dir: &Path) -> Result<RunInfo, String> {
        let path = dir.join(RUN);
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    }
}

/// Write `v` as pretty JSON atomically (temp file + rename).
pub fn write_json<T: Serialize>(path: &Path, v: &T) -> std::io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_string_pretty(v)?;
    std::fs::write(&tmp, text + "\n")?;
    std::fs::rename(&tmp, path)
}

/// A new run id: 8 random hex digits.
pub fn new_run_id() -> String {
    format!("{:08x}", rand::random::<u32>())
}

/// UTC now as used in directory names: `20261129T083450Z`.
pub fn utc_stamp() -> String {
    chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string()
}

/// UTC now for humans: RFC 3339.
pub fn utc_now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Create the run directory: `out` exactly if given (it must not hold a
/// run already), else a new `histories/<name>-<UTC>` with `latest` → it.
pub fn create(histories: &Path, name: &str, out: Option<&Path>) -> Result<PathBuf, String> {
    let dir = match out {
        Some(d) => {
            if d.join(HISTORY).exists() {
                return Err(format!(
                    "{} already holds a run (hint: choose an empty --out directory)",
                    d.display()
                ));
            }
            d.to_path_buf()
        }
        None => {
            let stamp = utc_stamp();
            let mut d = histories.join(format!("{name}-{stamp}"));
            let mut i = 2;
            while d.exists() {
                d = histories.join(format!("{name}-{stamp}-{i}"));
                i += 1;
            }
            d
        }
    };
    // Neither the group nor others may write in it (whatever the umask):
    // `lockjaw heal` refuses a run directory they could have changed.
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir.join("logs"))
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let dir = std::path::absolute(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if out.is_none() {
        link_latest(histories, &dir);
    }
    Ok(dir)
}

/// Point `histories/latest` at `dir` (relative, replaced atomically).
fn link_latest(histories: &Path, dir: &Path) {
    let Some(name) = dir.file_name() else { return };
    let tmp = histories.join(".latest.tmp");
    let _ = std::fs::remove_file(&tmp);
    if std::os::unix::fs::symlink(name, &tmp).is_ok() {
        let _ = std::fs::rename(&tmp, histories.join("latest"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The report reads run.json as the runner writes it: the fields its
    /// summary shows are found where `RunInfo` puts them.
    #[test]
    fn the_report_finds_what_run_json_holds() {
        let ov = crate::workload::Overrides {
            concurrency: Some(3),
            ..Default::default()
        };
        let workload = crate::workload::load("fenced-counter", &ov).unwrap();
        let info = RunInfo {
            run_id: "0123abcd".into(),
            client: "builtin".into(),
            client_library: None,
            storage: crate::combination::StorageChoice::Builtin,
            lockjaw_version: "0.1.0".into(),
            command: vec!["lockjaw".into(), "run".into(), "--seed".into(), "9".into()],
            system: System::Redis,
            local_cluster: true,
            hosts_file: None,
            endpoints: vec![],
            nodes: vec![],
            server_version: Some("7.0.15".into()),
            server_settings: Default::default(),
            auth: None,
            attached: Vec::new(),
            toxiproxy_url: None,
            toxiproxy_embedded: true,
            toxiproxy_version: None,
            ttl_ms: workload.ttl_ms,
            workload,
            nemesis: crate::nemesis::spec::load("pause-holder").unwrap(),
            fencing: Fencing::Off,
            seed: 9,
            effective_lease_ms: None,
            started_utc: utc_now(),
            finished_utc: None,
            duration_s: None,
            counts: Counts::default(),
            final_value: None,
            outcome: "completed".into(),
            exit_code: Some(0),
            pause_budget_ms: Some(25.0),
            dead_man_margin_ms: None,
            load: Default::default(),
            timings: Default::default(),
            cluster: None,
        };
        let results = r#"{"version": 1, "valid": true, "checkers": []}"#;
        let rd = crate::report::RunDir {
            dir: PathBuf::from("x"),
            run: serde_json::from_value(serde_json::to_value(&info).unwrap()).unwrap(),
            results: serde_json::from_str(results).unwrap(),
            verdict: None,
            nemesis: Value::Null,
        };
        let r = &rd.run;
        assert_eq!(r.run_id.as_deref(), Some("0123abcd"));
        assert_eq!(r.system.as_deref(), Some("redis"));
        assert_eq!(r.client.as_deref(), Some("builtin"));
        assert_eq!(r.storage.as_deref(), Some("builtin"));
        let name = |w: &Option<String>| w.clone();
        assert_eq!(
            name(&r.workload.as_ref().unwrap().name).as_deref(),
            Some("fenced-counter")
        );
        assert_eq!(
            name(&r.nemesis.as_ref().unwrap().name).as_deref(),
            Some("pause-holder")
        );
        assert_eq!(r.seed, Some(9));
        assert_eq!(r.pause_budget_ms, Some(25.0));
        assert_eq!(r.fencing_on(), Some(false));
        assert_eq!(r.lockjaw_version.as_deref(), Some("0.1.0"));
        assert_eq!(crate::report::summary::concurrency(&rd), Some(3));
    }

    #[test]
    fn new_dirs_are_unique_and_latest_follows() {
        let d = tempfile::tempdir().unwrap();
        let a = create(d.path(), "redis-lock-none", None).unwrap();
        let b = create(d.path(), "redis-lock-none", None).unwrap();
        assert_ne!(a, b);
        assert!(b.join("logs").is_dir());
        let latest = std::fs::read_link(d.path().join("latest")).unwrap();
        assert_eq!(latest, b.file_name().unwrap());
        std::fs::write(b.join(HISTORY), "").unwrap();
        let e = create(d.path(), "x", Some(&b)).unwrap_err();
        assert!(e.contains("hint"), "{e}");
    }
}
