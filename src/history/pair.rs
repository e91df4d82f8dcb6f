//! Pairing invocations with their completions, enforcing the history rules.
//!
//! Every client operation is an `invoke` followed by exactly one `ok`, `fail`
//! or `info` from the same process, with the same `f`, no earlier in time.
//! An invoke while the process has an operation pending (an `info` one stays
//! pending forever), or a completion with none pending, is malformed.
//! Nemesis entries are fault markers and pass through unpaired. Pairing
//! follows each process's own line order; real-time order is `time`.
//!
//! [`Slots`] holds these rules once; [`Pairer`] pairs owned ops with them,
//! and the lock checks' streaming pairer turns borrowed lines into events
//! with them.

use super::{HistoryError, Op, OpType, Process};

/// An operation: its invocation and, unless it never completed, its completion.
#[derive(Clone, Debug, PartialEq)]
pub struct Pair {
    pub invoke: Op,
    pub invoke_line: u64,
    /// `None`: the history ended with the operation still pending.
    pub complete: Option<Op>,
    pub complete_line: u64,
}

impl Pair {
    /// The operation may or may not have taken effect: it ended in `info` or
    /// never completed. It stays pending forever.
    pub fn is_pending(&self) -> bool {
        self.complete
            .as_ref()
            .map_or(true, |c| c.kind == OpType::Info)
    }

    /// The operation certainly did not take effect.
    pub fn is_fail(&self) -> bool {
        self.complete
            .as_ref()
            .is_some_and(|c| c.kind == OpType::Fail)
    }

    /// The line where the operation ended (its invoke line if still pending).
    pub fn last_line(&self) -> u64 {
        if self.complete.is_some() {
            self.complete_line
        } else {
            self.invoke_line
        }
    }
}

/// Why a line breaks the pairing rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Broken {
    /// An invoke while the process's invocation from this line is pending.
    Pending(u64),
    /// The process's last op ended in `info` at this line: it never acts again.
    Crashed(u64),
    /// A completion with no invocation of its process pending.
    NoPending,
}

/// The pairing rules, the one place they live: per process at most one
/// invocation pending; a completion takes the pending one; a process
/// whose op ended in `info` never invokes or completes again. Generic over
/// the process key `P` and what a pending invocation keeps `T`, so the
/// lock checks' pairer (process ids, borrowed ops) and [`Pairer`] share
/// it; each words its own errors.
pub struct Slots<P, T> {
    pending: foldhash::HashMap<P, (u64, T)>,
    crashed: foldhash::HashMap<P, u64>,
}

impl<P: std::hash::Hash + Eq + Clone, T> Default for Slots<P, T> {
    fn default() -> Self {
        Slots {
            pending: Default::default(),
            crashed: Default::default(),
        }
    }
}

impl<P: std::hash::Hash + Eq + Clone, T> Slots<P, T> {
    /// Whether `p` may invoke now.
    pub fn check_invoke(&self, p: &P) -> Result<(), Broken> {
        if let Some((l, _)) = self.pending.get(p) {
            return Err(Broken::Pending(*l));
        }
        match self.crashed.get(p) {
            Some(l) => Err(Broken::Crashed(*l)),
            None => Ok(()),
        }
    }

    /// What `p` has pending, if anything.
    pub fn pending(&self, p: &P) -> Option<&T> {
        self.pending.get(p).map(|(_, t)| t)
    }

    /// Record `p`'s invocation at `line` (after [`Slots::check_invoke`]).
    pub fn invoke(&mut self, p: P, line: u64, t: T) {
        self.pending.insert(p, (line, t));
    }

    /// A completion of kind `kind` by `p` at `line`: the pending invocation
    /// and its line. An `info` completion ends the process.
    pub fn complete(&mut self, p: &P, line: u64, kind: OpType) -> Result<(u64, T), Broken> {
        let Some(inv) = self.pending.remove(p) else {
            return Err(match self.crashed.get(p) {
                Some(l) => Broken::Crashed(*l),
                None => Broken::NoPending,
            });
        };
        if kind == OpType::Info {
            self.crashed.insert(p.clone(), line);
        }
        Ok(inv)
    }

    /// How many invocations are pending.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// End of history: the invocations still pending, with their lines.
    pub fn into_pending(self) -> impl Iterator<Item = (P, u64, T)> {
        self.pending.into_iter().map(|(p, (l, t))| (p, l, t))
    }
}

/// Pairs a stream of (line, op) into operations, checking the rules.
pub struct Pairer {
    file: String,
    slots: Slots<Process, Op>,
    /// Nemesis entries seen (not paired).
    pub nemesis_ops: u64,
}

impl Pairer {
    pub fn new(file: impl Into<String>) -> Pairer {
        Pairer {
            file: file.into(),
            slots: Slots::default(),
            nemesis_ops: 0,
        }
    }

