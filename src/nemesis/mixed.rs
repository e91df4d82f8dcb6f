//! `mixed`: a random mix of faults. The file's `faults` lists nemesis files
//! (names or paths; every built-in fault when empty); a run keeps those
//! that apply to its system, cluster mode and workload, and before each
//! injection draws one from the run's seeded rng. The chosen fault runs
//! with its own file's parameters (target, length); the schedule (interval,
//! first delay) is `mixed`'s. With `order = "sequence"` the listed files
//! are taken in order instead, starting over after the last (`lockjaw
//! explore` schedules its fault points so). Its history ops name the drawn
//! fault, carry `"mixed": true` and the drawn file's `name` as `"point"`.

use super::registry;
use super::scope::{ClientChoice, Placement, Scope, ToxiproxyChoice};
use super::spec::{self, NemesisSpec, Order};
use super::{Ctx, Fault, Nemesis, NemesisError};
use crate::cluster::Mode;
use crate::workload::Kind;
use async_trait::async_trait;
use rand::Rng;
use serde_json::{json, Value};
use std::cell::Cell;

/// Faults `mixed` never draws (by fault, and by file name from the
/// built-in pool: the deliberate data-loss cells of `kill-node` stay out).
const NEVER: &[&str] = &["none", "mixed"];
/// `renew-race` waits for a renewal, which only some workloads make; the
/// client clock faults would start every worker under libfaketime; the
/// pairs (`together`) are deliberate combinations (list them in `faults`
/// to draw them).
const NEVER_FILES: &[&str] = &[
    "restart-empty",
    "restart-aof",
    "restart-empty-delayed",
    "renew-race",
    "client-clock-jump",
    "client-clock-strobe",
    "together",
    "k2-etcd",
];

