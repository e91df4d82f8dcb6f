//! `together`: two faults as one injection. The file's `together` table
//! names two nemesis files (names or paths, loaded as `mixed` loads its
//! `faults`) and how long after the first the second starts:
//!
//! ```toml
//! name = "k2-etcd"
//! fault = "together"
//! together = { first = "partition-holder", second = "delay-storage", delay_ms = 0 }
//! ```
//!
//! When either fault aims at the holder, the pair waits for one worker
//! inside its critical section and both strike that worker (the holder is
//! pinned for them: [`Ctx::pinned`]); the other may be a server fault.
//! Each fault writes its undo entries before it acts, as every fault does,
//! so both are in the undo log before their effects and `lockjaw heal`
//! takes both back after a SIGKILL. Each is taken back at the end of its
//! own length (the later-started first when both end at once); the end of
//! the run takes both back at once. The injection landed only if both
//! landed (each by its own rule, [`super::schedule::Injection::landed`]);
//! its history ops name the fault `together` and carry both faults'
//! names, targets and records (`first`, `second`), so an anomaly in its
//! window is attributed to the pair.

use super::spec::{self, NemesisSpec, Target};
use super::{registry, Ctx, Fault, Nemesis, NemesisError};
use crate::workload::step::Phase;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::cell::Cell;
use std::time::Duration;

/// The `together` table of a nemesis file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TogetherSpec {
    /// The nemesis file (name or path) that strikes first.
    pub first: String,
    /// The one that strikes `delay_ms` after it.
    pub second: String,
    /// The second's start after the first's is in place (0: at once).
    #[serde(default)]
    pub delay_ms: u64,
}

/// Faults a pair cannot hold: no fault, and the faults made of others.
const NEVER: &[&str] = &["none", "mixed", "together"];

const ENDED: &str = "the run ended before it struck";

/// At most a day between the two, as every length of a nemesis file.
const MAX_DELAY_MS: u64 = 86_400_000;

thread_local! {
    static DEPTH: Cell<u32> = const { Cell::new(0) };
}

/// The two nemesis files of `spec`, loaded and checked.
pub fn parts(spec: &NemesisSpec) -> Result<[NemesisSpec; 2], String> {
    let Some(t) = &spec.together else {
        return Err("names no faults".into());
    };
    // A file that names itself (or another pair) would recurse.
    if DEPTH.with(|d| d.get()) > 0 {
        return Err("a together nemesis cannot hold another together one".into());
    }
    DEPTH.with(|d| d.set(d.get() + 1));
    let load =
        |which: &str, name: &str| spec::load(name).map_err(|e| format!("{which} = {name:?}: {e}"));
    let loaded = load("first", &t.first).and_then(|a| Ok([a, load("second", &t.second)?]));
    DEPTH.with(|d| d.set(d.get() - 1));
    let loaded = loaded?;
    for (which, s) in ["first", "second"].iter().zip(&loaded) {
        if NEVER.contains(&s.fault.as_str()) {
            return Err(format!(
                "{which} = {:?} is fault {}, which a pair cannot hold",
                s.name, s.fault
            ));
        }
    }
    Ok(loaded)
}

/// The faults a nemesis injects, each as its own file: a pair's two, a
/// mix's pool (a pair in it expanded), or the nemesis itself.
pub fn leaves(spec: &NemesisSpec) -> Vec<NemesisSpec> {
    match spec.fault.as_str() {
        "together" => parts(spec).map(Vec::from).unwrap_or_default(),
        "mixed" => super::mixed::pool(spec)
            .unwrap_or_default()
            .iter()
            .flat_map(leaves)
            .collect(),
        _ => vec![spec.clone()],
    }
}