    fn err(&self, line: u64, msg: String) -> HistoryError {
        HistoryError {
            file: self.file.clone(),
            line,
            msg,
        }
    }

    /// Feed one op; returns the operation it completes, if any.
    pub fn push(&mut self, line: u64, op: Op) -> Result<Option<Pair>, HistoryError> {
        if op.process.is_nemesis() {
            self.nemesis_ops += 1;
            return Ok(None);
        }
        let p = op.process.clone();
        if op.kind == OpType::Invoke {
            return match self.slots.check_invoke(&p) {
                Err(Broken::Pending(l)) => Err(self.err(
                    line,
                    format!(
                        "process {p} invokes while its op from line {l} is still pending \
                         (hint: each process runs one op at a time; complete it with ok, fail or info first)"
                    ),
                )),
                Err(Broken::Crashed(l)) => Err(self.err(
                    line,
                    format!(
                        "process {p} invokes again after its op ended in info at line {l} \
                         (hint: an info op may still take effect, so the process must not be reused; give the next op a new process)"
                    ),
                )),
                _ => {
                    self.slots.invoke(p, line, op);
                    Ok(None)
                }
            };
        }
        let (inv_line, invoke) = match self.slots.complete(&p, line, op.kind) {
            Ok(inv) => inv,
            Err(Broken::Crashed(l)) => {
                return Err(self.err(
                    line,
                    format!(
                        "{:?} completion for process {p}, whose op already ended in info at line {l}",
                        op.kind
                    )
                    .to_lowercase(),
                ));
            }
            Err(_) => {
                return Err(self.err(
                    line,
                    format!(
                        "completion without invoke: process {p} has no op pending \
                         (hint: every ok/fail/info follows an invoke of the same process)"
                    ),
                ))
            }
        };
        if invoke.f != op.f {
            return Err(self.err(
                line,
                format!(
                    "completion f `{}` does not match the invoke f `{}` at line {inv_line}",
                    op.f, invoke.f
                ),
            ));
        }
        if op.time < invoke.time {
            return Err(self.err(
                line,
                format!(
                    "completion time {} is before its invoke's time {} (line {inv_line})",
                    op.time, invoke.time
                ),
            ));
        }
        Ok(Some(Pair {
            invoke,
            invoke_line: inv_line,
            complete: Some(op),
            complete_line: line,
        }))
    }

    /// End of history: the operations still pending, in invoke line order.
    pub fn finish(self) -> Vec<Pair> {
        let mut open: Vec<Pair> = self
            .slots
            .into_pending()
            .map(|(_, l, invoke)| Pair {
                invoke,
                invoke_line: l,
                complete: None,
                complete_line: 0,
            })
            .collect();
        open.sort_by_key(|p| p.invoke_line);
        open
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(p: i64, kind: OpType, f: &str, t: u64) -> Op {
        Op::new(t, Process::Num(p), kind, f)
    }

    #[test]
    fn pairs_and_keeps_pending() {
        let mut pr = Pairer::new("h");
        assert!(pr
            .push(1, op(0, OpType::Invoke, "read", 1))
            .unwrap()
            .is_none());
        assert!(pr
            .push(2, op(1, OpType::Invoke, "write", 2))
            .unwrap()
            .is_none());
        let p = pr.push(3, op(0, OpType::Ok, "read", 3)).unwrap().unwrap();
        assert_eq!((p.invoke_line, p.complete_line), (1, 3));
        assert!(!p.is_pending());
        let rest = pr.finish();
        assert_eq!(rest.len(), 1);
        assert!(rest[0].is_pending());
    }

    #[test]
    fn rejects_broken_pairing() {
        let mut pr = Pairer::new("h");
        let e = pr.push(1, op(0, OpType::Ok, "read", 1)).unwrap_err();
        assert!(
            e.to_string().starts_with("h:1: completion without invoke"),
            "{e}"
        );
        pr.push(2, op(0, OpType::Invoke, "read", 1)).unwrap();
        let e = pr.push(3, op(0, OpType::Invoke, "read", 2)).unwrap_err();
        assert!(e.to_string().contains("still pending"), "{e}");
        let e = pr.push(4, op(0, OpType::Ok, "write", 2)).unwrap_err();
        assert!(e.to_string().contains("does not match"), "{e}");
        let mut pr = Pairer::new("h");
        pr.push(1, op(0, OpType::Invoke, "read", 1)).unwrap();
        pr.push(2, op(0, OpType::Info, "read", 2)).unwrap();
        let e = pr.push(3, op(0, OpType::Invoke, "read", 3)).unwrap_err();
        assert!(
            e.to_string().starts_with("h:3: process 0 invokes again"),
            "{e}"
        );
    }
}
