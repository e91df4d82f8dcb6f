//! `--shard K/N` and `lockjaw merge` on small real runs (Redis, 1-second
//! runs): three shards of a plan, run as separate processes at once on
//! their own port blocks, cover the plan exactly once; merging them gives
//! byte for byte the tables that rebuilding from the union of the same
//! run directories gives (compare: `compare --from-runs`; `--runs`: the
//! tally over the runs in order; bugs table: each side's columns as the
//! shard that ran it printed them; sweep: each (system, value) row's
//! tally as its shard's); merge refuses a missing, doubled or
//! foreign shard, naming it.
//!
//! `explore --shard` (make test-long): two shards of a 60-second explore
//! of lockjaw's own Redis client, each searching the points whose name
//! hashes to it, merged into their union.
//!
//! Ports: 39600-39999 (compare 39600-39699, runs 39700-39799, bugs
//! 39800-39899, sweep 39900-39999), a 25-port block per shard process,
//! its runs one after another.

use crate::run_util::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Output};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Start `lockjaw ARGS` for shards 1..=3, shard k with `--out root/sK`
/// and its port block at `base + step (k - 1)`; wait for all three.
fn three_shards(
    root: &Path,
    base: u16,
    step: u16,
    args: impl Fn(u32, &Path, u16) -> Vec<String>,
) -> Vec<PathBuf> {
    let children: Vec<(PathBuf, Child)> = (1..=3u32)
        .map(|k| {
            let out = root.join(format!("s{k}"));
            let c = lockjaw()
                .args(args(k, &out, base + step * (k as u16 - 1)))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            (out, c)
        })
        .collect();
    children
        .into_iter()
        .map(|(out, c)| {
            let o = c.wait_with_output().unwrap();
            eprintln!(
                "[{}] exit {:?}\n{}{}",
                out.display(),
                o.status.code(),
                text(&o.stdout),
                text(&o.stderr)
            );
            assert!(
                matches!(o.status.code(), Some(0..=2)),
                "{}",
                text(&o.stderr)
            );
            out
        })
        .collect()
}

fn merge(dirs: &[PathBuf], out: &Path, extra: &[&str]) -> Output {
    let o = lockjaw()
        .arg("merge")
        .args(dirs)
        .arg("--out")
        .arg(out)
        .args(extra)
        .output()
        .unwrap();
    eprintln!(
        "[merge] exit {:?}\n{}{}",
        o.status.code(),
        text(&o.stdout),
        text(&o.stderr)
    );
    o
}

/// Each shard's `units`, and the plan (every shard has the same).
fn units(dirs: &[PathBuf]) -> (Vec<String>, Vec<String>) {
    let mut all = vec![];
    let mut plan = None;
    for d in dirs {
        let m = json_file(&d.join("shard.json"));
        all.extend(
            m["units"]
                .as_array()
                .unwrap()
                .iter()
                .map(|u| u.as_str().unwrap().to_string()),
        );
        let p: Vec<String> = m["plan"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| u.as_str().unwrap().to_string())
            .collect();
        assert_eq!(plan.get_or_insert(p.clone()), &p, "one plan in every shard");
    }
    (all, plan.unwrap())
}

