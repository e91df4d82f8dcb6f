//! The commands of `lockjaw shrink`: the original `lockjaw run` line as
//! the run's report gives it, and each candidate's line built from it
//! (flags set, a nemesis file written when a fault field changed). A
//! candidate's line is what its runs run and record, so every line shrink
//! prints can be pasted.

use super::search::{Dim, Search};
use crate::runner::rundir::RunInfo;
use crate::toml_file::Source;
use std::path::Path;

/// Flags a candidate sets itself (`--seed`, `--out`), or that would make
/// parallel runs collide or print over each other.
const DROPPED: &[&str] = &[
    "--seed",
    "--out",
    "--runs",
    "--test-count",
    "--jobs",
    "--base-port",
];
const DROPPED_SWITCHES: &[&str] = &["--no-progress"];

/// The original command (the report's reproduce line) as arguments,
/// without the flags in [`DROPPED`].
pub fn original(line: &str) -> Result<Vec<String>, String> {
    let args = shlex::split(line).ok_or_else(|| {
        format!("cannot read the run's command `{line}` (hint: an unbalanced quote in run.json's command)")
    })?;
    if args.get(1).map(String::as_str) != Some("run") {
        return Err(format!(
            "the run's command `{line}` is not a `lockjaw run` line"
        ));
    }
    let mut out = vec![];
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        let name = a.split('=').next().unwrap_or_default();
        if DROPPED.contains(&name) {
            if !a.contains('=') {
                it.next();
            }
        } else if !DROPPED_SWITCHES.contains(&a.as_str()) {
            out.push(a);
        }
    }
    Ok(out)
}

/// The value of `flag` in `args` (`--flag V` or `--flag=V`; the last wins).
pub fn flag(args: &[String], flag: &str) -> Option<String> {
    let mut v = None;
    for (i, a) in args.iter().enumerate() {
        if a == flag {
            v = args.get(i + 1).cloned();
        } else if let Some(x) = a.strip_prefix(flag).and_then(|r| r.strip_prefix('=')) {
            v = Some(x.to_string());
        }
    }
    v
}

/// Set `flag` to `value`: in place where it is, else at the end.
pub fn set(args: &mut Vec<String>, flag: &str, value: &str) {
    let mut found = false;
    let mut i = 0;
    while i < args.len() {
        if args[i] == flag && i + 1 < args.len() {
            args[i + 1] = value.to_string();
            found = true;
            i += 2;
            continue;
        }
        if args[i].starts_with(&format!("{flag}=")) {
            args[i] = format!("{flag}={value}");
            found = true;
        }
        i += 1;
    }
    if !found {
        args.extend([flag.to_string(), value.to_string()]);
    }
}

/// Whether a knob of the nemesis file differs from the original.
pub fn nemesis_changed(s: &Search) -> bool {
    s.changed().any(|k| {
        matches!(
            k.dim,
            Dim::Injections
                | Dim::DurationMs
                | Dim::DurationLeases
                | Dim::OffsetMs
                | Dim::LatencyMs
        )
    })
}

/// The nemesis file of `s`: the original's text with each changed fault
/// field set.
pub fn nemesis_text(original: &Source, s: &Search) -> Result<String, String> {
    let mut t: toml::Table =
        toml::from_str(&original.text).map_err(|e| format!("{}: {e}", original.name))?;
    let mut changes = vec![];
    for k in s.changed() {
        let int = |v: u64| toml::Value::Integer(v.min(i64::MAX as u64) as i64);
        let (field, v) = match k.dim {
            Dim::Injections => ("max_injections", int(k.current)),
            Dim::DurationMs => ("duration_ms", int(k.current)),
            Dim::DurationLeases => (
                "duration_leases",
                toml::Value::Float(k.current as f64 / 1000.0),
            ),
            Dim::OffsetMs => ("offset_ms", int(k.current)),
            Dim::LatencyMs => ("latency_ms", int(k.current)),
            _ => continue,
        };
        match field {
            "duration_ms" => t.remove("duration_leases"),
            "duration_leases" => t.remove("duration_ms"),
            _ => None,
        };
        changes.push(format!("{field} = {v}"));
        t.insert(field.to_string(), v);
    }
    let body = toml::to_string(&t).map_err(|e| format!("{}: {e}", original.name))?;
    Ok(format!(
        "# Written by lockjaw shrink: {} with {}.\n{body}",
        original.name,
        changes.join(", ")
    ))
}

