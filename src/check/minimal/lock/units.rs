//! What a lock witness search removes: units (an invocation with its
//! completion, paired per process as the checker pairs them; an unmatched
//! line is a unit alone) grouped by process, and what each unit depends on
//! (rule b): the write of the value a read returns, the grant behind a
//! fence. A closure adds those to any set of units, so a kept op's
//! dependency never goes.

use crate::history::{Op, OpType, Process};
use serde_json::Value;
use std::collections::HashMap;

/// One unit: positions of its lines in the history (file order).
#[derive(Clone, Debug)]
pub struct Unit {
    pub ops: Vec<usize>,
    pub proc: usize,
}

/// A history cut into units.
pub struct Units {
    pub ops: Vec<Op>,
    pub units: Vec<Unit>,
    /// Position → its unit.
    pub unit_of: Vec<usize>,
    /// Process id → the process.
    pub procs: Vec<Process>,
    /// Process id → its units, in file order.
    pub proc_units: Vec<Vec<usize>>,
    /// Unit → the units it depends on.
    pub deps: Vec<Vec<usize>>,
}

/// Lock functions as the checker reads them (acquire, renew, release and
/// their election and adapter names).
pub fn is_grant_f(f: &str) -> bool {
    matches!(f, "acquire" | "campaign" | "lock")
}

pub fn is_release_f(f: &str) -> bool {
    matches!(
        f,
        "release" | "resign" | "unlock" | "lost-leadership" | "lost"
    )
}

pub fn is_lock_f(f: &str) -> bool {
    is_grant_f(f) || is_release_f(f) || f == "renew"
}

impl Units {
    /// Cut `ops` (in file order) into units.
    pub fn new(ops: Vec<Op>) -> Units {
        let mut procs: Vec<Process> = Vec::new();
        let mut proc_id: HashMap<Process, usize> = HashMap::new();
        let mut pending: HashMap<(usize, String), usize> = HashMap::new();
        let mut units: Vec<Unit> = Vec::new();
        let mut unit_of = Vec::with_capacity(ops.len());
        for (i, op) in ops.iter().enumerate() {
            let p = *proc_id.entry(op.process.clone()).or_insert_with(|| {
                procs.push(op.process.clone());
                procs.len() - 1
            });
            // Nemesis lines pair by fault function and id (faults overlap).
            let slot = if op.process.is_nemesis() {
                let id = op.value.get("id").map(Value::to_string);
                format!("{}/{}", op.f, id.unwrap_or_default())
            } else {
                String::new()
            };
            let open = if op.kind == OpType::Invoke {
                None
            } else {
                pending.remove(&(p, slot.clone()))
            };
            let u = match open {
                Some(u) => {
                    units[u].ops.push(i);
                    u
                }
                None => {
                    units.push(Unit {
                        ops: vec![i],
                        proc: p,
                    });
                    units.len() - 1
                }
            };
            if op.kind == OpType::Invoke {
                pending.insert((p, slot), u);
            }
            unit_of.push(u);
        }
        let mut proc_units = vec![Vec::new(); procs.len()];
        for (u, unit) in units.iter().enumerate() {
            proc_units[unit.proc].push(u);
        }
        let mut me = Units {
            ops,
            units,
            unit_of,
            procs,
            proc_units,
            deps: Vec::new(),
        };
        me.deps = me.dependencies();
        me
    }

    fn line(&self, u: usize, k: usize) -> Option<&Op> {
        self.units[u].ops.get(k).map(|&i| &self.ops[i])
    }

    /// The unit's first line (its invocation, normally).
    pub fn head(&self, u: usize) -> &Op {
        &self.ops[self.units[u].ops[0]]
    }

    /// The completion, if the unit has one.
    pub fn done(&self, u: usize) -> Option<&Op> {
        self.line(u, 1)
            .or_else(|| Some(self.head(u)).filter(|o| o.kind != OpType::Invoke))
    }

    pub fn f(&self, u: usize) -> &str {
        &self.head(u).f
    }

    pub fn is_nemesis(&self, u: usize) -> bool {
        self.procs[self.units[u].proc].is_nemesis()
    }

    pub fn outcome(&self, u: usize) -> Option<OpType> {
        self.done(u).map(|o| o.kind)
    }

    /// The explicit owner (completion first), if any line names one.
    pub fn explicit_owner(&self, u: usize) -> Option<&str> {
        let d = self.done(u).and_then(|o| o.owner.as_deref());
        d.or(self.head(u).owner.as_deref())
    }

    /// The owner as the checker reads it: explicit, else the process's.
    pub fn owner(&self, u: usize) -> Option<String> {
        match self.explicit_owner(u) {
            Some(o) => Some(o.to_string()),
            None => self.procs[self.units[u].proc].default_owner(),
        }
    }

    pub fn fence(&self, u: usize) -> Option<u64> {
        self.done(u).and_then(|o| o.fence).or(self.head(u).fence)
    }

    pub fn key(&self, u: usize) -> Option<&str> {
        let d = self.done(u).and_then(|o| o.key.as_deref());
        d.or(self.head(u).key.as_deref())
    }

    /// A write's value (the invocation's, else the completion's), or a
    /// read's result.
    pub fn value(&self, u: usize) -> &Value {
        let (inv, done) = (&self.head(u).value, self.done(u).map(|o| &o.value));
        match (self.f(u), done) {
            ("read", Some(v)) => v,
            (_, Some(v)) if inv.is_null() => v,
            _ => inv,
        }
    }

