//! The planner's tests: every learned kind yields points, every point
//! loads as `lockjaw run --nemesis` would, the registry decides what
//! applies, the order, the pairs and the budget.

use super::*;
use crate::explore::budget::{budget, duration, text};
use crate::explore::learn::{LinkKind, OpaqueLink, RequestKind};
use crate::explore::pairs::pairs;
use std::collections::BTreeSet;

const SHA: &str = "1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d";

fn kind(command: &str, sha1: Option<&str>, link: LinkKind, phases: &[Phase]) -> RequestKind {
    RequestKind {
        proto: "redis".into(),
        link,
        command: command.into(),
        sha1: sha1.map(String::from),
        words: None,
        phases: phases.iter().copied().collect(),
        count: 40,
        errors: 0,
    }
}

fn learned() -> Learned {
    Learned {
        runs: vec!["a".into(), "b".into()],
        lease_ms: 1000,
        kinds: vec![
            kind("SET", None, LinkKind::Lock, &[Phase::Acquire]),
            kind("EVALSHA", Some(SHA), LinkKind::Lock, &[Phase::Release]),
            kind("PEXPIRE", None, LinkKind::Lock, &[Phase::Renew]),
            kind("GET", None, LinkKind::Storage, &[Phase::Write]),
        ],
        run_secs: 20.0,
        ..Learned::default()
    }
}

fn opts(system: &str, own: bool, workloads: &[&str]) -> PlanOptions {
    PlanOptions {
        system: system.into(),
        own_cluster: own,
        workloads: workloads.iter().map(|w| w.to_string()).collect(),
        library_renews: false,
    }
}

fn ids(p: &Plan) -> Vec<&str> {
    p.points.iter().map(|p| p.id.as_str()).collect()
}

#[test]
fn every_learned_lock_kind_yields_points_and_every_point_loads() {
    let l = learned();
    // Without a renewing workload learned, nothing aims at a renewal.
    let plain = plan(&l, &opts("redis", true, &["lock", "fenced-counter"]));
    let aimed: Vec<&str> = ids(&plain)
        .into_iter()
        .filter(|i| i.contains("renew"))
        .collect();
    assert_eq!(aimed, Vec::<&str>::new());
    let p = plan(
        &l,
        &opts(
            "redis",
            true,
            &["lock", "fenced-counter", "fenced-counter-renewing"],
        ),
    );
    let failed: Vec<(&str, String)> = p
        .points
        .iter()
        .filter_map(|q| q.spec().err().map(|e| (q.id.as_str(), e)))
        .collect();
    assert_eq!(failed, [], "planned points that do not load");
    let not_loading: Vec<&Refused> = p
        .refused
        .iter()
        .filter(|r| r.why.contains("does not load"))
        .collect();
    assert!(not_loading.is_empty(), "{not_loading:?}");
    for q in &p.points {
        assert_eq!(q.spec().unwrap().name, q.id, "the file's name is the id");
        assert!(!q.workloads.is_empty(), "{}", q.id);
    }
    let mut unique = ids(&p);
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), p.points.len(), "ids are unique");
    for k in l.kinds.iter().filter(|k| k.link == LinkKind::Lock) {
        let n = p
            .points
            .iter()
            .filter(|q| q.kind.as_deref() == Some(&k.label()))
            .count();
        assert_eq!(n, 6, "{}: crash, hold ×3, reset ×2", k.label());
    }
    let id = ids(&p);
    for want in [
        "strike-crash-after-SET",
        "strike-hold-grant-EVALSHA-1a2b3c4d",
        "strike-hold-2.5l-PEXPIRE",
        "pause-holder-2.5l",
        "pause-holder-0.5l-after-0.5l",
        "kill-holder-after-1.5l",
        "client-clock-jump-back-2l",
        "client-clock-strobe-1ms",
        "delay-storage",
        "renew-race",
        "pause-node",
        "kill-node",
        "clock-jump",
    ] {
        assert!(id.contains(&want), "{want} missing from {id:?}");
    }
    assert!(
        !id.iter().any(|i| i.contains("GET")),
        "a storage request is not struck: {id:?}"
    );
    let evalsha = p.get("strike-hold-grant-EVALSHA-1a2b3c4d").unwrap().spec();
    let strike = evalsha.unwrap().strike.unwrap();
    assert_eq!(strike.sha1.as_deref(), Some(SHA));
    assert_eq!(strike.command.as_deref(), Some("EVALSHA"));
}