/// Validate a JUnit file against tests/fixtures/junit.xsd with xmllint.
fn validate_junit(file: &Path) {
    let xsd = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/junit.xsd");
    let o = std::process::Command::new("xmllint")
        .args(["--noout", "--schema"])
        .arg(xsd)
        .arg(file)
        .output()
        .expect("xmllint (libxml2-utils)");
    assert!(o.status.success(), "{}", text(&o.stderr));
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// `compare` in three shards, merged, against `compare --from-runs` over
/// a copy of all their cells.
#[test]
fn compare_shards_merge_into_the_tables_of_their_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let flags = [
        "compare",
        "--systems",
        "redis,redlock",
        "--nemesis",
        "none,pause-holder,kill-holder",
        "--fencing",
        "on",
        "--time-limit",
        "1",
        "--seed",
        "5",
    ];
    let shards = three_shards(tmp.path(), 39600, 25, |k, out, port| {
        let mut v: Vec<String> = flags.iter().map(|s| s.to_string()).collect();
        v.extend([
            "--shard".into(),
            format!("{k}/3"),
            "--out".into(),
            out.display().to_string(),
        ]);
        v.extend([
            "--".into(),
            "--base-port".into(),
            port.to_string(),
            "--no-progress".into(),
        ]);
        v
    });
    let (mut ran, mut plan) = units(&shards);
    assert_eq!(plan.len(), 3, "redlock's three cells are N/A: {plan:?}");
    ran.sort();
    plan.sort();
    assert_eq!(ran, plan, "the shards ran the plan's cells exactly once");
    let all = tmp.path().join("all");
    let o = merge(&shards, &all, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    // The union of the same run directories, tabulated in one place.
    let union = tmp.path().join("union");
    let mut runs = vec![];
    for s in &shards {
        for e in std::fs::read_dir(s.join("cells")).unwrap() {
            let to = union.join("cells").join(e.as_ref().unwrap().file_name());
            copy(&e.unwrap().path(), &to);
            runs.push(to);
        }
    }
    runs.sort();
    let o = lockjaw()
        // The same plan (all but the seed): --from-runs titles its tables
        // by its own --runs and --time-limit.
        .args(&flags[..9])
        .arg("--out")
        .arg(&union)
        .arg("--from-runs")
        .args(&runs)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let md = read(&all.join("compare.md"));
    assert!(
        md.contains("N/A") && md.matches("cells/redis-").count() == 3,
        "{md}"
    );
    assert_eq!(md, read(&union.join("compare.md")));
    // compare.json names each run's directory: the rest is the same.
    assert_eq!(
        read(&all.join("compare.json")).replace(&all.display().to_string(), "OUT"),
        read(&union.join("compare.json")).replace(&union.display().to_string(), "OUT")
    );
    assert_eq!(
        read(&all.join("compare.html")),
        read(&union.join("compare.html"))
    );
    assert!(
        std::fs::symlink_metadata(all.join(runs[0].strip_prefix(&union).unwrap()))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    // The cells as JUnit: three cases and three N/A ones, valid XML.
    let junit = tmp.path().join("compare-junit.xml");
    let o = merge(
        &shards,
        &tmp.path().join("ci"),
        &["--junit", junit.to_str().unwrap()],
    );
    assert!(
        matches!(o.status.code(), Some(0..=2)),
        "{}",
        text(&o.stderr)
    );
    validate_junit(&junit);
    let x = read(&junit);
    assert_eq!(x.matches("<testcase ").count(), 6, "{x}");
    assert_eq!(x.matches("<skipped message=\"N/A: ").count(), 3, "{x}");
    // Refusals, each naming the shard.
    let o = merge(&shards[..2], &tmp.path().join("x"), &[]);
    assert_eq!(o.status.code(), Some(3));
    assert!(
        text(&o.stderr).contains("shard 3/3 is missing"),
        "{}",
        text(&o.stderr)
    );
    let twice = [
        shards[0].clone(),
        shards[1].clone(),
        shards[1].clone(),
        shards[2].clone(),
    ];
    let o = merge(&twice, &tmp.path().join("x"), &[]);
    assert!(
        text(&o.stderr).contains("shard 2/3 is given twice"),
        "{}",
        text(&o.stderr)
    );
}

fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy(&e.path(), &t);
        } else if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), t).unwrap();
        }
    }
}

