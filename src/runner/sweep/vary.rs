//! `--vary PARAM=V1,V2,...` (or `PARAM=FROM..TO/STEPS`): which parameter a
//! sweep varies, its values, and the nemesis file or run flag each value
//! becomes. Every value is checked before any run starts, by loading the
//! nemesis file it makes (and the workload with its flags) through the
//! ordinary loaders; their complaints come back as `--vary` errors.

use crate::nemesis::spec::{self, NemesisSpec};
use crate::toml_file::Source;
use crate::workload::{self, Overrides};

/// A parameter a sweep can vary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Param {
    /// The fault's length, in leases (nemesis file).
    DurationLeases,
    /// A clock fault's offset (nemesis file).
    OffsetMs,
    /// A latency fault's added delay (nemesis file).
    LatencyMs,
    /// The workload's critical section (`--hold-ms`).
    HoldMs,
    /// The workload's lease (`--ttl-ms`).
    TtlMs,
}

pub const PARAMS: [(&str, Param); 5] = [
    ("duration_leases", Param::DurationLeases),
    ("offset_ms", Param::OffsetMs),
    ("latency_ms", Param::LatencyMs),
    ("hold_ms", Param::HoldMs),
    ("ttl_ms", Param::TtlMs),
];

impl Param {
    pub fn name(self) -> &'static str {
        PARAMS
            .iter()
            .find(|(_, p)| *p == self)
            .map_or("?", |(n, _)| n)
    }

    /// Values are whole milliseconds.
    pub fn integral(self) -> bool {
        self != Param::DurationLeases
    }

    /// The value goes into the nemesis file (else it is a run flag).
    pub fn in_nemesis(self) -> bool {
        matches!(
            self,
            Param::DurationLeases | Param::OffsetMs | Param::LatencyMs
        )
    }

    /// Whether nemesis `spec` takes this parameter; `Err` says which it
    /// takes.
    fn taken_by(self, spec: &NemesisSpec) -> Result<(), String> {
        let has_length = !matches!(spec.fault.as_str(), "none" | "mixed")
            && (spec.duration_leases.is_some() || spec.duration_ms.is_some_and(|d| d > 0));
        let takes = |p: Param| match p {
            Param::DurationLeases => has_length,
            Param::OffsetMs => matches!(spec.fault.as_str(), "clock-jump" | "clock-strobe"),
            Param::LatencyMs => spec.fault == "latency",
            Param::HoldMs | Param::TtlMs => true,
        };
        if takes(self) {
            return Ok(());
        }
        let some: Vec<&str> = PARAMS
            .iter()
            .filter(|(_, p)| takes(*p))
            .map(|(n, _)| *n)
            .collect();
        let applies = match self {
            Param::DurationLeases => "faults with a length (pause-holder, partition-holder, ...)",
            Param::OffsetMs => "clock-jump and clock-strobe",
            Param::LatencyMs => "latency",
            Param::HoldMs | Param::TtlMs => "every nemesis",
        };
        Err(format!(
            "--vary {}: nemesis {} takes no {} (hint: {} applies to {applies}; {} takes {})",
            self.name(),
            spec.name,
            self.name(),
            self.name(),
            spec.name,
            some.join(", ")
        ))
    }
}

/// A parsed `--vary`.
#[derive(Clone, Debug, PartialEq)]
pub struct Vary {
    pub param: Param,
    /// Distinct, ascending.
    pub values: Vec<f64>,
}

