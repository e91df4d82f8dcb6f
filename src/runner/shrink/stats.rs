//! The counting rules of `lockjaw shrink`: a candidate is kept when at
//! least two thirds of its runs reproduce (2 of 3), the final command is
//! confirmed when at least half of its fresh runs do (5 of 10), and every
//! count is written with its 95 % Wilson interval, never as "gone".

use crate::report::trials::{pct, Rate};

/// Kept: at least two thirds of `n` runs reproduced (2 of 3; keeping on
/// 1 of 3 drifts toward rare reproductions).
pub fn kept(k: u64, n: u64) -> bool {
    n > 0 && 3 * k >= 2 * n
}

/// Confirmed: at least half of `n` fresh runs reproduced (5 of 10).
pub fn confirmed(k: u64, n: u64) -> bool {
    n > 0 && 2 * k >= n
}

/// `9 of 10 runs [60 %, 98 %]`: the count and its 95 % Wilson interval.
pub fn runs_text(k: u64, n: u64) -> String {
    let r = Rate::new(k, n);
    let runs = if n == 1 { "run" } else { "runs" };
    format!("{k} of {n} {runs} [{}, {}]", pct(r.lo), pct(r.hi))
}

/// The interval alone: `[60 %, 98 %]`.
pub fn interval(k: u64, n: u64) -> String {
    let r = Rate::new(k, n);
    format!("[{}, {}]", pct(r.lo), pct(r.hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_of_three_keeps_and_one_of_three_does_not() {
        assert!(kept(2, 3) && kept(3, 3));
        assert!(!kept(1, 3) && !kept(0, 3) && !kept(0, 0));
        assert!(kept(1, 1) && !kept(0, 1));
        assert!(kept(4, 6) && !kept(3, 6));
    }

    #[test]
    fn five_of_ten_confirms() {
        assert!(confirmed(5, 10) && confirmed(10, 10));
        assert!(!confirmed(4, 10) && !confirmed(0, 0));
    }

    #[test]
    fn counts_come_with_their_interval_never_as_gone() {
        assert_eq!(runs_text(9, 10), "9 of 10 runs [60 %, 98 %]");
        assert_eq!(runs_text(0, 3), "0 of 3 runs [0 %, 56 %]");
        assert_eq!(runs_text(1, 1), "1 of 1 run [21 %, 100 %]");
        assert_eq!(interval(2, 3), "[21 %, 94 %]");
    }
}