/// `run --runs 5` in three shards, merged: the tally of the five runs in
/// order, as the unsharded `--runs` writes it; a shard of another seed is
/// refused.
#[test]
fn runs_shards_merge_into_the_tally_of_all_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let args = |seed: &str, k: u32, out: &Path, port: u16| -> Vec<String> {
        [
            "run",
            "--system",
            "redis",
            "--nemesis",
            "pause-holder",
            "--workload",
            "fenced-counter",
            "--fencing",
            "off",
            "--time-limit",
            "1",
            "--ttl-ms",
            "300",
            "--hold-ms",
            "150",
            "--runs",
            "5",
            "--seed",
            seed,
            "--no-progress",
            "--no-witness",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([
            "--shard".into(),
            format!("{k}/3"),
            "--out".into(),
            out.display().to_string(),
        ])
        .chain(["--base-port".into(), port.to_string()])
        .collect()
    };
    let shards = three_shards(tmp.path(), 39700, 25, |k, out, port| {
        args("11", k, out, port)
    });
    let (mut ran, plan) = units(&shards);
    ran.sort();
    assert_eq!(ran, plan, "run-1 .. run-5, each once");
    assert!(shards[1].join("run-2").is_dir() && shards[1].join("run-5").is_dir());
    let all = tmp.path().join("all");
    let o = merge(&shards, &all, &["--copy"]);
    assert!(
        matches!(o.status.code(), Some(0..=2)),
        "{}",
        text(&o.stderr)
    );
    let dirs: Vec<PathBuf> = (1..=5).map(|i| all.join(format!("run-{i}"))).collect();
    let summaries: Vec<lockjaw::report::RunSummary> = dirs
        .iter()
        .map(|d| lockjaw::report::RunSummary::from_dir(d).unwrap())
        .collect();
    let refs: Vec<&lockjaw::report::RunSummary> = summaries.iter().collect();
    let want = tmp.path().join("want");
    lockjaw::runner::repeat::write_tally(&want, &lockjaw::report::trials::Tally::of(&refs))
        .unwrap();
    assert_eq!(read(&all.join("tally.md")), read(&want.join("tally.md")));
    assert_eq!(
        read(&all.join("tally.json")),
        read(&want.join("tally.json"))
    );
    // CI's view of the same shards: a baseline accepting stale writes and
    // lost updates without fencing turns each run that shows only those
    // into a skipped case; with none, its entries are stale. The file
    // validates.
    let accepted = tmp.path().join("accepted.toml");
    std::fs::write(
        &accepted,
        "[[accept]]\nkind = \"stale-writes\"\nfencing = \"off\"\nreason = \"no fencing: documented\"\n\n\
         [[accept]]\nkind = \"lost-updates\"\nfencing = \"off\"\nreason = \"no fencing: documented\"\n",
    )
    .unwrap();
    let junit = tmp.path().join("junit.xml");
    let o = merge(
        &shards,
        &tmp.path().join("ci"),
        &[
            "--junit",
            junit.to_str().unwrap(),
            "--baseline",
            accepted.to_str().unwrap(),
        ],
    );
    validate_junit(&junit);
    let x = read(&junit);
    let invalid = |s: &&lockjaw::report::RunSummary| s.overall == lockjaw::check::Validity::False;
    let kinds = |s: &lockjaw::report::RunSummary| -> Vec<String> {
        let k = s.trials.anomalies.iter().filter(|(_, n)| **n > 0);
        k.map(|(k, _)| k.clone()).collect()
    };
    let accepted = ["stale-writes", "lost-updates"];
    let only_stale = |s: &lockjaw::report::RunSummary| {
        invalid(&s) && kinds(s).iter().all(|k| accepted.contains(&k.as_str()))
    };
    let want = summaries.iter().filter(|s| only_stale(s)).count();
    // An entry is stale when no invalid run shows its kind at all.
    let stale = accepted
        .iter()
        .filter(|a| {
            !summaries
                .iter()
                .filter(invalid)
                .any(|s| kinds(s).contains(&a.to_string()))
        })
        .count();
    assert_eq!(x.matches("<testcase ").count(), 5 + stale, "{x}");
    assert_eq!(
        x.matches("accepted: no fencing: documented (").count(),
        want,
        "{x}"
    );
    assert_eq!(
        text(&o.stderr).matches("stale: ").count(),
        stale,
        "{}",
        text(&o.stderr)
    );
    let others = summaries
        .iter()
        .filter(|s| s.overall == lockjaw::check::Validity::False && !only_stale(s))
        .count();
    assert_eq!(x.matches("<failure ").count(), others, "{x}");
    // A shard of another seed (its manifest only: nothing runs).
    let other = tmp.path().join("other");
    copy(&shards[2], &other);
    let mut m = json_file(&other.join("shard.json"));
    m["seed"] = 12.into();
    std::fs::write(other.join("shard.json"), m.to_string()).unwrap();
    let o = merge(
        &[shards[0].clone(), shards[1].clone(), other],
        &tmp.path().join("x"),
        &[],
    );
    assert_eq!(o.status.code(), Some(3));
    assert!(
        text(&o.stderr).contains("(shard 3/3): ran with seed 12, but"),
        "{}",
        text(&o.stderr)
    );
}

