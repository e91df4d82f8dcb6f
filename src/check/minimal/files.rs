//! Witness files: `witness-<kind>.jsonl`, the meta record with its
//! `witness` object, then the kept ops with their original indexes.

use super::{WitnessHistory, WitnessInfo};
use crate::history::jsonl::JsonlReader;
use crate::history::HistoryError;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Every witness file's name starts with this.
pub const WITNESS_PREFIX: &str = "witness-";

/// `witness-<kind>.jsonl`.
pub fn file_name(kind: &str) -> String {
    format!("{WITNESS_PREFIX}{kind}.jsonl")
}

/// Write `w` into `dir` as [`file_name`] of its kind; ops keep their
/// indexes. Returns the file's path.
pub fn write(dir: &Path, w: &WitnessHistory) -> std::io::Result<PathBuf> {
    let path = dir.join(file_name(&w.info.kind));
    let mut meta = serde_json::to_value(&w.meta)?;
    if let Some(o) = meta.as_object_mut() {
        o.insert("type".into(), "meta".into());
        o.insert("witness".into(), serde_json::to_value(&w.info)?);
    }
    let tmp = path.with_extension("jsonl.tmp");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
    serde_json::to_writer(&mut out, &meta)?;
    out.write_all(b"\n")?;
    for op in &w.ops {
        serde_json::to_writer(&mut out, op)?;
        out.write_all(b"\n")?;
    }
    out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    std::fs::rename(&tmp, &path)?;
    Ok(path)
}

/// Read a witness file back.
pub fn read(path: &Path) -> Result<WitnessHistory, HistoryError> {
    let mut r = JsonlReader::open(path)?;
    let mut meta = r.meta().cloned().ok_or_else(|| HistoryError {
        file: path.display().to_string(),
        line: 1,
        msg: "a witness file starts with a meta record (hint: write it with `lockjaw check --witness`)"
            .into(),
    })?;
    let info = meta.params.remove("witness").ok_or_else(|| HistoryError {
        file: path.display().to_string(),
        line: 1,
        msg: "the meta record has no `witness` object: this is a history, not a witness".into(),
    })?;
    let info: WitnessInfo = serde_json::from_value(info).map_err(|e| HistoryError {
        file: path.display().to_string(),
        line: 1,
        msg: format!("meta field `witness`: {e}"),
    })?;
    let ops = r.by_ref().collect::<Result<Vec<_>, _>>()?;
    Ok(WitnessHistory { meta, info, ops })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Meta, Op, OpType, Process};

    #[test]
    fn a_witness_round_trips_with_its_indexes() {
        let dir = tempfile::tempdir().unwrap();
        let op = |index, kind| Op {
            index,
            ..Op::new(index * 10, Process::Num(1), kind, "acquire")
        };
        let w = WitnessHistory {
            meta: Meta {
                checkers: vec!["lock".into()],
                ..Meta::default()
            },
            info: WitnessInfo {
                run: "r1".into(),
                kind: "safety-violation".into(),
                check: "safety".into(),
                text: "t".into(),
                owners: vec!["a".into()],
                proof_ops: vec![41],
                minimal: true,
                budget: 10,
                oracle_calls: 3,
                checked_lines: 6,
                capped: false,
                history_ops: 100,
                witness_ops: 2,
                seconds: 0.1,
                rule: None,
                roles: [(41, "a's grant".to_string())].into(),
                anomaly: serde_json::Value::Null,
            },
            ops: vec![op(40, OpType::Invoke), op(41, OpType::Ok)],
        };
        let p = write(dir.path(), &w).unwrap();
        assert!(p.ends_with("witness-safety-violation.jsonl"));
        let back = read(&p).unwrap();
        assert_eq!(back.info, w.info);
        assert_eq!(
            back.ops.iter().map(|o| o.index).collect::<Vec<_>>(),
            [40, 41]
        );
        assert_eq!(back.meta, w.meta);
    }
}