#[test]
fn lengths_and_offsets_follow_the_learned_lease() {
    let mut l = learned();
    l.lease_ms = 400;
    let p = plan(&l, &opts("redis", false, &["lock", "lock-renewing"]));
    let s = p
        .get("pause-holder-1.5l-after-0.5l")
        .unwrap()
        .spec()
        .unwrap();
    assert_eq!((s.duration_leases, s.strike_after_ms), (Some(1.5), 200));
    let j = p
        .get("client-clock-jump-back-0.5l")
        .unwrap()
        .spec()
        .unwrap();
    assert_eq!(j.offset_ms, Some(-200));
    assert_eq!(j.interval_ms, 800, "two leases of quiet");
    let left = p.get("client-clock-jump-fwd-2l-left").unwrap();
    assert!(left.own_run, "a clock left moved gets a run of its own");
}

#[test]
fn the_registry_decides_what_applies() {
    // etcd: no framed link, no clock faults on its servers.
    let mut l = learned();
    l.kinds.clear();
    l.opaque = vec![OpaqueLink {
        link: LinkKind::Lock,
        node: "etcd1".into(),
        why: "HTTP/2 (gRPC)".into(),
    }];
    let p = plan(&l, &opts("etcd", true, &["lock"]));
    let id = ids(&p);
    assert!(!id.iter().any(|i| i.starts_with("strike-")), "{id:?}");
    assert!(id.contains(&"partition-holder") && id.contains(&"pause-node"));
    assert!(
        !id.contains(&"clock-jump"),
        "etcd nodes have no clock fault"
    );
    assert!(p.refused.iter().any(|r| r.id == "clock-jump"));
    assert!(
        !id.contains(&"delay-storage"),
        "lock writes no storage: {id:?}"
    );
    let server = p.get("pause-node").unwrap();
    assert!(server.own_run && server.label.as_deref().unwrap().contains("own cluster"));
    // Not lockjaw's own cluster: no server fault.
    let p = plan(&l, &opts("etcd", false, &["lock"]));
    assert!(!p.points.iter().any(|q| q.family == Family::Server));
    // A kind on a link strike-command cannot match (ZooKeeper today) is
    // refused with the registry's reason, not dropped silently.
    let mut z = learned();
    z.kinds = vec![RequestKind {
        proto: "zookeeper".into(),
        ..kind("create", None, LinkKind::Lock, &[Phase::Acquire])
    }];
    let p = plan(&z, &opts("zookeeper", true, &["lock"]));
    let struck = p.points.iter().any(|q| q.family == Family::Strike);
    let refused = p.refused.iter().any(|r| r.family == Family::Strike);
    assert!(
        struck || refused,
        "every strike candidate is planned or refused"
    );
}

#[test]
fn every_family_and_fault_comes_before_the_variations_of_any_one() {
    let mut l = learned();
    l.kinds
        .insert(0, kind("PING", None, LinkKind::Lock, &[Phase::Idle]));
    let p = plan(&l, &opts("redis", true, &["fenced-counter"]));
    let id = ids(&p);
    // A crash right after each acquire and release request first.
    assert_eq!(id[0], "strike-crash-after-SET", "{id:?}");
    assert_eq!(id[1], "strike-crash-after-EVALSHA-1a2b3c4d", "{id:?}");
    // Round robin: the first point of each family comes before the second
    // of any group.
    let first_of = |f: Family| p.points.iter().position(|q| q.family == f).unwrap();
    let second_strike = id
        .iter()
        .position(|i| *i == "strike-hold-grant-SET")
        .unwrap();
    for f in [
        Family::Process,
        Family::ClientClock,
        Family::Network,
        Family::Server,
    ] {
        assert!(first_of(f) < second_strike, "{f:?} late: {id:?}");
    }
    // Every fault of the network family comes before a second pause.
    let pauses: Vec<usize> = id
        .iter()
        .enumerate()
        .filter(|(_, i)| i.starts_with("pause-holder") && !i.contains("waiter"))
        .map(|(n, _)| n)
        .collect();
    for f in ["delay-grant", "drop-release", "partition-holder"] {
        let at = id.iter().position(|i| *i == f).unwrap();
        assert!(at < pauses[1], "{f} after the second pause: {id:?}");
    }
    // A pause past the lease before one within it.
    assert_eq!(id[pauses[0]], "pause-holder-1.5l");
    // Strikes on acquire and release kinds, then renewals, then
    // background requests.
    let at = |s: &str| id.iter().position(|i| *i == s).unwrap();
    assert!(at("strike-crash-after-EVALSHA-1a2b3c4d") < at("strike-crash-after-PEXPIRE"));
    assert!(at("strike-crash-after-PEXPIRE") < at("strike-crash-after-PING"));
    assert!(at("strike-hold-grant-EVALSHA-1a2b3c4d") < at("strike-hold-grant-PEXPIRE"));
    let storage = p.get("delay-storage").unwrap();
    assert!(storage.own_run, "lost updates show at the final read");
}