const ROW: &str = r#"library = "lockjaw's built-in Redis client (a test row)"
title = "a holder paused past its lease writes without fencing"
class = "safety"
system = "redis"
workload = "fenced-counter"
nemesis = "pause-holder"
args = ["--fencing", "off", "--time-limit", "1.5", "--ttl-ms", "300", "--hold-ms", "150",
        "--concurrency", "3", "--no-witness"]
expect = "stale-write-accepted"
per = "injection"
runs = 1
[buggy]
client = "builtin"
[fixed]
client = "builtin"
"#;

/// The columns of row `id` in a bugs table: (buggy 4, fixed 4).
fn columns(md: &str, id: &str) -> (Vec<String>, Vec<String>) {
    let line = md
        .lines()
        .find(|l| l.starts_with(&format!("| {id} |")))
        .unwrap_or_else(|| panic!("no row {id} in {md}"));
    let c: Vec<String> = line.split(" | ").map(str::to_string).collect();
    (
        c[5..9].to_vec(),
        c[9..13]
            .iter()
            .map(|s| s.trim_end_matches(" |").to_string())
            .collect(),
    )
}

/// `bugs table` of two rows (four sides) in three shards, merged: each
/// side's columns are those of the shard that ran it.
#[test]
fn bugs_table_shards_merge_into_one_table() {
    let tmp = tempfile::tempdir().unwrap();
    let cat = tmp.path().join("cat");
    std::fs::create_dir(&cat).unwrap();
    for id in ["row-a", "row-b"] {
        std::fs::write(
            cat.join(format!("{id}.toml")),
            format!("id = \"{id}\"\n{ROW}"),
        )
        .unwrap();
    }
    let shards = three_shards(tmp.path(), 39800, 25, |k, out, port| {
        ["bugs", "table", "--required", "1", "--seed", "3"]
            .iter()
            .map(|s| s.to_string())
            .chain(["--catalogue".into(), cat.display().to_string()])
            .chain([
                "--shard".into(),
                format!("{k}/3"),
                "--out".into(),
                out.display().to_string(),
            ])
            .chain(["--base-port".into(), port.to_string()])
            .collect()
    });
    let (mut ran, mut plan) = units(&shards);
    ran.sort();
    plan.sort();
    assert_eq!(
        plan,
        ["row-a/buggy", "row-a/fixed", "row-b/buggy", "row-b/fixed"]
    );
    assert_eq!(ran, plan);
    let all = tmp.path().join("all");
    let o = merge(&shards, &all, &[]);
    assert!(
        matches!(o.status.code(), Some(0..=2)),
        "{}",
        text(&o.stderr)
    );
    let merged = read(&all.join("bugs-table.md"));
    // Round robin: shard 1 has row-a/buggy and row-b/fixed, shard 2
    // row-a/fixed, shard 3 row-b/buggy.
    let own = |k: usize| read(&shards[k].join("bugs-table.md"));
    assert_eq!(columns(&merged, "row-a").0, columns(&own(0), "row-a").0);
    assert_eq!(columns(&merged, "row-a").1, columns(&own(1), "row-a").1);
    assert_eq!(columns(&merged, "row-b").0, columns(&own(2), "row-b").0);
    assert_eq!(columns(&merged, "row-b").1, columns(&own(0), "row-b").1);
    assert!(
        !columns(&merged, "row-b").1.contains(&"not run".to_string()),
        "{merged}"
    );
}

