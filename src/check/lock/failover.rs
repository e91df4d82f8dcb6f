//! Availability after a holder fault (leader election's failover time):
//! for each nemesis fault aimed at a holder (a `start` invocation whose
//! value names the holder's `owner`: `pause-holder`, `kill-holder`,
//! `partition-holder`), the time until a grant (`acquire`/`campaign` ok)
//! to another owner, measured from the fault and from the end of the old
//! holder's lease (its latest refresh invoked before the fault + lease).
//!
//! A fault ends without a failover when its holder still renews
//! successfully afterwards (a refresh invoked after the fault: the lease
//! survived), when it resigns or releases first (a release without a
//! reason: `lost-leadership` carries one and does not count), or when the
//! history ends first (unresolved). This is
//! information, never a verdict. Events arrive in time order; memory holds
//! one lease end per recently seen owner and the open faults.

use super::event::{Done, FaultMark, Fun, Name, Outcome};
use foldhash::HashMap;
use serde::{Deserialize, Serialize};

/// How many samples the report lists.
const MAX_SAMPLES: usize = 50;
/// Past this many owners, forget lease ends older than a minute.
const OWNER_LIMIT: usize = 4096;

/// Median and maximum of some durations (ms).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub count: u64,
    pub median_ms: Option<f64>,
    pub max_ms: Option<f64>,
}

impl Spread {
    fn of(mut xs: Vec<f64>) -> Spread {
        xs.sort_by(f64::total_cmp);
        let n = xs.len();
        let median_ms = match n {
            0 => None,
            _ if n % 2 == 1 => Some(xs[n / 2]),
            _ => Some((xs[n / 2 - 1] + xs[n / 2]) / 2.0),
        };
        Spread {
            count: n as u64,
            median_ms,
            max_ms: xs.last().copied(),
        }
    }
}

/// One fault and what followed it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FailoverSample {
    pub fault: String,
    /// The nemesis injection id, when the op gave one.
    pub id: Option<u64>,
    pub owner: String,
    pub fault_ns: u64,
    /// The old holder's lease end (its latest refresh invoked before the
    /// fault + lease), when the history shows one.
    pub lease_end_ns: Option<u64>,
    /// `failover`, `survived`, `resigned` or `unresolved`.
    pub outcome: String,
    /// The first grant to another owner after the fault.
    pub next_grant_ns: Option<u64>,
    pub next_owner: Option<String>,
    pub from_fault_ms: Option<f64>,
    /// Negative when the next grant came before the old lease's end.
    pub from_lease_end_ms: Option<f64>,
}

/// The availability figures of a history with holder faults.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FailoverStats {
    /// Holder faults seen.
    pub faults: u64,
    /// Faults followed by a grant to another owner.
    pub failovers: u64,
    /// Faults whose holder kept its lease (renewed after the fault).
    pub survived: u64,
    /// Faults whose holder gave the lock up itself (resign, release)
    /// before anyone else was granted it.
    pub resigned: u64,
    /// Faults with none of these before the history ended.
    pub unresolved: u64,
    /// Time without a holder, from the fault to the next grant.
    pub from_fault: Spread,
    /// From the old lease's end to the next grant (grants before it count
    /// as 0 here; `grants_before_lease_end` counts them).
    pub from_lease_end: Spread,
    pub grants_before_lease_end: u64,
    pub samples: Vec<FailoverSample>,
}

/// Tracks holder faults through a history in time order.
#[derive(Default)]
pub(crate) struct Failover {
    lease_end: HashMap<Name, u64>,
    open: Vec<FailoverSample>,
    done: Vec<FailoverSample>,
}

fn ms(ns: i128) -> f64 {
    ns as f64 / 1e6
}

impl Failover {
    pub fn on_fault(&mut self, f: &FaultMark) {
        self.open.push(FailoverSample {
            fault: f.fault.to_string(),
            id: f.id,
            owner: f.owner.to_string(),
            fault_ns: f.time,
            lease_end_ns: self.lease_end.get(&f.owner).copied(),
            outcome: "unresolved".into(),
            next_grant_ns: None,
            next_owner: None,
            from_fault_ms: None,
            from_lease_end_ms: None,
        });
    }

    pub fn on_done(&mut self, d: &Done, now: u64) {
        if d.outcome != Outcome::Ok {
            return;
        }
        if let (Some(ms), true) = (d.lease_ms, matches!(d.fun, Fun::Acquire | Fun::Renew)) {
            let end = d.inv_time + ms * 1_000_000;
            let e = self.lease_end.entry(d.owner.clone()).or_insert(end);
            *e = (*e).max(end);
            if self.lease_end.len() > OWNER_LIMIT {
                let horizon = now.saturating_sub(60_000_000_000);
                self.lease_end.retain(|_, e| *e >= horizon);
            }
        }
        let refresh_end = match (d.fun, d.lease_ms) {
            (Fun::Acquire | Fun::Renew, Some(ms)) => Some(d.inv_time + ms * 1_000_000),
            _ => None,
        };
        let mut i = 0;
        while i < self.open.len() {
            let s = &mut self.open[i];
            let same = *s.owner == *d.owner;
            let after = d.inv_time > s.fault_ns;
            if let (true, false, Some(end)) = (same, after, refresh_end) {
                // A refresh sent before the fault, answered after it.
                s.lease_end_ns = Some(s.lease_end_ns.map_or(end, |e| e.max(end)));
            }
            // A release with no reason is a resign or release (a
            // `lost-leadership` carries its reason as the value).
            let gave_up = d.fun == Fun::Release && d.value.is_null();
            if same && after && (d.fun == Fun::Renew || gave_up) {
                let mut s = self.open.swap_remove(i);
                s.outcome = if gave_up { "resigned" } else { "survived" }.into();
                self.done.push(s);
            } else if !same && d.fun == Fun::Acquire && d.time > s.fault_ns {
                let mut s = self.open.swap_remove(i);
                s.outcome = "failover".into();
                s.next_grant_ns = Some(d.time);
                s.next_owner = Some(d.owner.to_string());
                s.from_fault_ms = Some(ms(d.time as i128 - s.fault_ns as i128));
                s.from_lease_end_ms = s.lease_end_ns.map(|e| ms(d.time as i128 - e as i128));
                self.done.push(s);
            } else {
                i += 1;
            }
        }
    }

