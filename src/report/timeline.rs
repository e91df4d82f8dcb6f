//! The history as the report draws it: invocations paired with their
//! completions into intervals, grouped into lanes (one per worker: its
//! renumbered processes and its `"N-lease"` process share a lane), lock
//! holds with their nominal lease ends, and nemesis periods as bands.
//!
//! Lanes: with the run's concurrency C known (run.json or the meta record),
//! process n belongs to worker n mod C (the runner numbers worker w's
//! processes w, w+C, w+2C, ...), and `"n-lease"` to n's worker. Without C
//! every process gets its own lane. Other named processes (e.g. the final
//! read's `"final"`) get a lane each; the nemesis has one lane at the top.

use super::holds::{holds, Hold};
use super::nemesis::{bands, Band};
use super::rundir::ReportError;
use crate::history::jsonl::JsonlReader;
use crate::history::{Meta, Op, OpType, Process};
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;

/// How an operation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Ok = 0,
    Fail = 1,
    Info = 2,
    /// Never completed in the history.
    Pending = 3,
}

/// One operation: its invocation and completion.
#[derive(Clone, Debug)]
pub struct Interval {
    pub invoke_index: u64,
    pub complete_index: Option<u64>,
    /// ns since the run started.
    pub start: u64,
    pub end: Option<u64>,
    /// Index into [`Timeline::procs`].
    pub process: u32,
    /// Index into [`Timeline::lanes`].
    pub lane: u32,
    /// Index into [`Timeline::fs`].
    pub f: u32,
    pub outcome: Outcome,
    /// Index into [`Timeline::keys`].
    pub key: Option<u32>,
    pub fence: Option<u64>,
    pub lease_ms: Option<u64>,
    pub owner: Option<String>,
    pub seq: Option<u64>,
    pub error: Option<String>,
    /// The value, shortened for display.
    pub value: Option<String>,
    /// The full value of the completion (or invocation), kept for nemesis
    /// ops only (their details name the fault and target).
    pub detail: Value,
}

impl Interval {
    /// Latency in ns, for completed ops.
    pub fn latency(&self) -> Option<u64> {
        self.end.map(|e| e.saturating_sub(self.start))
    }
}

/// What a lane holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaneKind {
    Nemesis,
    /// One worker slot (with C known).
    Worker,
    /// One client process (C unknown).
    Process,
    /// A named process that is no worker's (e.g. the final read).
    Other,
}

impl Lane {
    /// A lane with no processes yet.
    pub fn new(id: &str, label: &str, kind: LaneKind) -> Lane {
        Lane {
            id: id.into(),
            label: label.into(),
            kind,
            processes: vec![],
            order: (0, 0, String::new()),
        }
    }
}

impl LaneKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LaneKind::Nemesis => "nemesis",
            LaneKind::Worker => "worker",
            LaneKind::Process => "process",
            LaneKind::Other => "other",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Lane {
    pub id: String,
    pub label: String,
    pub kind: LaneKind,
    /// The processes drawn in this lane, as they appear in the history.
    pub processes: Vec<String>,
    /// Sort key: nemesis, workers by slot, then others by name.
    order: (u8, i64, String),
}

/// A history ready to draw.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    pub meta: Option<Meta>,
    pub lanes: Vec<Lane>,
    pub procs: Vec<String>,
    pub fs: Vec<String>,
    pub keys: Vec<String>,
    /// Sorted by start time, then invocation index.
    pub intervals: Vec<Interval>,
    pub holds: Vec<Hold>,
    pub bands: Vec<Band>,
    /// The latest time in the history (ns).
    pub end_ns: u64,
    /// Lines with an op.
    pub op_lines: u64,
}

/// Interns strings into a table, returning their indexes.
#[derive(Default)]
struct Table {
    names: Vec<String>,
    index: HashMap<String, u32>,
}

impl Table {
    fn id(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(s.to_string());
        self.index.insert(s.to_string(), i);
        i
    }
}