/// `sweep` over two fixed values in three shards (the third gets none),
/// merged: the unsharded title, and each row's tally and reports those
/// of the shard that ran it.
#[test]
fn sweep_shards_merge_into_one_sweep() {
    let tmp = tempfile::tempdir().unwrap();
    let shards = three_shards(tmp.path(), 39900, 25, |k, out, port| {
        [
            "sweep",
            "--system",
            "redis",
            "--nemesis",
            "pause-holder",
            "--vary",
            "duration_leases=0.5,1.5",
            "--fencing",
            "off",
            "--time-limit",
            "1",
            "--ttl-ms",
            "300",
            "--hold-ms",
            "150",
            "--seed",
            "9",
            "--no-progress",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([
            "--shard".into(),
            format!("{k}/3"),
            "--out".into(),
            out.display().to_string(),
        ])
        .chain(["--".into(), "--base-port".into(), port.to_string()])
        .collect()
    });
    let (ran, plan) = units(&shards);
    assert_eq!(
        plan,
        ["redis@duration_leases=0.5", "redis@duration_leases=1.5"]
    );
    assert_eq!(ran, plan);
    let all = tmp.path().join("all");
    let o = merge(&shards, &all, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let merged = json_file(&all.join("sweep.json"));
    let own = json_file(&shards[0].join("sweep.json"));
    assert_eq!(
        format!("{} (shard 1/3)", merged["title"].as_str().unwrap()),
        own["title"].as_str().unwrap()
    );
    let rows = merged["systems"][0]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for (row, shard) in rows.iter().zip([&shards[0], &shards[1]]) {
        let theirs = json_file(&shard.join("sweep.json"));
        let r = &theirs["systems"][0]["rows"][0];
        assert_eq!(row["value"], r["value"]);
        assert_eq!(
            row["tally"], r["tally"],
            "the pooled counts of the same runs"
        );
        assert_eq!(row["reports"], r["reports"]);
        let report = all.join(row["reports"][0].as_str().unwrap());
        assert!(report.is_file(), "{}", report.display());
    }
    assert!(
        json_file(&shards[2].join("sweep.json"))["systems"][0]["rows"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert!(read(&all.join("sweep.md")).contains("| 0.5 | 1 |"));
}

/// `explore --shard K/2` (make test-long, about 80 s): each shard keeps
/// only the points whose name hashes to it, the two are disjoint, and the
/// merge holds their union and says the search was split. Explore's runs
/// reserve their own port blocks (10000-16999).
#[test]
#[ignore = "make test-long: two 60 s explores at once"]
fn explore_shards_merge_into_the_union_of_their_points() {
    let tmp = tempfile::tempdir().unwrap();
    let dirs = [tmp.path().join("e1"), tmp.path().join("e2")];
    let children: Vec<Child> = dirs
        .iter()
        .enumerate()
        .map(|(i, out)| {
            lockjaw()
                .args([
                    "explore",
                    "--system",
                    "redis",
                    "--budget",
                    "60s",
                    "--learn-secs",
                    "2",
                ])
                .args(["--seed", "3", "--shard", &format!("{}/2", i + 1), "--out"])
                .arg(out)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let o = c.wait_with_output().unwrap();
        eprintln!("{}{}", text(&o.stdout), text(&o.stderr));
        assert!(
            matches!(o.status.code(), Some(0..=2)),
            "{}",
            text(&o.stderr)
        );
    }
    let points = |d: &Path| -> Vec<String> {
        let j = json_file(&d.join("explore.json"));
        j["plan"]["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["id"].as_str().unwrap().to_string())
            .collect()
    };
    let (a, b) = (points(&dirs[0]), points(&dirs[1]));
    assert!(!a.is_empty() && !b.is_empty(), "{a:?} {b:?}");
    for (k, pts) in [(1, &a), (2, &b)] {
        let s = lockjaw::runner::shard::Shard { k, n: 2 };
        assert!(pts.iter().all(|p| s.owns_key(p)), "shard {k}: {pts:?}");
    }
    assert!(a.iter().all(|p| !b.contains(p)), "disjoint");
    let all = tmp.path().join("all");
    let junit = tmp.path().join("explore-junit.xml");
    let o = merge(&dirs, &all, &["--junit", junit.to_str().unwrap()]);
    assert!(
        matches!(o.status.code(), Some(0..=2)),
        "{}",
        text(&o.stderr)
    );
    validate_junit(&junit);
    let families: std::collections::BTreeSet<String> = dirs
        .iter()
        .flat_map(|d| {
            let j = json_file(&d.join("explore.json"));
            let f: Vec<String> = j["plan"]["points"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["family"].as_str().unwrap().to_string())
                .collect();
            f
        })
        .collect();
    assert_eq!(
        read(&junit).matches("<testcase ").count(),
        families.len(),
        "one case per fault family"
    );
    let mut merged = points(&all);
    let mut union: Vec<String> = a.iter().chain(&b).cloned().collect();
    merged.sort();
    union.sort();
    assert_eq!(merged, union);
    assert!(read(&all.join("explore.md")).contains("The search was split over 2 shards"));
    let learn = json_file(&all.join("explore.json"))["learned"]["runs"][0]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        Path::new(&learn).join("run.json").is_file(),
        "{learn}: paths follow the shard"
    );
}