    /// An `ok` grant.
    pub fn is_grant(&self, u: usize) -> bool {
        is_grant_f(self.f(u)) && self.outcome(u) == Some(OpType::Ok) && !self.is_nemesis(u)
    }

    pub fn first(&self, u: usize) -> usize {
        self.units[u].ops[0]
    }

    /// Rule b: an ok read depends on every write of the value it read (to
    /// its key); an op carrying a fence depends on the grants of that
    /// fence.
    fn dependencies(&self) -> Vec<Vec<usize>> {
        let mut writes: HashMap<(&str, String), Vec<usize>> = HashMap::new();
        let mut grants: HashMap<u64, Vec<usize>> = HashMap::new();
        for u in 0..self.units.len() {
            if self.is_nemesis(u) {
                continue;
            }
            if self.f(u) == "write" {
                let k = (self.key(u).unwrap_or(""), self.value(u).to_string());
                writes.entry(k).or_default().push(u);
            }
            if let (true, Some(f)) = (self.is_grant(u), self.fence(u)) {
                grants.entry(f).or_default().push(u);
            }
        }
        let mut deps = vec![Vec::new(); self.units.len()];
        for (u, d) in deps.iter_mut().enumerate() {
            if self.is_nemesis(u) {
                continue;
            }
            let read_ok = self.f(u) == "read" && self.outcome(u) == Some(OpType::Ok);
            if read_ok && !self.value(u).is_null() {
                let k = (self.key(u).unwrap_or(""), self.value(u).to_string());
                d.extend(writes.get(&k).into_iter().flatten());
            }
            if let (false, Some(f)) = (is_grant_f(self.f(u)), self.fence(u)) {
                d.extend(grants.get(&f).into_iter().flatten());
            }
            d.retain(|&x| x != u);
        }
        // Release-like units by the owner they name, in file order.
        let mut ends: HashMap<&str, Vec<usize>> = HashMap::new();
        for u in 0..self.units.len() {
            if !self.is_nemesis(u) && is_release_f(self.f(u)) {
                if let Some(o) = self.explicit_owner(u) {
                    ends.entry(o).or_default().push(u);
                }
            }
        }
        for v in ends.values_mut() {
            v.sort_by_key(|&u| self.first(u));
        }
        for list in &self.proc_units {
            for (i, &g) in list.iter().enumerate() {
                if let Some(end) = self.hold_end(g, &list[i + 1..], &ends) {
                    deps[g].push(end);
                }
            }
        }
        deps
    }

    /// The release (or lost event) that ends the hold grant `g` begins:
    /// among its process's later units `after`, else (the process went on
    /// to the end without one) the first later unit of another process
    /// that names the same owner, as a worker's replacement after an
    /// `info` or an adapter's `lost` event does. Without it a kept grant's
    /// hold would last to the end of the history. `None`: the hold has no
    /// such end (a grant to another owner in the process ends it first, or
    /// nothing does).
    fn hold_end(
        &self,
        g: usize,
        after: &[usize],
        ends: &HashMap<&str, Vec<usize>>,
    ) -> Option<usize> {
        if !self.is_grant(g) {
            return None;
        }
        let owner = self.owner(g);
        for &u in after {
            let same = self.owner(u) == owner;
            if is_release_f(self.f(u)) && same {
                return Some(u);
            }
            if self.is_grant(u) && !same {
                return None;
            }
        }
        let start = self.first(g);
        ends.get(owner?.as_str())?
            .iter()
            .copied()
            .find(|&u| self.units[u].proc != self.units[g].proc && self.first(u) > start)
    }

    /// Add every dependency of a kept unit, transitively.
    pub fn close(&self, kept: &mut [bool]) {
        let mut work: Vec<usize> = (0..kept.len()).filter(|&u| kept[u]).collect();
        while let Some(u) = work.pop() {
            for &d in &self.deps[u] {
                if !kept[d] {
                    kept[d] = true;
                    work.push(d);
                }
            }
        }
    }

    /// Processes: add the process of every dependency of a kept process's
    /// units, transitively.
    pub fn close_procs(&self, kept: &mut [bool]) {
        let mut work: Vec<usize> = (0..kept.len()).filter(|&p| kept[p]).collect();
        while let Some(p) = work.pop() {
            for &u in &self.proc_units[p] {
                for &d in &self.deps[u] {
                    let q = self.units[d].proc;
                    if !kept[q] {
                        kept[q] = true;
                        work.push(q);
                    }
                }
            }
        }
    }

    /// Units of the kept processes.
    pub fn units_of_procs(&self, procs: &[bool]) -> Vec<bool> {
        self.units.iter().map(|u| procs[u.proc]).collect()
    }

    /// The lines of the kept units, in file order, with their indexes.
    pub fn lines(&self, kept: &[bool]) -> Vec<Op> {
        (0..self.ops.len())
            .filter(|&i| kept[self.unit_of[i]])
            .map(|i| self.ops[i].clone())
            .collect()
    }

    /// Positions of every line whose `index` is in `indexes`.
    pub fn units_with_index(&self, indexes: &[u64]) -> Vec<usize> {
        (0..self.ops.len())
            .filter(|&i| indexes.contains(&self.ops[i].index))
            .map(|i| self.unit_of[i])
            .collect()
    }
}