/// Which lane a process belongs to: (id, label, kind, order).
fn lane_of(p: &Process, stride: Option<i64>) -> (String, String, LaneKind, (u8, i64, String)) {
    let worker = |n: i64| match stride {
        Some(c) if c > 0 => {
            let w = n.rem_euclid(c);
            (
                format!("w{w}"),
                format!("worker {w}"),
                LaneKind::Worker,
                (1, w, String::new()),
            )
        }
        _ => (
            format!("p{n}"),
            format!("process {n}"),
            LaneKind::Process,
            (1, n, String::new()),
        ),
    };
    match p {
        Process::Nemesis => (
            "nemesis".into(),
            "nemesis".into(),
            LaneKind::Nemesis,
            (0, 0, String::new()),
        ),
        Process::Num(n) => worker(*n),
        Process::Named(s) => {
            let digits: String = s.chars().take_while(|c| c.is_ascii_digit()).collect();
            match digits.parse::<i64>() {
                Ok(n) if s[digits.len()..].starts_with('-') => worker(n),
                _ => (
                    format!("x-{s}"),
                    s.clone(),
                    LaneKind::Other,
                    (2, 0, s.clone()),
                ),
            }
        }
    }
}

/// Shorten a value for display: scalars as-is, small arrays inline, big
/// ones by their length.
pub fn short_value(v: &Value) -> Option<String> {
    let s = match v {
        Value::Null => return None,
        Value::String(s) => s.clone(),
        Value::Array(a) if a.len() > 6 => return Some(format!("[{} items]", a.len())),
        other => other.to_string(),
    };
    Some(if s.chars().count() > 40 {
        let head: String = s.chars().take(37).collect();
        format!("{head}...")
    } else {
        s
    })
}

struct Builder {
    stride: Option<i64>,
    procs: Table,
    fs: Table,
    keys: Table,
    lanes: Vec<Lane>,
    lane_ids: HashMap<String, u32>,
    pending: HashMap<Process, usize>,
    intervals: Vec<Interval>,
    end_ns: u64,
    file: String,
    /// The line of the op being read (for errors).
    line: u64,
}

impl Builder {
    fn lane(&mut self, p: &Process) -> u32 {
        let (id, label, kind, order) = lane_of(p, self.stride);
        let name = p.to_string();
        let i = match self.lane_ids.get(&id) {
            Some(&i) => i,
            None => {
                let i = self.lanes.len() as u32;
                self.lanes.push(Lane {
                    id: id.clone(),
                    label,
                    kind,
                    processes: vec![],
                    order,
                });
                self.lane_ids.insert(id, i);
                i
            }
        };
        let lane = &mut self.lanes[i as usize];
        if !lane.processes.contains(&name) {
            lane.processes.push(name);
        }
        i
    }

    fn malformed(&self, op: &Op, what: &str) -> ReportError {
        ReportError::Json {
            path: self.file.clone(),
            line: self.line as usize,
            msg: format!(
                "op index {}: {what} for process {} (hint: each process invokes, then completes, one op at a time)",
                op.index, op.process
            ),
        }
    }

    fn push(&mut self, op: Op) -> Result<(), ReportError> {
        self.end_ns = self.end_ns.max(op.time);
        match op.kind {
            OpType::Invoke => self.invoke(op),
            _ => self.complete(op),
        }
    }

    fn invoke(&mut self, op: Op) -> Result<(), ReportError> {
        if self.pending.contains_key(&op.process) && !op.process.is_nemesis() {
            return Err(self.malformed(&op, "an invocation while another op is pending"));
        }
        let iv = Interval {
            invoke_index: op.index,
            complete_index: None,
            start: op.time,
            end: None,
            process: self.procs.id(&op.process.to_string()),
            lane: self.lane(&op.process),
            f: self.fs.id(&op.f),
            outcome: Outcome::Pending,
            key: op.key.as_deref().map(|k| self.keys.id(k)),
            fence: op.fence,
            lease_ms: op.lease_ms,
            owner: op.owner,
            seq: None,
            error: None,
            value: short_value(&op.value),
            detail: if op.process.is_nemesis() {
                op.value
            } else {
                Value::Null
            },
        };
        self.pending.insert(op.process, self.intervals.len());
        self.intervals.push(iv);
        Ok(())
    }