/// The registry's parameter check: the table is there, both files load,
/// neither is `none`, `mixed` or `together`, and the pair sets no length
/// of its own.
pub fn check(spec: &NemesisSpec) -> Result<(), registry::ParamError> {
    const HINT: &str = "e.g. together = { first = \"partition-holder\", second = \"delay-storage\", delay_ms = 0 }";
    let Some(t) = &spec.together else {
        return Err(("fault", "together needs a `together` table".into(), HINT));
    };
    if t.delay_ms > MAX_DELAY_MS {
        return Err((
            "together.delay_ms",
            format!("{} ms is more than a day", t.delay_ms),
            "give the second fault's start after the first's in ms (0: at once)",
        ));
    }
    if spec.duration_ms.is_some() || spec.duration_leases.is_some() {
        let field = if spec.duration_ms.is_some() {
            "duration_ms"
        } else {
            "duration_leases"
        };
        return Err((
            field,
            "a together nemesis has no length of its own".into(),
            "set each fault's length in its own file; remove it here",
        ));
    }
    parts(spec).map(drop).map_err(|e| {
        (
            "together",
            e,
            "name two nemesis files such as \"partition-holder\" and \"delay-storage\", neither none, mixed nor together",
        )
    })
}

/// Where a pair applies: where both its faults apply.
pub fn support(c: &super::scope::Scope) -> Result<(), String> {
    let [a, b] = parts(&c.nemesis)?;
    for (which, s) in [("first", a), ("second", b)] {
        let name = s.name.clone();
        registry::supports(&c.with_nemesis(s))
            .map_err(|e| format!("its {which} fault ({name}) does not apply: {e}"))?;
    }
    Ok(())
}

/// One of the two faults of an injection.
struct Part {
    which: &'static str,
    spec: NemesisSpec,
    nemesis: Box<dyn Nemesis>,
    /// Its fault once started, and the run-clock ns it ends at.
    fault: Option<(Fault, u64)>,
    /// Why it did not start: an error (`true`), or the run ended first.
    missed: Option<(String, bool)>,
}

impl Part {
    fn new(which: &'static str, spec: NemesisSpec) -> Part {
        Part {
            which,
            nemesis: registry::build(&spec),
            spec,
            fault: None,
            missed: None,
        }
    }

    /// Start it with its own file as the context's spec, on `pin`.
    async fn start(&mut self, ctx: &mut Ctx, pin: &Option<super::WorkerEvent>) {
        let mine = std::mem::replace(&mut ctx.spec, self.spec.clone());
        ctx.pinned = pin.clone();
        let r = self.nemesis.start(ctx).await;
        ctx.pinned = None;
        ctx.spec = mine;
        match r {
            Ok(Some(f)) => {
                let end = ctx.clock.now() + f.hold.as_nanos() as u64;
                self.fault = Some((f, end));
            }
            Ok(None) => self.missed = Some((ENDED.into(), false)),
            Err(e) => self.missed = Some((e.to_string(), true)),
        }
    }

    /// Take it back; its record for the pair's `stop`.
    async fn stop(&mut self, ctx: &mut Ctx) -> (Value, Option<String>) {
        let Some((fault, _)) = &self.fault else {
            return match self.missed.clone() {
                Some((e, true)) => (Value::Null, Some(format!("did not start: {e}"))),
                other => {
                    let why = other.map(|m| m.0).unwrap_or_default();
                    (json!({ "cut_short": true, "not_started": why }), None)
                }
            };
        };
        let mine = std::mem::replace(&mut ctx.spec, self.spec.clone());
        let r = self.nemesis.stop(ctx, fault).await;
        ctx.spec = mine;
        match r {
            Ok(d) => (d, None),
            Err(e) => (Value::Null, Some(e.to_string())),
        }
    }

    fn record(&self, detail: Value, error: Option<String>) -> Value {
        let mut v = json!({
            "fault": self.nemesis.name(),
            "file": self.spec.name,
            "landed": self.fault.is_some() && super::schedule::landed(&detail, error.is_some()),
            "detail": detail,
        });
        if let Some((f, _)) = &self.fault {
            v["target"] = f.target.clone();
        }
        if let Some(e) = error {
            v["error"] = json!(e);
        }
        v
    }
}

/// Two faults as one injection.
#[derive(Default)]
pub struct Together {
    current: Vec<Part>,
}

