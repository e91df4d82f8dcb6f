//! A load ceiling for a run against a shared cluster: `--max-rate OPS`
//! (requests per second to the lock service, all workers together; the
//! workers pace themselves, [`crate::client::pace`]) and `--max-workers N`
//! (a run of more workers is refused before anything starts). Parsed and
//! checked here, recorded in run.json (`load`), shown by `--plan`.

use serde::{Deserialize, Serialize};

/// The highest `--max-rate`: a million requests a second is beyond what
/// any run's workers send; a larger number is a typo.
pub const MAX_RATE: f64 = 1_000_000.0;

/// The `lockjaw run` flags of the ceiling.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct LoadFlags {
    /// At most OPS requests per second to the lock service, all workers
    /// together: each operation (acquire, renew, release, a register or
    /// election request) and each retry of a polling acquire waits for
    /// its worker's turn (docs/running.md). Default: unbounded.
    #[arg(long, value_name = "OPS", allow_hyphen_values = true, value_parser = max_rate_flag)]
    pub max_rate: Option<f64>,
    /// Refuse (exit 3, before anything starts) a run of more than N
    /// workers (--concurrency, or the workload's `concurrency`).
    #[arg(long, value_name = "N", allow_hyphen_values = true, value_parser = max_workers_flag)]
    pub max_workers: Option<usize>,
}

/// The ceiling a run was given, as run.json records it (`null`: none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Load {
    /// `--max-rate`: requests per second, all workers together.
    pub max_rate: Option<f64>,
    /// `--max-workers`.
    pub max_workers: Option<usize>,
}

fn rate_hint() -> String {
    format!("(hint: requests per second, all workers together, above 0 and at most {MAX_RATE:.0}, e.g. --max-rate 200)")
}

/// `--max-rate OPS`: a number above 0 and at most [`MAX_RATE`].
pub fn max_rate_flag(s: &str) -> Result<f64, String> {
    let r: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("--max-rate {s}: not a number {}", rate_hint()))?;
    if !(r > 0.0 && r <= MAX_RATE) {
        return Err(format!("--max-rate {s}: out of range {}", rate_hint()));
    }
    Ok(r)
}

/// `--max-workers N`: a whole number, 1 or more.
pub fn max_workers_flag(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        Ok(_) => Err(format!(
            "--max-workers {s}: a run has at least one worker (hint: e.g. --max-workers 5)"
        )),
        Err(_) => Err(format!(
            "--max-workers {s}: not a whole number (hint: e.g. --max-workers 5)"
        )),
    }
}

impl Load {
    /// The ceiling of a run of `workers` workers; an error when they are
    /// more than `--max-workers` allows.
    pub fn of(flags: &LoadFlags, workers: usize) -> Result<Load, String> {
        if let Some(max) = flags.max_workers.filter(|&m| workers > m) {
            return Err(format!(
                "--max-workers {max}: the run has {workers} workers (hint: --concurrency {max} or fewer, or a workload file with a smaller `concurrency`)"
            ));
        }
        Ok(Load {
            max_rate: flags.max_rate,
            max_workers: flags.max_workers,
        })
    }

    /// How much longer a worker may take to finish its step after SIGTERM:
    /// two of its turns (at most a minute).
    pub fn stop_allowance(&self, workers: usize) -> std::time::Duration {
        let turn = self.max_rate.map_or(0.0, |r| workers.max(1) as f64 / r);
        std::time::Duration::from_secs_f64((2.0 * turn).min(60.0))
    }

    /// The `--plan` line: `load: 5 workers (--max-workers 8), at most 200
    /// requests/s to the service (--max-rate; 40/s per worker)`.
    pub fn plan_line(&self, workers: usize) -> String {
        let cap = self
            .max_workers
            .map(|m| format!(" (--max-workers {m})"))
            .unwrap_or_default();
        let rate = match self.max_rate {
            Some(r) => format!(
                "at most {} requests/s to the service (--max-rate; {}/s per worker)",
                num(r),
                num(r / workers.max(1) as f64)
            ),
            None => "no --max-rate: requests to the service unbounded".into(),
        };
        format!("load: {workers} workers{cap}, {rate}")
    }
}

/// A rate as a person writes it: `200`, `7.5`, `0.33`.
fn num(x: f64) -> String {
    let s = format!("{x:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_values_name_the_flag() {
        for bad in ["0", "-1", "-0.5", "abc", "", "NaN", "inf", "1e7"] {
            let e = max_rate_flag(bad).unwrap_err();
            assert!(e.starts_with(&format!("--max-rate {bad}: ")), "{e}");
            assert!(e.contains("hint"), "{e}");
        }
        assert_eq!(max_rate_flag("200"), Ok(200.0));
        assert_eq!(max_rate_flag("0.5"), Ok(0.5));
        for bad in ["0", "-3", "2.5", "many"] {
            let e = max_workers_flag(bad).unwrap_err();
            assert!(e.starts_with(&format!("--max-workers {bad}: ")), "{e}");
        }
        assert_eq!(max_workers_flag("8"), Ok(8));
    }

    #[test]
    fn more_workers_than_allowed_are_refused_and_the_plan_says_the_ceiling() {
        let flags = LoadFlags {
            max_rate: Some(200.0),
            max_workers: Some(4),
        };
        let e = Load::of(&flags, 5).unwrap_err();
        assert!(e.contains("--max-workers 4: the run has 5 workers"), "{e}");
        let l = Load::of(&flags, 4).unwrap();
        assert_eq!(
            l.plan_line(4),
            "load: 4 workers (--max-workers 4), at most 200 requests/s to the service (--max-rate; 50/s per worker)"
        );
        assert_eq!(l.stop_allowance(4), std::time::Duration::from_millis(40));
        let none = Load::of(&LoadFlags::default(), 5).unwrap();
        assert_eq!(
            none.plan_line(5),
            "load: 5 workers, no --max-rate: requests to the service unbounded"
        );
        assert_eq!(none.stop_allowance(5), std::time::Duration::ZERO);
    }
}
