//! Check 5's local proofs on a counter: a lost update shown by two
//! acknowledged writes alone, without the whole-history total.
//!
//! A counter's writes are increments: each writes the value it read plus
//! one. However the increments interleave, a correct run gives every
//! acknowledged write its own value, and a write that begins after another
//! was acknowledged writes a higher value. So two acknowledged writes of
//! one key prove a lost update when
//!
//! - **same-value**: both wrote the same value (each read its predecessor;
//!   one of the two increments is not counted), whether or not they
//!   overlap in time; or
//! - **overwritten**: the second began after the first was acknowledged and
//!   wrote a lower value (it never read the first's: at least `first + 1 −
//!   second` increments are lost).
//!
//! Both are facts of the two ops alone, so a sub-history holding both
//! shows the same proof. Each second write is paired with one first: the
//! earliest acknowledged write of the same value, else the highest value
//! acknowledged before the second began (the earliest of equals). A
//! regression only the final read shows is left to the total.
//! Memory: one entry per acknowledged write of the key.

use super::witness::RequestRef;
use std::collections::HashMap;

/// An acknowledged counter write.
#[derive(Clone, Debug)]
pub struct Acked {
    pub req: RequestRef,
    pub value: i64,
}

/// A lost update proven by two acknowledged writes.
#[derive(Clone, Debug)]
pub struct Pair {
    /// `same-value` or `overwritten`.
    pub rule: &'static str,
    pub first: RequestRef,
    pub second: RequestRef,
    /// Increments lost, at least.
    pub lost: i64,
}

/// Every second write's proof, in the order the second writes completed.
pub fn pairs(mut writes: Vec<Acked>) -> Vec<Pair> {
    writes.sort_by_key(|w| (w.req.completed_ns, w.req.op));
    // The earliest write of each value (completion order).
    let mut first_of: HashMap<i64, usize> = HashMap::new();
    for (i, w) in writes.iter().enumerate() {
        first_of.entry(w.value).or_insert(i);
    }
    // prefix[i]: the write with the highest value among writes[..=i].
    let mut prefix: Vec<usize> = Vec::with_capacity(writes.len());
    for (i, w) in writes.iter().enumerate() {
        let best = match prefix.last() {
            Some(&b) if writes[b].value >= w.value => b,
            _ => i,
        };
        prefix.push(best);
    }
    let mut out = Vec::new();
    for (i, w) in writes.iter().enumerate() {
        let first = first_of[&w.value];
        if first != i {
            out.push(pair("same-value", &writes[first], w, 1));
            continue;
        }
        // Writes acknowledged before `w` began.
        let before = writes.partition_point(|x| x.req.completed_ns < w.req.invoked_ns);
        if before == 0 {
            continue;
        }
        let top = &writes[prefix[before - 1]];
        if top.value > w.value {
            out.push(pair("overwritten", top, w, top.value + 1 - w.value));
        }
    }
    out
}

fn pair(rule: &'static str, first: &Acked, second: &Acked, lost: i64) -> Pair {
    Pair {
        rule,
        first: first.req.clone(),
        second: second.req.clone(),
        lost,
    }
}

/// The sentence for a pair on key `name`.
pub fn text(p: &Pair, name: &str) -> String {
    let who = |r: &RequestRef| match r.fence {
        Some(f) => format!("op {} (owner {}, fence {f})", r.op, r.owner),
        None => format!("op {} (owner {})", r.op, r.owner),
    };
    let (a, b) = (who(&p.first), who(&p.second));
    match p.rule {
        "same-value" => format!(
            "two acknowledged writes set '{name}' to {}: {a} and {b}; each read the value \
             before it, so one of the two updates was lost",
            p.second.value
        ),
        _ => format!(
            "{b} wrote {} to '{name}' after {a} had been acknowledged writing {}: it never \
             read that value, so at least {} update(s) were lost",
            p.second.value, p.first.value, p.lost
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(op: u64, inv: u64, done: u64, value: i64) -> Acked {
        Acked {
            req: RequestRef {
                f: "write".into(),
                process: "0".into(),
                owner: format!("o{op}"),
                fence: None,
                op,
                invoked_ns: inv,
                completed_ns: done,
                seq: None,
                value: value.into(),
            },
            value,
        }
    }

    fn found(ps: &[Pair]) -> Vec<(&str, u64, u64, i64)> {
        ps.iter()
            .map(|p| (p.rule, p.first.op, p.second.op, p.lost))
            .collect()
    }

    #[test]
    fn increments_in_order_prove_nothing() {
        let ws = (1..=5)
            .map(|i| w(i, i * 10, i * 10 + 5, i as i64))
            .collect();
        assert!(pairs(ws).is_empty());
    }

    #[test]
    fn overlapping_increments_of_distinct_values_prove_nothing() {
        // 2 began before 1 was acknowledged; distinct values.
        let ws = vec![w(1, 10, 30, 2), w(2, 20, 40, 1)];
        assert!(pairs(ws).is_empty());
    }

    #[test]
    fn two_writes_of_one_value_are_a_lost_update_even_when_they_overlap() {
        let ws = vec![w(1, 10, 30, 1), w(2, 20, 40, 1), w(3, 50, 60, 2)];
        assert_eq!(found(&pairs(ws)), vec![("same-value", 1, 2, 1)]);
    }

    #[test]
    fn a_lower_write_after_an_acknowledged_higher_one_overwrote_it() {
        // The paused holder read 1 and wrote 2 after the counter reached 4.
        let ws = vec![
            w(1, 10, 15, 2),
            w(2, 20, 25, 3),
            w(3, 30, 35, 4),
            w(4, 40, 45, 1),
        ];
        assert_eq!(found(&pairs(ws)), vec![("overwritten", 3, 4, 4)]);
    }

    #[test]
    fn a_duplicate_is_paired_with_the_earliest_write_of_its_value() {
        let ws = vec![
            w(1, 10, 15, 1),
            w(2, 20, 25, 2),
            w(3, 30, 35, 2),
            w(4, 40, 45, 2),
        ];
        assert_eq!(
            found(&pairs(ws)),
            vec![("same-value", 2, 3, 1), ("same-value", 2, 4, 1)]
        );
    }
}
