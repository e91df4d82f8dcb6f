//! A confirmed finding as a catalogue row, `DIR/rows/<id>.toml`: the
//! system, the workload and flags of its runs, its point's nemesis file
//! inline, the kind as `expect`, per landed injection, and the buggy side
//! (the explored client); no fixed side yet. `lockjaw bugs run ID
//! --catalogue DIR/rows` replays it (the buggy side only, and says so).

use super::state::State;
use std::path::{Path, PathBuf};

/// The row's id: `explore-<system>-<kind>-<point>`, with anything but
/// letters, digits, `.`, `_` and `-` as `-`.
pub fn id(system: &str, kind: &str, point: &str) -> String {
    format!("explore-{system}-{kind}-{point}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// A nemesis file's text as the body of a `[nemesis]` table: its own
/// lines when it has no table headers (comments and order kept), else
/// each key written again with nested tables inline.
fn nemesis_body(text: &str) -> Result<String, String> {
    let has_headers = text.lines().any(|l| l.trim_start().starts_with('['));
    if !has_headers {
        return Ok(text.trim_end().to_string() + "\n");
    }
    let t: toml::Table =
        toml::from_str(text).map_err(|e| format!("the point's nemesis file: {e}"))?;
    Ok(t.iter()
        .map(|(k, v)| format!("{k} = {}\n", inline(v)))
        .collect())
}

/// A TOML value on one line (tables inline).
fn inline(v: &toml::Value) -> String {
    match v {
        toml::Value::Table(t) => {
            let inner: Vec<String> = t
                .iter()
                .map(|(k, v)| format!("{k} = {}", inline(v)))
                .collect();
            format!("{{ {} }}", inner.join(", "))
        }
        toml::Value::Array(a) => {
            let inner: Vec<String> = a.iter().map(inline).collect();
            format!("[{}]", inner.join(", "))
        }
        other => other.to_string(),
    }
}

fn quoted(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// The row's text for `kind` at `point` (`none`: no fault, per run).
pub fn text(s: &State, point: &str, kind: &str, workload: &str) -> Result<String, String> {
    let st = &s.settings;
    let id = id(&st.system, kind, point);
    let library = match &st.client {
        Some(c) => c.split('@').next().unwrap_or(c).to_string(),
        None => format!("lockjaw's own {} client", st.system),
    };
    let class = if kind == "stuck-lock" {
        "liveness"
    } else {
        "safety"
    };
    let fencing = s.judge.as_ref().is_some_and(|j| j.fencing);
    let nemesis = match s.point(point) {
        Some(p) => {
            let t = super::search::timing(&p.nemesis, st.ttl_ms);
            let limit = super::search::time_limit_s(&[t], st.ttl_ms, true);
            Some((nemesis_body(&p.nemesis)?, limit))
        }
        None => None,
    };
    let limit = nemesis.as_ref().map(|n| n.1).unwrap_or(st.learn_secs);
    let args = [
        "--ttl-ms".to_string(),
        st.ttl_ms.to_string(),
        "--concurrency".into(),
        st.concurrency.to_string(),
        "--time-limit".into(),
        limit.to_string(),
        "--fencing".into(),
        if fencing { "on" } else { "off" }.into(),
    ];
    let args: Vec<String> = args.iter().map(|a| quoted(a)).collect();
    let mut out = format!(
        "# Found by `lockjaw explore` (seed {}): {kind} at point {point}.\n\
         # The fixed side is yours to add once a release fixes it.\n\
         id = {}\nstatus = \"open\"\nlibrary = {}\ntitle = {}\nlinks = []\nclass = \"{class}\"\nsystem = {}\n\
         workload = {}\nargs = [{}]\nexpect = {}\nper = \"{}\"\nruns = 10\n",
        st.seed,
        quoted(&id),
        quoted(&library),
        quoted(&format!(
            "{kind} at fault point {point} (found by lockjaw explore)"
        )),
        quoted(&st.system),
        quoted(workload),
        args.join(", "),
        quoted(kind),
        if nemesis.is_some() {
            "injection"
        } else {
            "run"
        },
    );
    if let Some((body, _)) = &nemesis {
        out.push_str(&format!("\n[nemesis]\n{body}"));
    }
    out.push_str(&format!(
        "\n[buggy]\nclient = {}\n",
        quoted(st.client.as_deref().unwrap_or("builtin"))
    ));
    Ok(out)
}

/// Write the row of `kind` at `point` to `DIR/rows/<id>.toml`.
pub fn write(
    dir: &Path,
    s: &State,
    point: &str,
    kind: &str,
    workload: &str,
) -> Result<PathBuf, String> {
    let rows = dir.join("rows");
    std::fs::create_dir_all(&rows).map_err(|e| format!("{}: {e}", rows.display()))?;
    let path = rows.join(format!("{}.toml", id(&s.settings.system, kind, point)));
    std::fs::write(&path, text(s, point, kind, workload)?)
        .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::plan::{Family, Plan, Point};
    use crate::explore::state::{settings, State};

    fn state_with(nemesis: &str) -> State {
        let mut s = State::new(settings(), vec!["lock".into()]);
        s.plan = Some(Plan {
            points: vec![Point {
                id: "strike-crash-after-SETNX".into(),
                family: Family::Strike,
                nemesis: nemesis.into(),
                kind: Some("SETNX".into()),
                phase: None,
                own_run: true,
                label: None,
                parts: vec![],
                workloads: vec![],
            }],
            ..Plan::default()
        });
        s
    }

    const STRIKE: &str = "name = \"strike-crash-after-SETNX\"\nfault = \"strike-command\"\n\
        target = \"all-clients\"\ninterval_ms = 300\n\
        strike = { command = \"SETNX\", action = \"crash-after\", window_ms = 2000 }\n";

    /// Item 7 of issue 41: the row a finding writes is one the catalogue
    /// accepts (its inline nemesis checked as a nemesis file), with the
    /// buggy side and no fixed side.
    #[test]
    fn a_findings_row_is_a_catalogue_row_with_only_the_buggy_side() {
        let dir = tempfile::tempdir().unwrap();
        let s = state_with(STRIKE);
        let path = write(
            dir.path(),
            &s,
            "strike-crash-after-SETNX",
            "stuck-lock",
            "lock",
        )
        .unwrap();
        assert_eq!(
            path.file_name().unwrap().to_string_lossy(),
            "explore-redis-stuck-lock-strike-crash-after-SETNX.toml"
        );
        let bug = crate::bugs::catalogue::load_file(&path).unwrap();
        assert_eq!(bug.buggy.as_deref(), Some("python-x@1"));
        assert_eq!(bug.fixed, None);
        assert_eq!(bug.expect.name(), "stuck-lock");
        assert_eq!(bug.per, crate::bugs::Per::Injection);
        assert_eq!(bug.class, crate::bugs::Class::Liveness);
        let crate::bugs::catalogue::Part::Inline(n) = &bug.nemesis else {
            panic!("inline nemesis: {:?}", bug.nemesis)
        };
        let spec = crate::nemesis::spec::from_source(&crate::toml_file::Source {
            name: "n".into(),
            text: n.clone(),
        })
        .unwrap();
        assert_eq!(spec.fault, "strike-command");
    }

    #[test]
    fn nested_tables_are_written_inline() {
        let text = "name = \"x\"\nfault = \"strike-command\"\n[strike]\ncommand = \"SET\"\nwindow_ms = 5\n";
        let body = nemesis_body(text).unwrap();
        assert!(!body.contains('['), "{body}");
        let t: toml::Table = toml::from_str(&body).unwrap();
        assert_eq!(t["strike"]["command"].as_str(), Some("SET"));
        assert_eq!(
            id("redis", "two-holders", "together:a+b"),
            "explore-redis-two-holders-together-a-b"
        );
    }
}