/// A value as text: whole numbers without decimals, others with up to four.
pub fn value_text(v: f64) -> String {
    let s = format!("{v:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

fn number(param: Param, v: &str) -> Result<f64, String> {
    let x: f64 = v.trim().parse().map_err(|_| {
        format!(
            "--vary {}: `{v}` is not a number (hint: e.g. --vary {}={})",
            param.name(),
            param.name(),
            if param.integral() {
                "500,1000"
            } else {
                "0.5,1.5"
            }
        )
    })?;
    if !x.is_finite() {
        return Err(format!(
            "--vary {}: `{v}` is not a finite number (hint: give a finite value)",
            param.name()
        ));
    }
    Ok(x)
}

/// Parse `PARAM=V1,V2,...` or `PARAM=FROM..TO/STEPS` (STEPS evenly spaced
/// values, both ends included; whole milliseconds for the ms parameters).
pub fn parse(s: &str) -> Result<Vary, String> {
    let known: Vec<&str> = PARAMS.iter().map(|(n, _)| *n).collect();
    let Some((name, list)) = s.split_once('=') else {
        return Err(format!(
            "--vary `{s}`: no `=` (hint: --vary PARAM=V1,V2,... or PARAM=FROM..TO/STEPS, PARAM one of {})",
            known.join(", ")
        ));
    };
    let Some(&(_, param)) = PARAMS.iter().find(|(n, _)| *n == name.trim()) else {
        return Err(format!(
            "--vary: unknown parameter `{name}` (hint: one of {})",
            known.join(", ")
        ));
    };
    let mut values = match list.split_once("..") {
        Some((from, rest)) => {
            let Some((to, steps)) = rest.split_once('/') else {
                return Err(format!(
                    "--vary {name}: `{list}` has no /STEPS (hint: e.g. {name}={from}..{rest}/5)"
                ));
            };
            let (from, to) = (number(param, from)?, number(param, to)?);
            let steps: usize = steps
                .trim()
                .parse()
                .ok()
                .filter(|n| *n >= 2)
                .ok_or_else(|| {
                    format!("--vary {name}: `{steps}` steps: give a whole number of at least 2 (hint: FROM..TO/5 gives 5 values)")
                })?;
            (0..steps)
                .map(|i| from + (to - from) * i as f64 / (steps - 1) as f64)
                .map(|v| if param.integral() { v.round() } else { v })
                .collect::<Vec<f64>>()
        }
        None => list
            .split(',')
            .map(|v| number(param, v))
            .collect::<Result<Vec<f64>, String>>()?,
    };
    for &v in &values {
        check_value(param, v)?;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    values.dedup();
    if values.len() < n {
        return Err(format!(
            "--vary {name}: `{list}` gives a value twice (hint: list distinct values{})",
            if param.integral() {
                ", or fewer steps: values are whole milliseconds"
            } else {
                ""
            }
        ));
    }
    Ok(Vary { param, values })
}

/// The range checks a value must pass before any file is made.
pub fn check_value(param: Param, v: f64) -> Result<(), String> {
    let bad = |why: &str, hint: &str| {
        Err(format!(
            "--vary {}: {} {why} (hint: {hint})",
            param.name(),
            value_text(v)
        ))
    };
    if param.integral() && v.fract() != 0.0 {
        return bad("is not a whole number of milliseconds", "give whole ms");
    }
    match param {
        Param::DurationLeases if v <= 0.0 => {
            bad("is not positive", "a fault lasts e.g. 0.5 leases")
        }
        Param::LatencyMs if v <= 0.0 => bad("is not positive", "add e.g. 100 ms"),
        Param::HoldMs if v < 0.0 => bad("is negative", "hold e.g. 200 ms"),
        Param::TtlMs if v <= 0.0 => bad("is not positive", "a lease of e.g. 2000 ms"),
        _ => Ok(()),
    }
}

/// The text of the nemesis file for `value`: the original file's with that
/// one field set (and `duration_ms` dropped for `duration_leases`).
pub fn nemesis_text(original: &Source, param: Param, value: f64) -> Result<String, String> {
    let mut t: toml::Table =
        toml::from_str(&original.text).map_err(|e| format!("--nemesis {}: {e}", original.name))?;
    let v = if param.integral() {
        toml::Value::Integer(value as i64)
    } else {
        toml::Value::Float(value)
    };
    if param == Param::DurationLeases {
        t.remove("duration_ms");
    }
    t.insert(param.name().to_string(), v);
    let body = toml::to_string(&t).map_err(|e| format!("--nemesis {}: {e}", original.name))?;
    Ok(format!(
        "# Written by lockjaw sweep: {} with {} = {}.\n{body}",
        original.name,
        param.name(),
        value_text(value)
    ))
}

/// Check `value` against the nemesis (`original`, loaded as `spec`) and the
/// workload: load the nemesis file the value makes, and the workload with
/// the flags it gives. Returns the nemesis file's text when the value goes
/// into one.
pub fn check(
    param: Param,
    value: f64,
    original: &Source,
    spec: &NemesisSpec,
    workload_name: &str,
    ov: &Overrides,
) -> Result<Option<String>, String> {
    param.taken_by(spec)?;
    check_value(param, value)?;
    let named = |e: String| format!("--vary {}={}: {e}", param.name(), value_text(value));
    let mut ov = ov.clone();
    match param {
        Param::HoldMs => ov.hold_ms = Some(value as u64),
        Param::TtlMs => ov.ttl_ms = Some(value as u64),
        _ => {}
    }
    workload::load(workload_name, &ov).map_err(|e| named(e.to_string()))?;
    if !param.in_nemesis() {
        return Ok(None);
    }
    let text = nemesis_text(original, param, value)?;
    let src = Source {
        name: format!(
            "{} with {}={}",
            original.name,
            param.name(),
            value_text(value)
        ),
        text: text.clone(),
    };
    spec::from_source(&src).map_err(|e| named(e.to_string()))?;
    Ok(Some(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_ranges_parse() {
        let v = parse("duration_leases=2,0.3").unwrap();
        assert_eq!((v.param, v.values), (Param::DurationLeases, vec![0.3, 2.0]));
        let v = parse("offset_ms=1000..2000/5").unwrap();
        assert_eq!(v.values, vec![1000.0, 1250.0, 1500.0, 1750.0, 2000.0]);
        let v = parse("duration_leases=0.5..1.5/3").unwrap();
        assert_eq!(v.values, vec![0.5, 1.0, 1.5]);
        assert_eq!(value_text(0.75), "0.75");
        assert_eq!(value_text(1500.0), "1500");
    }

    #[test]
    fn bad_vary_names_the_problem() {
        for (s, want) in [
            ("speed=1,2", "unknown parameter `speed`"),
            ("duration_leases", "no `=`"),
            ("duration_leases=0,1", "0 is not positive"),
            ("duration_leases=-1", "-1 is not positive"),
            ("duration_leases=a", "`a` is not a number"),
            ("offset_ms=1.5", "not a whole number"),
            ("offset_ms=1..3/1", "steps"),
            ("offset_ms=1..3", "no /STEPS"),
            ("hold_ms=100,100", "twice"),
            ("latency_ms=0,10", "0 is not positive"),
        ] {
            let e = parse(s).unwrap_err();
            assert!(e.starts_with("--vary"), "{s}: {e}");
            assert!(e.contains(want), "{s}: {e}");
            assert!(e.contains("hint:"), "{s}: {e}");
        }
    }

    fn builtin(name: &str) -> (Source, NemesisSpec) {
        let (src, _) =
            crate::toml_file::find(name, "nemesis", spec::BUILTIN).expect("a builtin nemesis");
        let spec = spec::from_source(&src).expect("it loads");
        (src, spec)
    }

    #[test]
    fn values_become_nemesis_files_the_loader_accepts() {
        let (src, spec) = builtin("latency");
        let ov = Overrides::default();
        let text = check(Param::DurationLeases, 0.5, &src, &spec, "lock", &ov)
            .unwrap()
            .unwrap();
        let s = spec::from_source(&Source {
            name: "x".into(),
            text,
        })
        .unwrap();
        assert_eq!((s.duration_leases, s.duration_ms), (Some(0.5), None));
        let text = check(Param::LatencyMs, 250.0, &src, &spec, "lock", &ov)
            .unwrap()
            .unwrap();
        assert!(text.contains("latency_ms = 250"), "{text}");
        assert_eq!(
            check(Param::HoldMs, 100.0, &src, &spec, "lock", &ov).unwrap(),
            None
        );
    }

    #[test]
    fn values_the_loaders_refuse_are_vary_errors() {
        let (src, spec) = builtin("pause-holder");
        let ov = Overrides {
            ttl_ms: Some(1000),
            ..Overrides::default()
        };
        let e = check(Param::OffsetMs, 100.0, &src, &spec, "lock", &ov).unwrap_err();
        assert!(
            e.contains("takes no offset_ms") && e.contains("duration_leases"),
            "{e}"
        );
        let e = check(Param::HoldMs, 600.0, &src, &spec, "lock", &ov).unwrap_err();
        assert!(e.starts_with("--vary hold_ms=600:"), "{e}");
        assert!(e.contains("half of ttl_ms"), "{e}");
        let (src, spec) = builtin("none");
        let e = check(Param::DurationLeases, 1.0, &src, &spec, "lock", &ov).unwrap_err();
        assert!(e.contains("takes no duration_leases"), "{e}");
    }
}