thread_local! {
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// The nemesis files `spec` draws from, loaded (every built-in fault but
/// `none` and `mixed` when its list is empty).
pub fn pool(spec: &NemesisSpec) -> Result<Vec<NemesisSpec>, String> {
    let names: Vec<String> = if spec.faults.is_empty() {
        spec::BUILTIN
            .iter()
            .map(|(n, _)| n.to_string())
            .filter(|n| !NEVER.contains(&n.as_str()) && !NEVER_FILES.contains(&n.as_str()))
            .collect()
    } else {
        spec.faults.clone()
    };
    // A `mixed` file that lists itself (or another mixed) would recurse.
    if DEPTH.with(|d| d.get()) > 0 {
        return Err("a mixed nemesis cannot draw from another mixed one".into());
    }
    DEPTH.with(|d| d.set(d.get() + 1));
    let loaded: Result<Vec<NemesisSpec>, String> = names
        .iter()
        .map(|n| spec::load(n).map_err(|e| e.to_string()))
        .collect();
    DEPTH.with(|d| d.set(d.get() - 1));
    let loaded = loaded?;
    if let Some(m) = loaded.iter().find(|s| NEVER.contains(&s.fault.as_str())) {
        return Err(format!("cannot draw from {:?} (fault {})", m.name, m.fault));
    }
    Ok(loaded)
}

/// The registry's parameter check: every listed file loads.
pub fn check(spec: &NemesisSpec) -> Result<(), registry::ParamError> {
    pool(spec).map(drop).map_err(|e| {
        (
            "faults",
            e,
            "list nemesis names such as \"pause-node\", \"clock-jump\"",
        )
    })
}

/// The faults of `spec` that apply to `c` (the service registry says so)
/// and, when `ready`, that this host can inject now.
pub fn applicable(spec: &NemesisSpec, c: &Scope, ready: bool) -> Result<Vec<NemesisSpec>, String> {
    let all = pool(spec)?;
    let keep: Vec<NemesisSpec> = all
        .into_iter()
        .filter(|s| {
            let sub = c.with_nemesis(s.clone());
            // The rest of the combination passed before the nemesis was
            // asked (`crate::combination::applies`): only the fault's own
            // rules can refuse a sub-fault.
            registry::supports(&sub).is_ok() && (!ready || registry::host_ready(&sub).is_ok())
        })
        .collect();
    if keep.is_empty() {
        return Err("none of the faults it draws from applies here".into());
    }
    Ok(keep)
}

/// True when `spec` draws from a clock fault.
pub fn draws_clock_faults(spec: &NemesisSpec) -> bool {
    draws_any(spec, super::clock::is_clock_fault)
}

/// True when `spec` draws from a fault `pred` picks.
pub fn draws_any(spec: &NemesisSpec, pred: fn(&str) -> bool) -> bool {
    super::together::leaves(spec).iter().any(|s| pred(&s.fault))
}

/// Whether the mix may draw fault `fault` (alone or in a pair).
pub fn draws(spec: &NemesisSpec, fault: &str) -> bool {
    super::together::leaves(spec)
        .iter()
        .any(|s| s.fault == fault)
}

/// The random mix.
pub struct Mixed {
    pool: Option<Vec<NemesisSpec>>,
    current: Option<(Box<dyn Nemesis>, NemesisSpec)>,
    name: &'static str,
    /// `order = "sequence"`: the draws so far.
    drawn: usize,
}

impl Default for Mixed {
    fn default() -> Self {
        Mixed {
            pool: None,
            current: None,
            name: "mixed",
            drawn: 0,
        }
    }
}

/// The index of the next draw from a pool of `len` (> 0): the seeded rng,
/// or the listed order, cycling.
fn pick(order: Order, len: usize, drawn: usize, rng: &mut impl Rng) -> usize {
    match order {
        Order::Random => rng.gen_range(0..len),
        Order::Sequence => drawn % len,
    }
}

/// Mark a drawn fault's target as `mixed`'s, naming the drawn file.
fn mark(target: &mut Value, point: &str) {
    if !target.is_object() {
        *target = json!({ "target": target.take() });
    }
    if let Some(o) = target.as_object_mut() {
        o.insert("mixed".into(), json!(true));
        o.insert("point".into(), json!(point));
    }
}

impl Mixed {
    fn load(&mut self, ctx: &Ctx) -> Result<&[NemesisSpec], NemesisError> {
        if self.pool.is_none() {
            let placement = match ctx.cluster.mode {
                Mode::Endpoints => Placement::Endpoints,
                Mode::Adopted => Placement::Hosts,
                Mode::Owned | Mode::Attached if ctx.cluster.on_hosts() => Placement::Hosts,
                Mode::Owned | Mode::Attached => Placement::Local,
            };
            let c = Scope {
                system: ctx.system,
                client: ClientChoice::Builtin,
                workload: ctx.workload.unwrap_or(Kind::FencedCounter),
                nemesis: ctx.spec.clone(),
                placement,
                toxiproxy: if ctx.embedded_toxiproxy {
                    ToxiproxyChoice::Embedded
                } else {
                    ToxiproxyChoice::External
                },
            };
            let p = applicable(&ctx.spec, &c, true).map_err(|e| NemesisError::new("mixed", e))?;
            self.pool = Some(p);
        }
        Ok(self.pool.as_deref().unwrap_or_default())
    }
}

#[async_trait]
impl Nemesis for Mixed {
    /// `mixed` until the first draw, then the fault drawn last.
    fn name(&self) -> &'static str {
        self.name
    }

    async fn start(&mut self, ctx: &mut Ctx) -> Result<Option<Fault>, NemesisError> {
        if ctx.is_stopping() {
            return Ok(None);
        }
        let pool = self.load(ctx)?.to_vec();
        let i = pick(ctx.spec.order, pool.len(), self.drawn, &mut ctx.rng);
        self.drawn += 1;
        let sub = pool[i].clone();
        let mut nemesis = registry::build(&sub);
        self.name = registry::find(&sub.fault).map_or("mixed", |e| e.name);
        let mine = std::mem::replace(&mut ctx.spec, sub.clone());
        let r = nemesis.start(ctx).await;
        ctx.spec = mine;
        let Some(mut fault) = r? else {
            return Ok(None);
        };
        mark(&mut fault.target, &sub.name);
        self.current = Some((nemesis, sub));
        Ok(Some(fault))
    }

    async fn stop(&mut self, ctx: &mut Ctx, fault: &Fault) -> Result<Value, NemesisError> {
        let Some((mut nemesis, sub)) = self.current.take() else {
            ctx.revert(self.name, &fault.undo).await?;
            return Ok(Value::Null);
        };
        let mine = std::mem::replace(&mut ctx.spec, sub);
        let r = nemesis.stop(ctx, fault).await;
        ctx.spec = mine;
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::System;

    fn scope(system: System, local: bool) -> Scope {
        let placement = if local {
            Placement::Local
        } else {
            Placement::Endpoints
        };
        Scope {
            system,
            client: ClientChoice::Builtin,
            workload: Kind::FencedCounter,
            nemesis: NemesisSpec::of("mixed").unwrap(),
            placement,
            toxiproxy: ToxiproxyChoice::Embedded,
        }
    }

    fn faults(v: &[NemesisSpec]) -> Vec<&str> {
        v.iter().map(|s| s.fault.as_str()).collect()
    }

    #[test]
    fn the_default_mix_keeps_what_applies_to_the_system() {
        let m = NemesisSpec::of("mixed").unwrap();
        let etcd = applicable(&m, &scope(System::Etcd, true), true).unwrap();
        let f = faults(&etcd);
        assert!(f.contains(&"pause-node") && f.contains(&"partition-node"));
        assert!(!f.contains(&"clock-jump") && !f.contains(&"failover"));
        let redlock = applicable(&m, &scope(System::Redlock, true), true).unwrap();
        let f = faults(&redlock);
        assert!(f.contains(&"clock-jump") && !f.contains(&"partition-node"));
        let remote = applicable(&m, &scope(System::Etcd, false), true).unwrap();
        let f = faults(&remote);
        assert!(
            f.contains(&"latency") && !f.contains(&"pause-node"),
            "{f:?}"
        );
    }

    #[test]
    fn a_mix_of_nothing_that_applies_is_refused() {
        let mut m = NemesisSpec::of("mixed").unwrap();
        m.faults = vec!["clock-jump".into()];
        let e = applicable(&m, &scope(System::Etcd, true), true).unwrap_err();
        assert!(e.contains("none of the faults"), "{e}");
    }

    #[test]
    fn a_sequence_takes_the_listed_faults_in_order_and_cycles() {
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let got: Vec<usize> = (0..7)
            .map(|d| pick(Order::Sequence, 3, d, &mut rng))
            .collect();
        assert_eq!(got, [0, 1, 2, 0, 1, 2, 0]);
        let random: Vec<usize> = (0..50)
            .map(|d| pick(Order::Random, 3, d, &mut rng))
            .collect();
        assert_ne!(random[..7], got[..], "random draws are not the sequence");
        let text = "name = \"m\"\nfault = \"mixed\"\norder = \"sequence\"\nfaults = [\"pause-holder\", \"kill-holder\"]\n";
        let src = crate::toml_file::Source {
            name: "m.toml".into(),
            text: text.into(),
        };
        assert_eq!(spec::from_source(&src).unwrap().order, Order::Sequence);
        let bad = crate::toml_file::Source {
            name: "p.toml".into(),
            text: "name = \"p\"\nfault = \"pause-holder\"\norder = \"sequence\"\n".into(),
        };
        let e = spec::from_source(&bad).unwrap_err().to_string();
        assert!(e.contains("order") && e.contains("mixed only"), "{e}");
    }

    #[test]
    fn a_drawn_fault_names_its_point() {
        let mut t = json!({"slot": 1});
        mark(&mut t, "pause-holder-2.5l");
        assert_eq!(
            t,
            json!({"slot": 1, "mixed": true, "point": "pause-holder-2.5l"})
        );
        let mut s = json!("n1");
        mark(&mut s, "p");
        assert_eq!(s, json!({"target": "n1", "mixed": true, "point": "p"}));
    }

    #[test]
    fn a_mix_cannot_draw_from_a_mix() {
        let mut m = NemesisSpec::of("mixed").unwrap();
        m.faults = vec!["mixed".into()];
        assert!(pool(&m).is_err());
        m.faults = vec!["meteor".into()];
        assert!(pool(&m).unwrap_err().contains("meteor"));
    }
}