    fn complete(&mut self, op: Op) -> Result<(), ReportError> {
        let Some(i) = self.pending.remove(&op.process) else {
            if op.process.is_nemesis() {
                // A lone nemesis event (Jepsen writes some without invoke).
                let mut inv = op.clone();
                inv.kind = OpType::Invoke;
                self.invoke(inv)?;
                return self.complete(op);
            }
            return Err(self.malformed(&op, "a completion without a pending invocation"));
        };
        let iv = &mut self.intervals[i];
        iv.complete_index = Some(op.index);
        iv.end = Some(op.time.max(iv.start));
        iv.outcome = match op.kind {
            OpType::Ok => Outcome::Ok,
            OpType::Fail => Outcome::Fail,
            _ => Outcome::Info,
        };
        iv.fence = op.fence.or(iv.fence);
        iv.lease_ms = op.lease_ms.or(iv.lease_ms);
        iv.owner = op.owner.or(iv.owner.take());
        iv.seq = op.seq;
        iv.error = op.error;
        if let Some(v) = short_value(&op.value) {
            iv.value = Some(v);
        }
        if op.process.is_nemesis() && !op.value.is_null() {
            iv.detail = op.value;
        }
        Ok(())
    }
}

impl Timeline {
    /// Read the history at `path`. `stride` is the run's concurrency, used
    /// to group a worker's processes into one lane; when `None`, the meta
    /// record's `concurrency` is used if present.
    pub fn read(path: &Path, stride: Option<i64>) -> Result<Timeline, ReportError> {
        let reader = JsonlReader::open(path)?;
        let meta = reader.meta().cloned();
        let stride = stride.or_else(|| {
            meta.as_ref()
                .and_then(|m| m.params.get("concurrency"))
                .and_then(Value::as_i64)
        });
        let mut b = Builder {
            stride,
            procs: Table::default(),
            fs: Table::default(),
            keys: Table::default(),
            lanes: vec![],
            lane_ids: HashMap::new(),
            pending: HashMap::new(),
            intervals: vec![],
            end_ns: 0,
            file: path.display().to_string(),
            line: 0,
        };
        let mut reader = reader;
        let mut lines = 0;
        while let Some(op) = reader.next() {
            let op = op?;
            b.line = reader.line();
            b.push(op)?;
            lines += 1;
        }
        Ok(Timeline::finish(b, meta, lines))
    }

    fn finish(b: Builder, meta: Option<Meta>, op_lines: u64) -> Timeline {
        let mut t = Timeline {
            meta,
            lanes: b.lanes,
            procs: b.procs.names,
            fs: b.fs.names,
            keys: b.keys.names,
            intervals: b.intervals,
            end_ns: b.end_ns,
            op_lines,
            ..Timeline::default()
        };
        t.sort_lanes();
        t.intervals.sort_by_key(|iv| (iv.start, iv.invoke_index));
        t.holds = holds(&t);
        let nem = t.fs.clone();
        t.bands = bands(&t.intervals, &t.lanes, &nem, t.end_ns);
        t
    }

    /// Put lanes in display order and renumber the intervals' lanes.
    fn sort_lanes(&mut self) {
        let mut order: Vec<usize> = (0..self.lanes.len()).collect();
        order.sort_by(|&a, &b| self.lanes[a].order.cmp(&self.lanes[b].order));
        let mut new_of = vec![0u32; order.len()];
        for (new, &old) in order.iter().enumerate() {
            new_of[old] = new as u32;
        }
        let mut lanes: Vec<Option<Lane>> = std::mem::take(&mut self.lanes)
            .into_iter()
            .map(Some)
            .collect();
        self.lanes = order
            .iter()
            .map(|&o| lanes[o].take().expect("each lane once"))
            .collect();
        for iv in &mut self.intervals {
            iv.lane = new_of[iv.lane as usize];
        }
    }

    /// The name of an interval's `f`.
    pub fn f(&self, iv: &Interval) -> &str {
        &self.fs[iv.f as usize]
    }