#[async_trait]
impl Nemesis for Together {
    fn name(&self) -> &'static str {
        "together"
    }

    async fn start(&mut self, ctx: &mut Ctx) -> Result<Option<Fault>, NemesisError> {
        if ctx.is_stopping() {
            return Ok(None);
        }
        let [a, b] = parts(&ctx.spec).map_err(|e| NemesisError::new("together", e))?;
        let delay = Duration::from_millis(ctx.spec.together.as_ref().map_or(0, |t| t.delay_ms));
        let pin = if [&a, &b].iter().any(|s| s.target == Target::Holder) {
            match ctx.wait_for_phase(Phase::Holding).await {
                Some(ev) => Some(ev),
                None => return Ok(None),
            }
        } else {
            None
        };
        let mut first = Part::new("first", a);
        first.start(ctx, &pin).await;
        let Some((f1, _)) = &first.fault else {
            // Nothing was applied: an error is the pair's, the run's end
            // is no injection.
            return match first.missed {
                Some((e, true)) => Err(NemesisError::new("together", format!("first fault: {e}"))),
                _ => Ok(None),
            };
        };
        let invoked_at = f1.invoked_at;
        let mut second = Part::new("second", b);
        if delay.is_zero() || ctx.sleep(delay).await {
            second.start(ctx, &pin).await;
        } else {
            second.missed = Some((ENDED.into(), false));
        }
        let mut target = json!({
            "faults": [first.nemesis.name(), second.nemesis.name()],
            "files": [first.spec.name, second.spec.name],
            "delay_ms": delay.as_millis() as u64,
        });
        let mut undo = Vec::new();
        let mut ends = Vec::new();
        for p in [&first, &second] {
            if let Some((f, end)) = &p.fault {
                target[p.which] = f.target.clone();
                undo.extend(&f.undo);
                ends.push(*end);
            }
        }
        if let Some(ev) = &pin {
            target["slot"] = json!(ev.slot);
            target["process"] = json!(ev.state.process);
        }
        let now = ctx.clock.now();
        let hold = ends.iter().min().map_or(0, |e| e.saturating_sub(now));
        self.current = vec![first, second];
        Ok(Some(Fault {
            invoked_at,
            undo,
            hold: Duration::from_nanos(hold),
            target,
            state: Value::Null,
        }))
    }

    async fn stop(&mut self, ctx: &mut Ctx, fault: &Fault) -> Result<Value, NemesisError> {
        let mut parts = std::mem::take(&mut self.current);
        if parts.is_empty() {
            ctx.revert("together", &fault.undo).await?;
            return Ok(Value::Null);
        }
        // Each at its own end; the later-started first when both end at
        // once (or when the run is ending).
        let mut order: Vec<usize> = (0..parts.len()).rev().collect();
        order.sort_by_key(|&i| parts[i].fault.as_ref().map_or(0, |(_, end)| *end));
        let mut records: Vec<Option<(Value, Option<String>)>> = vec![None; parts.len()];
        for i in order {
            if let Some((_, end)) = &parts[i].fault {
                let wait = end.saturating_sub(ctx.clock.now());
                if wait > 0 && !ctx.is_stopping() {
                    ctx.sleep(Duration::from_nanos(wait)).await;
                }
            }
            records[i] = Some(parts[i].stop(ctx).await);
        }
        let mut detail = json!({});
        let mut errors = Vec::new();
        let mut landed = true;
        let mut cut_short = false;
        for (p, r) in parts.iter_mut().zip(records) {
            let (d, e) = r.unwrap_or((Value::Null, None));
            cut_short |= d.get("cut_short").and_then(Value::as_bool) == Some(true);
            if let Some(e) = &e {
                errors.push(format!("{} fault ({}): {e}", p.which, p.nemesis.name()));
            }
            let rec = p.record(d, e);
            landed &= rec["landed"] == json!(true);
            detail[p.which] = rec;
        }
        if !errors.is_empty() {
            return Err(NemesisError::new("together", errors.join("; ")));
        }
        if cut_short {
            detail["cut_short"] = json!(true);
        } else {
            detail["landed_inside"] = json!(landed);
        }
        Ok(detail)
    }
}

#[cfg(test)]
#[path = "together_tests.rs"]
mod tests;
