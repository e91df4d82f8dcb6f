//! Whether shards belong together: one command, one plan, one lockjaw,
//! one seed, the same versions of what they both met, every shard of 1..N
//! exactly once, and their units the plan's, each once. Every mismatch is
//! said, naming the shard's directory.

use crate::runner::shard::Manifest;
use std::collections::BTreeMap;
use std::path::PathBuf;

fn name(dir: &std::path::Path, m: &Manifest) -> String {
    format!("{} (shard {})", dir.display(), m.shard)
}

/// Every reason the shards cannot be merged (empty: they can).
pub fn check(shards: &[(PathBuf, Manifest)]) -> Vec<String> {
    let mut errs = vec![];
    let Some((d0, m0)) = shards.first() else {
        return vec!["no shard given (hint: lockjaw merge shard-1 shard-2 ... --out all)".into()];
    };
    let first = name(d0, m0);
    for (d, m) in &shards[1..] {
        let this = name(d, m);
        let mut differs = |what: &str, a: &dyn std::fmt::Display, b: &dyn std::fmt::Display| {
            errs.push(format!("{this}: {what} {b}, but {first} has {a}"));
        };
        if m.command != m0.command {
            differs("is a shard of", &m0.command, &m.command);
        } else if m.plan_hash != m0.plan_hash {
            differs(
                "has another plan (other arguments, catalogue or adapters):",
                &m0.plan_hash,
                &m.plan_hash,
            );
        }
        if m.seed != m0.seed {
            differs("ran with seed", &m0.seed, &m.seed);
        }
        if m.lockjaw_version != m0.lockjaw_version {
            differs("ran lockjaw", &m0.lockjaw_version, &m.lockjaw_version);
        }
        if m.shard.n != m0.shard.n {
            differs(
                "is one of",
                &format!("{} shards", m0.shard.n),
                &format!("{} shards", m.shard.n),
            );
        }
    }
    errs.extend(versions(shards));
    if !errs.is_empty() {
        return errs;
    }
    errs.extend(coverage(shards));
    errs
}

/// Versions of one server or library that differ between shards.
fn versions(shards: &[(PathBuf, Manifest)]) -> Vec<String> {
    let mut seen: BTreeMap<&str, (&str, String)> = BTreeMap::new();
    let mut errs = vec![];
    for (d, m) in shards {
        for (what, v) in &m.versions {
            match seen.get(what.as_str()) {
                Some((v0, who)) if v0 != v => errs.push(format!(
                    "{}: ran {what} {v}, but {who} ran {v0}",
                    name(d, m)
                )),
                Some(_) => {}
                None => {
                    seen.insert(what, (v, name(d, m)));
                }
            }
        }
    }
    errs
}

/// Each shard of 1..N once, and the units of the plan each run once.
fn coverage(shards: &[(PathBuf, Manifest)]) -> Vec<String> {
    let n = shards[0].1.shard.n;
    let mut errs = vec![];
    let mut by_k: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for (d, m) in shards {
        by_k.entry(m.shard.k)
            .or_default()
            .push(d.display().to_string());
    }
    for k in 1..=n {
        match by_k.get(&k).map(Vec::as_slice) {
            None | Some([]) => errs.push(format!(
                "shard {k}/{n} is missing (hint: give the --out directory of `--shard {k}/{n}`)"
            )),
            Some([_]) => {}
            Some(dirs) => errs.push(format!(
                "shard {k}/{n} is given twice: {}",
                dirs.join(" and ")
            )),
        }
    }
    if !errs.is_empty() {
        return errs;
    }
    let plan = &shards[0].1.plan;
    let mut ran: BTreeMap<&str, String> = BTreeMap::new();
    for (d, m) in shards {
        for u in &m.units {
            if !plan.contains(u) {
                errs.push(format!("{}: ran {u}, which the plan has not", name(d, m)));
            } else if let Some(other) = ran.insert(u, name(d, m)) {
                errs.push(format!("{}: ran {u}, which {other} ran too", name(d, m)));
            }
        }
    }
    for u in plan {
        if !ran.contains_key(u.as_str()) {
            errs.push(format!("no shard ran {u}"));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::shard::Shard;

    fn shard(k: u32, n: u32) -> (PathBuf, Manifest) {
        let plan: Vec<String> = (1..=5).map(|i| format!("run-{i}")).collect();
        let text = vec!["plan".to_string()];
        let mut m = Manifest::new("runs", &text, Shard { k, n }, 7, plan, std::iter::empty());
        m.versions.insert("redis server".into(), "7.0.15".into());
        (PathBuf::from(format!("s{k}")), m)
    }

    #[test]
    fn shards_of_one_plan_merge() {
        assert_eq!(check(&[shard(1, 2), shard(2, 2)]), Vec::<String>::new());
    }

    #[test]
    fn a_missing_or_doubled_shard_is_named() {
        let e = check(&[shard(1, 3), shard(3, 3), shard(3, 3)]);
        assert_eq!(e.len(), 2, "{e:?}");
        assert!(e[0].starts_with("shard 2/3 is missing"), "{e:?}");
        assert_eq!(e[1], "shard 3/3 is given twice: s3 and s3");
    }

    #[test]
    fn another_plan_seed_version_or_count_is_named() {
        let mut b = shard(2, 2);
        b.1.plan_hash = "other".into();
        b.1.seed = 8;
        b.1.lockjaw_version = "9.9.9".into();
        b.1.versions.insert("redis server".into(), "7.2.4".into());
        let e = check(&[shard(1, 2), b]);
        let all = e.join("\n");
        for want in [
            "s2 (shard 2/2): has another plan",
            "s2 (shard 2/2): ran with seed 8, but s1 (shard 1/2) has 7",
            "s2 (shard 2/2): ran lockjaw 9.9.9, but s1 (shard 1/2) has",
            "s2 (shard 2/2): ran redis server 7.2.4, but s1 (shard 1/2) ran 7.0.15",
        ] {
            assert!(all.contains(want), "{want}\n{all}");
        }
        let e = check(&[shard(1, 2), shard(2, 3)]);
        assert!(
            e[0].contains("is one of 3 shards, but s1 (shard 1/2) has 2 shards"),
            "{e:?}"
        );
    }

    #[test]
    fn a_unit_run_twice_or_by_no_one_is_named() {
        let (a, mut b) = (shard(1, 2), shard(2, 2));
        b.1.units = vec!["run-1".into(), "run-4".into()];
        let e = check(&[a, b]).join("\n");
        assert!(
            e.contains("s2 (shard 2/2): ran run-1, which s1 (shard 1/2) ran too"),
            "{e}"
        );
        assert!(e.contains("no shard ran run-2"), "{e}");
    }
}