#[test]
fn nothing_aims_at_lockjaws_renewals_when_the_library_renews_by_itself() {
    let l = learned();
    let ws = ["lock", "fenced-counter", "lock-renewing"];
    let ours = plan(&l, &opts("redis", true, &ws));
    let aimed = |p: &Plan| {
        ids(p)
            .into_iter()
            .filter(|i| i.ends_with("-renewer") || *i == "renew-race")
            .count()
    };
    assert!(aimed(&ours) > 0, "lockjaw's own renewals are aimed at");
    // The library's renewals are never announced: a point waiting for one
    // would stall its run's sequence to the end.
    let mut o = opts("redis", true, &ws);
    o.library_renews = true;
    let lib = plan(&l, &o);
    assert_eq!(aimed(&lib), 0, "{:?}", ids(&lib));
    // The deep strikes under the renewing workloads stay.
    assert!(lib.get("kill-holder-after-1.5l").is_some());
}

#[test]
fn a_strike_deep_in_the_critical_section_runs_under_a_renewing_workload_first() {
    let l = learned();
    let renewing = plan(
        &l,
        &opts("redis", true, &["lock", "fenced-counter", "lock-renewing"]),
    );
    let late = renewing.get("kill-holder-after-1.5l").expect("planned");
    assert_eq!(late.workloads, ["lock-renewing"]);
    let id = ids(&renewing);
    let at = |s: &str| id.iter().position(|i| *i == s).unwrap();
    // Inside a group the renewing-only points alternate with the others,
    // first: neither starves the other.
    assert!(at("kill-holder-after-0.5l") < at("kill-holder"), "{id:?}");
    assert!(at("kill-holder") < at("kill-holder-after-1.5l"), "{id:?}");
    assert!(
        at("pause-holder-1.5l-after-0.5l") < at("pause-holder-1.5l"),
        "{id:?}"
    );
    assert!(
        at("pause-holder-1.5l") < at("pause-holder-2.5l-after-0.5l"),
        "{id:?}"
    );
    // Half a lease in: longer than `lock` (50 ms) and `fenced-counter`
    // (200 ms) hold.
    let half = renewing.get("pause-holder-1.5l-after-0.5l").unwrap();
    assert_eq!(half.workloads, ["lock-renewing"]);
    // Without a renewing workload nothing holds that long: refused, and
    // said why.
    let plain = plan(&l, &opts("redis", true, &["lock", "fenced-counter"]));
    assert!(plain.get("kill-holder-after-1.5l").is_none());
    assert!(plain.get("kill-holder-after-0.5l").is_none());
    let why = plain
        .refused
        .iter()
        .find(|r| r.id == "kill-holder-after-1.5l")
        .expect("refused");
    assert!(why.why.contains("holds the lock that long"), "{}", why.why);
    // The learned workloads are named as learned, renewing ones included.
    let k = renewing.get("kill-holder").unwrap();
    assert_eq!(k.workloads, ["lock", "fenced-counter", "lock-renewing"]);
}

