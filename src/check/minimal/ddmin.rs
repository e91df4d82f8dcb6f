//! Delta debugging (Zeller's ddmin) over units with a fixed core: the
//! search the witness histories use, with the checker as the oracle and a
//! budget counted in oracle calls.

/// What a search cost and whether it finished.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Search {
    /// Oracle calls made.
    pub calls: u64,
    /// The budget ran out before the result was 1-minimal.
    pub exhausted: bool,
}

/// The smallest set of units (`true` = kept) for which `oracle` holds,
/// starting from all units kept. Units with `fixed[i]` are never removed.
/// `oracle` must hold for all units kept (the caller checked it). The
/// result is 1-minimal (removing any one remaining non-fixed unit makes
/// the oracle fail) unless `Search::exhausted`. The first call tries the
/// core alone (only the fixed units), which is often the answer.
pub fn ddmin(
    fixed: &[bool],
    budget: u64,
    mut oracle: impl FnMut(&[bool]) -> bool,
) -> (Vec<bool>, Search) {
    let n = fixed.len();
    let mut kept = vec![true; n];
    let mut s = Search::default();
    let mut call = |cand: &[bool], s: &mut Search| -> Option<bool> {
        if s.calls >= budget {
            s.exhausted = true;
            return None;
        }
        s.calls += 1;
        Some(oracle(cand))
    };
    // The core alone.
    let mut free: Vec<usize> = (0..n).filter(|&i| !fixed[i]).collect();
    if free.is_empty() {
        return (kept, s);
    }
    let core: Vec<bool> = fixed.to_vec();
    match call(&core, &mut s) {
        Some(true) => return (core, s),
        Some(false) => {}
        None => return (kept, s),
    }
    let mut parts = 2usize;
    while !free.is_empty() {
        let chunk = free.len().div_ceil(parts.min(free.len()));
        let mut reduced = false;
        // Try removing each chunk (keeping its complement).
        for start in (0..free.len()).step_by(chunk.max(1)) {
            let end = (start + chunk).min(free.len());
            let mut cand = kept.clone();
            for &i in &free[start..end] {
                cand[i] = false;
            }
            match call(&cand, &mut s) {
                Some(true) => {
                    kept = cand;
                    free.drain(start..end);
                    parts = (parts - 1).max(2);
                    reduced = true;
                    break;
                }
                Some(false) => {}
                None => return (kept, s),
            }
        }
        if reduced {
            continue;
        }
        if chunk <= 1 {
            break;
        }
        parts = (parts * 2).min(free.len());
    }
    (kept, s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The oracle holds when units 3 and 7 are both kept.
    fn needs_3_and_7(c: &[bool]) -> bool {
        c[3] && c[7]
    }

    #[test]
    fn finds_the_two_needed_units() {
        let fixed = vec![false; 20];
        let (kept, s) = ddmin(&fixed, 1000, needs_3_and_7);
        let left: Vec<usize> = (0..20).filter(|&i| kept[i]).collect();
        assert_eq!(left, vec![3, 7]);
        assert!(!s.exhausted);
    }

    #[test]
    fn fixed_units_stay_and_the_core_is_tried_first() {
        let mut fixed = vec![false; 10];
        fixed[3] = true;
        fixed[7] = true;
        let (kept, s) = ddmin(&fixed, 1000, needs_3_and_7);
        assert_eq!(kept, fixed);
        assert_eq!(s.calls, 1);
    }

    #[test]
    fn a_spent_budget_is_reported_and_keeps_a_passing_set() {
        let fixed = vec![false; 64];
        let (kept, s) = ddmin(&fixed, 3, needs_3_and_7);
        assert!(s.exhausted && s.calls == 3);
        assert!(needs_3_and_7(&kept));
    }

    #[test]
    fn the_result_is_one_minimal() {
        // Holds when at least one of 2, 5 and one of 11, 12 are kept.
        let o = |c: &[bool]| (c[2] || c[5]) && (c[11] || c[12]);
        let (kept, _) = ddmin(&[false; 16], 1000, o);
        assert!(o(&kept));
        for i in (0..16).filter(|&i| kept[i]) {
            let mut c = kept.clone();
            c[i] = false;
            assert!(!o(&c), "unit {i} could still go");
        }
    }
}
