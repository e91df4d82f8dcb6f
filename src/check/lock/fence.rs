//! Check 3, fence order: per lock key, a grant whose acquire began after
//! another owner's grant had completed must carry a greater fence.
//!
//! Streaming: per key, the highest fence granted so far and the highest
//! among other owners ([`Top2`]); an acquire takes a snapshot when it is
//! invoked (so only grants that completed strictly before it count) and
//! compares its own fence with it when it completes.

use super::witness::{secs, GrantRef, Witness, WitnessData};
use foldhash::HashMap;
use std::collections::VecDeque;
use std::sync::Arc;

/// The highest fence granted on a key, and the highest of any other owner.
#[derive(Clone, Debug, Default)]
pub struct Top2 {
    first: Option<Arc<GrantRef>>,
    /// Highest fence among owners other than `first`'s.
    second: Option<Arc<GrantRef>>,
}

fn fence(g: &Option<Arc<GrantRef>>) -> Option<u64> {
    g.as_ref().and_then(|g| g.fence)
}

impl Top2 {
    /// Add a completed grant that carries a fence.
    pub fn add(&mut self, g: &Arc<GrantRef>) {
        let Some(f) = g.fence else { return };
        let same_as_first = self.first.as_ref().is_some_and(|a| a.owner == g.owner);
        if same_as_first {
            if below(fence(&self.first), f) {
                self.first = Some(g.clone());
            }
        } else if below(fence(&self.first), f) {
            self.second = self.first.take();
            self.first = Some(g.clone());
        } else if below(fence(&self.second), f) {
            self.second = Some(g.clone());
        }
    }

    /// The grant with the highest fence not owned by `owner`.
    pub fn best_other(&self, owner: &str) -> Option<&Arc<GrantRef>> {
        match &self.first {
            Some(a) if a.owner != owner => Some(a),
            _ => self.second.as_ref(),
        }
    }
}

/// Whether `x` is absent or below `f`.
fn below(x: Option<u64>, f: u64) -> bool {
    x.map_or(true, |x| x < f)
}

/// The fence-order witness, if `second`'s fence is not above the snapshot.
pub fn check(
    key: &str,
    snapshot: &Top2,
    second: &Arc<GrantRef>,
    second_inv: u64,
) -> Option<Witness> {
    let f = second.fence?;
    let first = snapshot.best_other(&second.owner)?;
    let ff = first.fence?;
    if f > ff {
        return None;
    }
    let text = format!(
        "{}; owner {} invoked its acquire at {}, after that grant completed, and was granted \
         fence {f} (op {}), not above {ff}: fences must increase on lock '{key}'",
        first.acquired(),
        second.owner,
        secs(second_inv),
        second.acquire_op,
    );
    Some(Witness {
        text,
        data: WitnessData::FenceOrder {
            key: key.to_string(),
            first: (**first).clone(),
            second: (**second).clone(),
        },
    })
}

/// Recent grants by fence, to name the grants behind a storage witness.
/// Bounded: the oldest entries are forgotten first.
#[derive(Default, Debug)]
pub struct FenceIndex {
    map: HashMap<u64, (Arc<GrantRef>, u64)>,
    order: VecDeque<u64>,
}

/// How many grants the index remembers.
const FENCE_INDEX_CAP: usize = 1 << 16;

impl FenceIndex {
    /// Remember `g` and the lease it uses.
    pub fn insert(&mut self, g: &Arc<GrantRef>, lease: u64) {
        let Some(f) = g.fence else { return };
        if self.map.insert(f, (g.clone(), lease)).is_none() {
            self.order.push_back(f);
        }
        while self.order.len() > FENCE_INDEX_CAP {
            if let Some(old) = self.order.pop_front() {
                self.map.remove(&old);
            }
        }
    }

    pub fn get(&self, f: u64) -> Option<&(Arc<GrantRef>, u64)> {
        self.map.get(&f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(owner: &str, f: u64) -> Arc<GrantRef> {
        Arc::new(GrantRef {
            owner: owner.into(),
            process: "0".into(),
            fence: Some(f),
            acquire_op: f,
            invoked_ns: 0,
            completed_ns: 0,
            lease_ms: None,
        })
    }

    #[test]
    fn best_other_skips_the_same_owner() {
        let mut t = Top2::default();
        t.add(&g("a", 5));
        t.add(&g("b", 3));
        t.add(&g("a", 7));
        assert_eq!(t.best_other("a").unwrap().fence, Some(3));
        assert_eq!(t.best_other("b").unwrap().fence, Some(7));
        t.add(&g("c", 9));
        assert_eq!(t.best_other("c").unwrap().fence, Some(7));
    }

    #[test]
    fn equal_fence_of_another_owner_is_a_violation() {
        let mut t = Top2::default();
        t.add(&g("a", 5));
        assert!(check("k", &t, &g("b", 5), 10).is_some());
        assert!(check("k", &t, &g("a", 5), 10).is_none());
        assert!(check("k", &t, &g("b", 6), 10).is_none());
    }
}