#[test]
fn pairs_join_landed_points_most_promising_first() {
    let p = plan(&learned(), &opts("redis", true, &["fenced-counter"]));
    let landed: BTreeSet<String> = [
        "strike-crash-after-SET",
        "strike-hold-grant-EVALSHA-1a2b3c4d",
        "client-clock-jump-fwd-2l",
        "client-clock-strobe-1ms",
        "pause-holder-2.5l",
        "kill-holder",
        "partition-holder",
        "delay-storage",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    let none = BTreeSet::new();
    let all = pairs(&p, &landed, &none, 100);
    assert!(!all.is_empty());
    for q in &all {
        assert_eq!(q.family, Family::Together);
        assert!(q.parts.iter().all(|x| landed.contains(x)), "{:?}", q.parts);
        let fam: Vec<Family> = q.parts.iter().map(|x| p.get(x).unwrap().family).collect();
        assert!(
            !(fam[0] == fam[1] && matches!(fam[0], Family::Process | Family::ClientClock)),
            "two faults on one process or clock: {}",
            q.id
        );
        let t: toml::Value = toml::from_str(&q.nemesis).unwrap();
        assert_eq!(t["fault"].as_str(), Some("together"));
        assert_eq!(t["name"].as_str(), Some(q.id.as_str()));
        assert_eq!(
            t["together"]["first"].as_str().unwrap(),
            format!("{}.toml", q.parts[0])
        );
    }
    let pair = |q: &Point| {
        let f: Vec<Family> = q.parts.iter().map(|x| p.get(x).unwrap().family).collect();
        (f[0], f[1])
    };
    assert_eq!(pair(&all[0]), (Family::Strike, Family::ClientClock));
    assert!(all
        .iter()
        .any(|q| q.id == "together:partition-holder+delay-storage"));
    let hot: BTreeSet<String> = ["kill-holder".to_string(), "delay-storage".to_string()].into();
    let first = &pairs(&p, &landed, &hot, 1)[0];
    assert_eq!(first.parts, ["kill-holder", "delay-storage"]);
    assert!(first.own_run, "delay-storage needs its own run");
    let dir = std::path::Path::new("/x/points");
    assert!(first
        .file_text(dir)
        .contains("\"/x/points/kill-holder.toml\""));
    assert!(
        pairs(&p, &BTreeSet::new(), &hot, 10).is_empty(),
        "only landed points"
    );
}

#[test]
fn written_points_make_a_schedule_lockjaw_run_loads() {
    let p = plan(&learned(), &opts("redis", false, &["lock"]));
    let dir = tempfile::tempdir().unwrap();
    let files = write_points(dir.path(), &p.points[..5]).unwrap();
    let refs: Vec<&std::path::Path> = files.iter().map(|f| f.as_path()).collect();
    let text = crate::explore::search::batch_nemesis(1, &refs, p.lease_ms);
    let path = dir.path().join("run-1.toml");
    std::fs::write(&path, text).unwrap();
    let s = spec::load(&path.display().to_string()).unwrap();
    assert_eq!(s.order, crate::nemesis::spec::Order::Sequence);
    assert_eq!(s.faults.len(), 5);
    assert_eq!(s.interval_ms, 2000);
    let pool = crate::nemesis::mixed::pool(&s).unwrap();
    let names: Vec<&str> = pool.iter().map(|q| q.name.as_str()).collect();
    assert_eq!(names, ids(&p)[..5]);
}

#[test]
fn the_budget_says_what_it_covers() {
    let p = plan(&learned(), &opts("redis", true, &["fenced-counter"]));
    let b = budget(&p, &learned(), 900, 6, 2);
    assert_eq!(b.points, p.points.len());
    assert_eq!(b.shared + b.own, b.points);
    assert_eq!(
        b.runs_per_pass,
        (b.shared as u64).div_ceil(6) + b.own as u64
    );
    assert!(
        (b.trials_per_min - 36.0).abs() < 1e-9,
        "6 per 20 s run, 2 jobs"
    );
    assert!((b.pass_secs - b.runs_per_pass.div_ceil(2) as f64 * 20.0).abs() < 1e-9);
    let t = text(&p, &b, 900);
    assert!(
        t.contains(&format!("plan: {} fault points", b.points)),
        "{t}"
    );
    assert!(t.contains("budget 15m"), "{t}");
    assert_eq!(duration(4210.0), "1h 10m");
    assert_eq!(duration(45.0), "45s");
}