/// The command of `s`: the original with each changed knob's flag set,
/// and `--nemesis nemesis_file` when a fault field changed. Switching the
/// workload sets every workload flag, so none falls back to the other
/// workload's defaults.
pub fn argv(
    original: &[String],
    s: &Search,
    info: &RunInfo,
    nemesis_file: Option<&Path>,
) -> Vec<String> {
    let mut a = original.to_vec();
    let w = &info.workload;
    let workload = s.changed().any(|k| k.dim == Dim::Workload);
    let value = |d: Dim, dflt: u64| s.value(d).unwrap_or(dflt);
    let flags = [
        (
            Dim::Workers,
            "--concurrency",
            value(Dim::Workers, w.concurrency as u64).to_string(),
        ),
        (
            Dim::TimeLimit,
            "--time-limit",
            (value(Dim::TimeLimit, (w.time_limit_s * 1000.0).round() as u64) as f64 / 1000.0)
                .to_string(),
        ),
        (
            Dim::ThinkMs,
            "--think-ms",
            value(Dim::ThinkMs, w.think_ms).to_string(),
        ),
        (
            Dim::HoldMs,
            "--hold-ms",
            value(Dim::HoldMs, w.hold_ms).to_string(),
        ),
    ];
    for (dim, flag, v) in flags {
        if workload || s.changed().any(|k| k.dim == dim) {
            set(&mut a, flag, &v);
        }
    }
    if workload {
        set(&mut a, "--workload", "lock");
        set(&mut a, "--ttl-ms", &info.ttl_ms.to_string());
    }
    if let Some(p) = nemesis_file {
        set(&mut a, "--nemesis", &p.display().to_string());
    }
    a
}

/// `args` quoted for a POSIX shell, `lockjaw` first, without a URL's
/// password.
pub fn line(args: &[String]) -> String {
    args.iter()
        .enumerate()
        .map(|(i, a)| {
            if i == 0 {
                "lockjaw".to_string()
            } else {
                quote(&crate::auth::redact::arg(a))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn quote(s: &str) -> String {
    shlex::try_quote(s)
        .map(|c| c.into_owned())
        .unwrap_or_else(|_| s.replace('\0', ""))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::shrink::search::Knob;

    fn args(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn the_original_loses_what_each_run_sets_itself() {
        let a = original("lockjaw run --system redis --seed 4 --out=x --runs 3 --no-progress --base-port 4000 --nemesis 'a b'").unwrap();
        assert_eq!(
            a,
            ["lockjaw", "run", "--system", "redis", "--nemesis", "a b"]
        );
        assert!(original("lockjaw sweep --system redis").is_err());
        assert!(original("lockjaw run 'x").unwrap_err().contains("hint"));
    }

    #[test]
    fn set_replaces_in_place_or_appends() {
        let mut a = args("lockjaw run --concurrency 5 --time-limit=20");
        set(&mut a, "--concurrency", "2");
        set(&mut a, "--time-limit", "10");
        set(&mut a, "--hold-ms", "0");
        assert_eq!(
            a,
            args("lockjaw run --concurrency 2 --time-limit=10 --hold-ms 0")
        );
        assert_eq!(flag(&a, "--time-limit").as_deref(), Some("10"));
        assert_eq!(flag(&a, "--nemesis"), None);
    }

    #[test]
    fn a_changed_fault_field_goes_into_a_nemesis_file_the_loader_accepts() {
        let (src, _) =
            crate::toml_file::find("clock-jump", "nemesis", crate::nemesis::spec::BUILTIN).unwrap();
        let mut s = Search {
            knobs: vec![
                Knob::new(Dim::Workers, 5, 2),
                Knob::new(Dim::Injections, 5, 1),
                Knob::new(Dim::DurationLeases, 1000, 1),
            ],
        };
        assert!(!nemesis_changed(&s));
        s.knobs[0].current = 2;
        assert!(!nemesis_changed(&s));
        s.knobs[1].current = 1;
        s.knobs[2].current = 500;
        assert!(nemesis_changed(&s));
        let text = nemesis_text(&src, &s).unwrap();
        let spec = crate::nemesis::spec::from_source(&Source {
            name: "x.toml".into(),
            text: text.clone(),
        })
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(spec.max_injections, Some(1));
        assert_eq!(spec.duration_leases, Some(0.5));
        assert_eq!(spec.fault, "clock-jump");
        assert!(text.starts_with("# Written by lockjaw shrink"), "{text}");
    }
}
