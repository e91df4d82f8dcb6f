//! `--shard K/N` for the static plans (`compare`, `bugs table`, `run
//! --runs`): which units of a plan shard K runs, and the manifest each
//! shard writes (`shard.json`) so that `lockjaw merge` can check that its
//! shards belong together and rebuild the unsharded tables.
//!
//! A plan is a list of units (a compare cell with all its runs, a bug
//! row's side with all its runs, one run of `--runs`), computed from the
//! arguments alone, so every machine computes the same list. Shard K of N
//! takes the units at positions K-1, K-1+N, K-1+2N, ... (round robin over
//! the plan order, so every system and row is spread over the shards):
//! N shards cover the plan exactly once.
//!
//! The plan's hash covers what decides the results (the units and the
//! arguments each runs with, the seed), never what only places a shard
//! (its output directory, ports, `--jobs`).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The manifest's file name in a shard's output directory.
pub const MANIFEST: &str = "shard.json";

/// The manifest format this lockjaw writes and reads.
pub const FORMAT: u32 = 1;

/// Shard `k` of `n` (1 ≤ k ≤ n).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub k: u32,
    pub n: u32,
}

impl Shard {
    /// Whether the unit at `position` (from 0) of a plan is this shard's.
    pub fn owns(&self, position: usize) -> bool {
        position % self.n as usize == (self.k - 1) as usize
    }

    /// Whether the unit named `key` is this shard's, by its hash (for a
    /// plan not known in advance: explore's fault points).
    pub fn owns_key(&self, key: &str) -> bool {
        let d = sha1_smol::Sha1::from(key).digest().bytes();
        let h = u64::from_be_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]]);
        h % u64::from(self.n) == u64::from(self.k - 1)
    }

    /// The positions of a plan of `len` units this shard runs.
    pub fn positions(&self, len: usize) -> Vec<usize> {
        (0..len).filter(|&i| self.owns(i)).collect()
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.k, self.n)
    }
}

/// clap's parser of `--shard K/N`.
pub fn shard_flag(s: &str) -> Result<Shard, String> {
    let hint = "(hint: --shard 2/4 is the second of four shards)";
    let (k, n) = s
        .split_once('/')
        .ok_or_else(|| format!("`{s}` is not K/N {hint}"))?;
    let num = |x: &str, what: &str| {
        x.trim()
            .parse::<u32>()
            .map_err(|_| format!("{what} `{x}` is not a whole number {hint}"))
    };
    let (k, n) = (num(k, "K")?, num(n, "N")?);
    if n == 0 || k == 0 || k > n {
        return Err(format!("{k}/{n}: K must be 1 to N, N at least 1 {hint}"));
    }
    Ok(Shard { k, n })
}

/// What every sharded command needs: a seed (else each machine would
/// draw its own from its clock) and an output directory (where the
/// manifest goes).
pub fn require(
    shard: Shard,
    seed: Option<u64>,
    out: Option<&Path>,
) -> Result<(u64, PathBuf), String> {
    let seed = seed.ok_or_else(|| {
        format!("--shard {shard} needs --seed: every shard must run the same plan with the same seeds (hint: --seed 1 on every machine)")
    })?;
    let out = out.map(Path::to_path_buf).ok_or_else(|| {
        format!("--shard {shard} needs --out DIR: the shard's runs and its manifest go there (hint: --out shard-{})", shard.k)
    })?;
    Ok((seed, out))
}

/// `shard.json`: what a shard ran and under what, for `lockjaw merge`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    /// `compare`, `bugs-table` or `runs`.
    pub command: String,
    /// The plan's hash (hex SHA-1 of its description, [`plan_hash`]).
    pub plan_hash: String,
    pub shard: Shard,
    pub seed: u64,
    pub lockjaw_version: String,
    /// Versions the shard's runs met: `<system> server` and each client
    /// adapter's library, as their run.json say (where known).
    pub versions: BTreeMap<String, String>,
    pub host: String,
    /// Every unit of the plan, in plan order.
    pub plan: Vec<String>,
    /// The units this shard ran.
    pub units: Vec<String>,
    /// Ctrl-C stopped the shard: some of its units did not run.
    pub interrupted: bool,
    /// What the command needs to rebuild its tables (its plan and each
    /// unit's outcome), in the command's own shape.
    pub data: serde_json::Value,
}