    /// The figures, or `None` when the history had no holder fault.
    pub fn finish(mut self) -> Option<FailoverStats> {
        self.done.append(&mut self.open);
        if self.done.is_empty() {
            return None;
        }
        self.done.sort_by_key(|s| s.fault_ns);
        let by = |o: &str| self.done.iter().filter(|s| s.outcome == o).count() as u64;
        let from_fault = self.done.iter().filter_map(|s| s.from_fault_ms).collect();
        let from_lease: Vec<f64> = self
            .done
            .iter()
            .filter_map(|s| s.from_lease_end_ms)
            .collect();
        Some(FailoverStats {
            faults: self.done.len() as u64,
            failovers: by("failover"),
            survived: by("survived"),
            resigned: by("resigned"),
            unresolved: by("unresolved"),
            from_fault: Spread::of(from_fault),
            grants_before_lease_end: from_lease.iter().filter(|x| **x < 0.0).count() as u64,
            from_lease_end: Spread::of(from_lease.into_iter().map(|x| x.max(0.0)).collect()),
            samples: self.done.into_iter().take(MAX_SAMPLES).collect(),
        })
    }
}

impl FailoverStats {
    /// One line for the summary.
    pub fn summary_line(&self) -> String {
        let f = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.0} ms"));
        format!(
            "availability: {} holder fault(s): {} failover(s), time without a holder from the \
             fault median {}, max {}; from the old lease's end median {}, max {}; {} survived \
             (the holder kept its lease), {} resigned, {} unresolved at the end",
            self.faults,
            self.failovers,
            f(self.from_fault.median_ms),
            f(self.from_fault.max_ms),
            f(self.from_lease_end.median_ms),
            f(self.from_lease_end.max_ms),
            self.survived,
            self.resigned,
            self.unresolved
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn done(fun: Fun, owner: &str, inv: u64, t: u64, lease_ms: Option<u64>) -> Done {
        Done {
            call: 0,
            inv_time: inv,
            time: t,
            index: 0,
            outcome: Outcome::Ok,
            fun,
            key: 0,
            owner: owner.into(),
            process: "0".into(),
            fence: None,
            lease_ms,
            seq: None,
            value: Value::Null,
            held: false,
        }
    }

    fn fault(t: u64, owner: &str) -> FaultMark {
        FaultMark {
            crash_lease_ms: None,
            crash_key: None,
            time: t,
            fault: "kill-holder".into(),
            owner: owner.into(),
            id: Some(1),
        }
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn failover_runs_from_the_fault_and_from_the_lease_end_to_another_grant() {
        let mut f = Failover::default();
        f.on_done(&done(Fun::Acquire, "a", 0, MS, Some(2000)), MS);
        f.on_done(
            &done(Fun::Renew, "a", 500 * MS, 501 * MS, Some(2000)),
            501 * MS,
        );
        f.on_fault(&fault(1000 * MS, "a"));
        // The same owner's renewal invoked before the fault, answered after
        // it: it moves the lease end but proves nothing about survival.
        f.on_done(
            &done(Fun::Renew, "a", 900 * MS, 1100 * MS, Some(2000)),
            1100 * MS,
        );
        f.on_done(
            &done(Fun::Acquire, "b", 2000 * MS, 3000 * MS, Some(2000)),
            3000 * MS,
        );
        let s = f.finish().unwrap();
        assert_eq!((s.faults, s.failovers, s.survived), (1, 1, 0));
        assert_eq!(s.from_fault.median_ms, Some(2000.0));
        // Lease end: the renewal invoked at 900 ms + 2000 ms.
        assert_eq!(s.samples[0].lease_end_ns, Some(2900 * MS));
        assert_eq!(s.from_lease_end.max_ms, Some(100.0));
        assert_eq!(s.grants_before_lease_end, 0);
    }

    #[test]
    fn a_holder_renewing_after_the_fault_survived_and_open_faults_are_unresolved() {
        let mut f = Failover::default();
        f.on_fault(&fault(10 * MS, "a"));
        f.on_done(
            &done(Fun::Renew, "a", 20 * MS, 21 * MS, Some(2000)),
            21 * MS,
        );
        f.on_fault(&fault(30 * MS, "c"));
        let s = f.finish().unwrap();
        assert_eq!(
            (s.faults, s.survived, s.unresolved, s.failovers),
            (2, 1, 1, 0)
        );
        assert_eq!(s.from_fault.count, 0);
        assert!(Failover::default().finish().is_none());
    }

    #[test]
    fn spread_median_of_even_count_is_the_mean_of_the_middle_two() {
        let s = Spread::of(vec![4.0, 1.0, 3.0, 2.0]);
        assert_eq!((s.median_ms, s.max_ms, s.count), (Some(2.5), Some(4.0), 4));
    }
}