    /// Whether the history names a register workload (checked for
    /// linearizability rather than lock safety).
    pub fn workload(&self) -> Option<String> {
        self.meta
            .as_ref()
            .and_then(|m| m.params.get("workload"))
            .and_then(super::rundir::value_text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(lines: &[&str]) -> tempfile::NamedTempFile {
        use std::io::Write;
        let mut f = tempfile::NamedTempFile::new().unwrap();
        for l in lines {
            writeln!(f, "{l}").unwrap();
        }
        f
    }

    #[test]
    fn worker_lanes_group_renumbered_and_lease_processes() {
        let f = write(&[
            r#"{"type":"meta","checkers":["lock"],"concurrency":2}"#,
            r#"{"index":0,"time":10,"process":0,"type":"invoke","f":"acquire","key":"l"}"#,
            r#"{"index":1,"time":20,"process":0,"type":"ok","f":"acquire","key":"l","fence":3,"lease_ms":1000}"#,
            r#"{"index":2,"time":30,"process":"0-lease","type":"invoke","f":"renew","key":"l"}"#,
            r#"{"index":3,"time":40,"process":"0-lease","type":"ok","f":"renew","key":"l","lease_ms":1000}"#,
            r#"{"index":4,"time":50,"process":0,"type":"invoke","f":"write","key":"c","value":1,"fence":3}"#,
            r#"{"index":5,"time":60,"process":0,"type":"info","f":"write","key":"c","value":1,"fence":3}"#,
            r#"{"index":6,"time":70,"process":2,"type":"invoke","f":"release","key":"l"}"#,
            r#"{"index":7,"time":80,"process":2,"type":"ok","f":"release","key":"l"}"#,
            r#"{"index":8,"time":5,"process":1,"type":"invoke","f":"acquire","key":"l"}"#,
            r#"{"index":9,"time":90,"process":"final","type":"invoke","f":"read","key":"c"}"#,
        ]);
        let t = Timeline::read(f.path(), None).unwrap();
        let ids: Vec<&str> = t.lanes.iter().map(|l| l.id.as_str()).collect();
        assert_eq!(ids, ["w0", "w1", "x-final"]);
        assert_eq!(t.lanes[0].processes, ["0", "0-lease", "2"]);
        assert_eq!(t.intervals[0].invoke_index, 8, "sorted by start time");
        assert_eq!(t.holds.len(), 1);
        let h = &t.holds[0];
        assert_eq!((h.start, h.end, h.fence), (20, Some(70), Some(3)));
        assert_eq!(
            h.lease_end,
            Some(30 + 1_000_000_000),
            "the renew moved the lease end"
        );
        assert_eq!(t.intervals.last().unwrap().outcome, Outcome::Pending);
    }

    #[test]
    fn leader_terms_are_holds_from_campaign_to_resign_or_lost_leadership() {
        let f = write(&[
            r#"{"type":"meta","checkers":["lock"],"workload":"leader","concurrency":2}"#,
            r#"{"index":0,"time":10,"process":0,"type":"invoke","f":"campaign","key":"e"}"#,
            r#"{"index":1,"time":20,"process":0,"type":"ok","f":"campaign","key":"e","fence":7,"owner":"a","lease_ms":1000}"#,
            r#"{"index":2,"time":50,"process":0,"type":"invoke","f":"lost-leadership","key":"e","owner":"a","fence":7}"#,
            r#"{"index":3,"time":50,"process":0,"type":"ok","f":"lost-leadership","key":"e","owner":"a","fence":7}"#,
            r#"{"index":4,"time":60,"process":1,"type":"invoke","f":"campaign","key":"e"}"#,
            r#"{"index":5,"time":70,"process":1,"type":"ok","f":"campaign","key":"e","fence":9,"owner":"b","lease_ms":1000}"#,
            r#"{"index":6,"time":80,"process":1,"type":"invoke","f":"resign","key":"e","owner":"b"}"#,
            r#"{"index":7,"time":90,"process":1,"type":"ok","f":"resign","key":"e","owner":"b"}"#,
        ]);
        let t = Timeline::read(f.path(), None).unwrap();
        let terms: Vec<_> = t.holds.iter().map(|h| (h.fence, h.start, h.end)).collect();
        assert_eq!(terms, [(Some(7), 20, Some(50)), (Some(9), 70, Some(80))]);
    }

    #[test]
    fn completion_without_invoke_is_an_error() {
        let f = write(&[r#"{"index":0,"time":10,"process":0,"type":"ok","f":"acquire"}"#]);
        let e = Timeline::read(f.path(), None).unwrap_err().to_string();
        assert!(
            e.contains(":1: op index 0: a completion without a pending invocation"),
            "{e}"
        );
    }
}