impl Manifest {
    /// A manifest of this lockjaw and host, versions from `run_dirs`.
    pub fn new<'a>(
        command: &str,
        plan_text: &[String],
        shard: Shard,
        seed: u64,
        plan: Vec<String>,
        run_dirs: impl Iterator<Item = &'a Path>,
    ) -> Manifest {
        let units = shard
            .positions(plan.len())
            .into_iter()
            .map(|i| plan[i].clone())
            .collect();
        Manifest {
            format: FORMAT,
            command: command.into(),
            plan_hash: plan_hash(plan_text),
            shard,
            seed,
            lockjaw_version: env!("CARGO_PKG_VERSION").into(),
            versions: versions(run_dirs),
            host: host(),
            plan,
            units,
            interrupted: false,
            data: serde_json::Value::Null,
        }
    }

    /// Write `dir/shard.json`.
    pub fn write(&self, dir: &Path) -> Result<(), String> {
        let path = dir.join(MANIFEST);
        std::fs::create_dir_all(dir)
            .and_then(|()| super::rundir::write_json(&path, self))
            .map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Read `dir/shard.json`; an error naming the file.
    pub fn read(dir: &Path) -> Result<Manifest, String> {
        let path = dir.join(MANIFEST);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            format!(
                "{}: {e} (hint: give the --out DIR of a `--shard K/N` run)",
                path.display()
            )
        })?;
        let m: Manifest = serde_json::from_str(&text)
            .map_err(|e| format!("{}: line {}: {e}", path.display(), e.line()))?;
        if m.format != FORMAT {
            return Err(format!(
                "{}: manifest format {} (this lockjaw reads {FORMAT})",
                path.display(),
                m.format
            ));
        }
        Ok(m)
    }
}

/// The hex SHA-1 of a plan's description, one line per part.
pub fn plan_hash(parts: &[String]) -> String {
    let mut h = sha1_smol::Sha1::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update(b"\n");
    }
    h.digest().to_string()
}

/// This machine's host name (`?` when it cannot be read).
pub fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}

/// The servers' and client libraries' versions in these run directories'
/// run.json (the first one seen of each; unreadable ones are skipped).
pub fn versions<'a>(dirs: impl Iterator<Item = &'a Path>) -> BTreeMap<String, String> {
    let mut v = BTreeMap::new();
    for d in dirs {
        let Ok(info) = super::rundir::RunInfo::read(d) else {
            continue;
        };
        if let Some(s) = info.server_version {
            v.entry(format!("{} server", info.system)).or_insert(s);
        }
        if let Some(l) = info.client_library {
            v.entry(info.client.clone()).or_insert(l);
        }
    }
    v
}

/// `dir` relative to `out` when it lies beneath it (however either is
/// spelled: relative, absolute, through links), else as it is.
pub fn beneath(dir: &Path, out: &Path) -> String {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let rel = dir
        .strip_prefix(out)
        .ok()
        .map(Path::to_path_buf)
        .or_else(|| {
            canon(dir)
                .strip_prefix(canon(out))
                .ok()
                .map(Path::to_path_buf)
        });
    rel.unwrap_or_else(|| dir.to_path_buf())
        .display()
        .to_string()
}

/// `args` without the flags that only place a run (ports, output,
/// progress), for a plan's hash.
pub fn placement_free(args: &[String]) -> Vec<String> {
    let mut out = vec![];
    let mut skip = false;
    for a in args {
        if std::mem::take(&mut skip) {
            continue;
        }
        match a.as_str() {
            "--base-port" | "--out" | "--histories" | "--jobs" => skip = true,
            "--no-progress" => {}
            a if ["--base-port=", "--out=", "--histories=", "--jobs="]
                .iter()
                .any(|p| a.starts_with(p)) => {}
            _ => out.push(a.clone()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn n_shards_cover_a_plan_exactly_once() {
        for n in 1..6u32 {
            for len in 0..13usize {
                let mut seen = vec![0; len];
                for k in 1..=n {
                    for i in (Shard { k, n }).positions(len) {
                        seen[i] += 1;
                    }
                }
                assert!(seen.iter().all(|&c| c == 1), "n {n} len {len}: {seen:?}");
            }
        }
    }

    #[test]
    fn keys_go_to_exactly_one_shard_and_spread() {
        let keys: Vec<String> = (0..200)
            .map(|i| format!("pause-holder@acquire-{i}"))
            .collect();
        let n = 3;
        let mut counts = [0; 3];
        for key in &keys {
            let owners: Vec<u32> = (1..=n).filter(|&k| Shard { k, n }.owns_key(key)).collect();
            assert_eq!(owners.len(), 1, "{key}");
            counts[owners[0] as usize - 1] += 1;
        }
        assert!(counts.iter().all(|&c| c > 40), "{counts:?}");
        assert!(Shard { k: 1, n: 1 }.owns_key("anything"));
    }

    #[test]
    fn the_flag_takes_k_of_n_and_refuses_the_rest() {
        assert_eq!(shard_flag("2/4"), Ok(Shard { k: 2, n: 4 }));
        for bad in ["0/4", "5/4", "1/0", "2", "a/4", "1/-2"] {
            assert!(shard_flag(bad).unwrap_err().contains("hint"), "{bad}");
        }
    }

    #[test]
    fn placement_flags_do_not_change_the_plan() {
        let a = |v: &[&str]| placement_free(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(
            a(&[
                "--seed",
                "1",
                "--base-port",
                "39600",
                "--out",
                "x",
                "--no-progress"
            ]),
            a(&["--seed", "1", "--base-port=39700", "--jobs", "2"])
        );
        assert_ne!(a(&["--seed", "1"]), a(&["--seed", "2"]));
    }
}
