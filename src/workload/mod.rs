//! Workloads: what each worker does per step, read from `workloads/*.toml`.
//!
//! A workload file names a `kind` and its parameters; command-line flags
//! override them ([`Overrides`]). [`load`] finds the file (a path, then
//! `./workloads/<name>.toml`, then the copy compiled into lockjaw), checks
//! every field and returns a resolved [`Workload`] with no optional parts
//! left. The per-step behaviour lives in [`step`]; what a worker tells the
//! controller as it steps in [`notify`] and [`moment`]; the register
//! workload's clients in [`register`].
//!
//! | kind | one step |
//! |---|---|
//! | `lock` | acquire → hold `hold_ms` → release |
//! | `fenced-counter` | acquire → read counter (fenced) → hold → write counter+1 (fenced) → release |
//! | `lock-set` | acquire → read whole set (fenced) → hold → write set ∪ {unique element} (fenced) → release |
//! | `register` | read, write or cas on the lock service's own key-value store (no lock) |
//! | `leader` | not leading: campaign (else observe); leading: read counter (fenced) → hold → write counter+1 (fenced) ([`leader`]) |
//! | `jobs` | acquire → read the applied job ids (fenced) → hold → apply the next job of 1..`jobs` (fenced; with `idempotency_keys` the storage ignores a job it applied) → release |

pub mod cas;
pub mod leader;
pub mod moment;
pub mod notify;
pub mod register;
pub mod step;

use crate::toml_file::{self as file, FileError, Number, Range, Source};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The built-in workload files, compiled in (`workloads/*.toml`).
pub const BUILTIN: &[(&str, &str)] = &[
    ("lock", include_str!("../../workloads/lock.toml")),
    (
        "fenced-counter",
        include_str!("../../workloads/fenced-counter.toml"),
    ),
    (
        "fenced-counter-renewing",
        include_str!("../../workloads/fenced-counter-renewing.toml"),
    ),
    (
        "lock-renewing",
        include_str!("../../workloads/lock-renewing.toml"),
    ),
    ("lock-set", include_str!("../../workloads/lock-set.toml")),
    ("register", include_str!("../../workloads/register.toml")),
    ("leader", include_str!("../../workloads/leader.toml")),
    ("jobs", include_str!("../../workloads/jobs.toml")),
    (
        "jobs-idempotent",
        include_str!("../../workloads/jobs-idempotent.toml"),
    ),
];

/// What a worker does per step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    Lock,
    FencedCounter,
    LockSet,
    Register,
    /// Leader election: campaign, then fenced writes while leading.
    Leader,
    /// A job queue: take the next job under the lock and apply it.
    Jobs,
}

impl Kind {
    /// Every kind, in the order of the table above.
    pub const ALL: [Kind; 6] = [
        Kind::Lock,
        Kind::FencedCounter,
        Kind::LockSet,
        Kind::Register,
        Kind::Leader,
        Kind::Jobs,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Lock => "lock",
            Kind::FencedCounter => "fenced-counter",
            Kind::LockSet => "lock-set",
            Kind::Register => "register",
            Kind::Leader => "leader",
            Kind::Jobs => "jobs",
        }
    }

    /// True for the workloads that take a lock (all but `register`).
    pub fn uses_lock(self) -> bool {
        self != Kind::Register
    }

    /// True for the workloads that touch the protected storage.
    pub fn uses_storage(self) -> bool {
        matches!(
            self,
            Kind::FencedCounter | Kind::LockSet | Kind::Leader | Kind::Jobs
        )
    }

    /// True for the kinds whose step can renew its lease (when the file
    /// says `renew = true`): the lock stepper's kinds ([`step`]), which
    /// also announce each acquire, renew and release to a fault timed by
    /// the protocol. Not `register` (it takes no lock) nor `leader` (its
    /// election client keeps its lease alive on its own, unannounced).
    pub fn renews(self) -> bool {
        match self {
            Kind::Lock | Kind::FencedCounter | Kind::LockSet | Kind::Jobs => true,
            Kind::Register | Kind::Leader => false,
        }
    }

    /// The protected value's initial value (the meta record's `initial`).
    pub fn initial(self) -> Value {
        match self {
            Kind::LockSet | Kind::Jobs => Value::Array(Vec::new()),
            _ => Value::from(0),
        }
    }
}

/// A workload file as written: every parameter but `name` and `kind` optional.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WorkloadFile {
    name: String,
    kind: Kind,
    #[serde(default)]
    description: Option<String>,
    lock_key: Option<String>,
    storage_key: Option<String>,
    hold_ms: Option<u64>,
    think_ms: Option<u64>,
    acquire_wait_ms: Option<u64>,
    acquire_once: Option<bool>,
    ttl_ms: Option<u64>,
    concurrency: Option<usize>,
    time_limit_s: Option<f64>,
    renew: Option<bool>,
    op_timeout_ms: Option<u64>,
    register_key: Option<String>,
    read_ratio: Option<f64>,
    values: Option<u64>,
    lease_guard: Option<LeaseGuard>,
    jobs: Option<u64>,
    idempotency_keys: Option<bool>,
}

/// Whether a worker checks its lease before each protected write
/// (`lease_guard` of a workload file, `--lease-guard` of `run`).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum LeaseGuard {
    /// Write as if the lock were held (fail-open): today's clients.
    #[default]
    Off,
    /// Write only while the lease, counted from its last proof with drift
    /// and the op timeout, outlasts the write; else abandon it (fail-closed).
    On,
}

impl LeaseGuard {
    pub fn is_on(self) -> bool {
        self == LeaseGuard::On
    }

    pub fn name(self) -> &'static str {
        match self {
            LeaseGuard::Off => "off",
            LeaseGuard::On => "on",
        }
    }
}

/// A resolved workload: what every worker of a run does.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    pub name: String,
    pub kind: Kind,
    pub description: String,
    /// The lock's key on the lock service.
    pub lock_key: String,
    /// The protected value's key in the storage.
    pub storage_key: String,
    /// Time spent inside the critical section between the read and the write.
    pub hold_ms: u64,
    /// Pause between steps.
    pub think_ms: u64,
    /// How long one acquire may wait for the holder (etcd, ZooKeeper; Redis
    /// systems try once and the worker retries after `think_ms`).
    pub acquire_wait_ms: u64,
    /// Whether each acquire tries once (the worker retries after
    /// `think_ms`) or may wait `acquire_wait_ms`; `None`: the system's
    /// way (the Redis systems try once). `Some(false)` lets a client
    /// library's own retries run (its blocking acquire).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acquire_once: Option<bool>,
    /// Requested lease.
    pub ttl_ms: u64,
    /// Workers (client processes).
    pub concurrency: usize,
    pub time_limit_s: f64,
    /// Renew the lease while holding (every third of the ttl), recorded
    /// under the worker's lease process.
    pub renew: bool,
    /// Deadline of one request to the lock service or storage.
    pub op_timeout_ms: u64,
    /// Register workload: the key on the lock service's store.
    pub register_key: String,
    /// Register workload: share of reads (the rest split between writes and cas).
    pub read_ratio: f64,
    /// Register workload: values are drawn from 0..values.
    pub values: u64,
    /// Check the lease before each protected write ([`step::guard`]).
    #[serde(default)]
    pub lease_guard: LeaseGuard,
    /// Jobs workload: the job ids are 1..=jobs.
    #[serde(default)]
    pub jobs: u64,
    /// Jobs workload: each apply carries an idempotency key (its job id),
    /// so the storage ignores a job it has applied.
    #[serde(default)]
    pub idempotency_keys: bool,
}

impl Workload {
    /// The run's length (`time_limit_s`; the loader bounds it, and this
    /// saturates rather than panic on a value that bypassed it).
    pub fn time_limit(&self) -> std::time::Duration {
        std::time::Duration::try_from_secs_f64(self.time_limit_s)
            .unwrap_or(std::time::Duration::from_secs(604_800))
    }

    /// True when its workers renew their leases while holding: the file
    /// asks (`renew = true`) and its kind can ([`Kind::renews`]).
    pub fn renews(&self) -> bool {
        self.renew && self.kind.renews()
    }
}

/// Command-line overrides of a workload's parameters.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overrides {
    pub ttl_ms: Option<u64>,
    pub concurrency: Option<usize>,
    pub time_limit_s: Option<f64>,
    pub hold_ms: Option<u64>,
    pub think_ms: Option<u64>,
    pub lease_guard: Option<LeaseGuard>,
}

/// Why a workload could not be loaded.
pub type WorkloadError = FileError;

/// Find, parse and check workload `name` (a name or a path), then apply `ov`.
pub fn load(name: &str, ov: &Overrides) -> Result<Workload, WorkloadError> {
    let (src, _) = file::find(name, "workloads", BUILTIN)?;
    from_source(&src, ov)
}

/// Parse and check a workload from its text.
pub fn from_source(src: &Source, ov: &Overrides) -> Result<Workload, WorkloadError> {
    let w = parse_and_check(src, ov)?;
    half_lease(src, &w, ov)?;
    Ok(w)
}

/// Parse a workload and check everything but the half-lease rule.
fn parse_and_check(src: &Source, ov: &Overrides) -> Result<Workload, WorkloadError> {
    let f: WorkloadFile = file::parse(src)?;
    let w = Workload {
        description: f.description.clone().unwrap_or_default(),
        lock_key: f.lock_key.clone().unwrap_or_else(|| "lockjaw".into()),
        storage_key: f.storage_key.clone().unwrap_or_else(|| match f.kind {
            Kind::LockSet => "set".into(),
            Kind::Jobs => "jobs".into(),
            _ => "counter".into(),
        }),
        hold_ms: ov.hold_ms.or(f.hold_ms).unwrap_or(100),
        think_ms: ov.think_ms.or(f.think_ms).unwrap_or(10),
        acquire_wait_ms: f.acquire_wait_ms.unwrap_or(1000),
        acquire_once: f.acquire_once,
        ttl_ms: ov.ttl_ms.or(f.ttl_ms).unwrap_or(2000),
        concurrency: ov.concurrency.or(f.concurrency).unwrap_or(5),
        time_limit_s: ov.time_limit_s.or(f.time_limit_s).unwrap_or(30.0),
        renew: f.renew.unwrap_or(false),
        op_timeout_ms: f.op_timeout_ms.unwrap_or(2000),
        register_key: f
            .register_key
            .clone()
            .unwrap_or_else(|| "lockjaw-register".into()),
        read_ratio: f.read_ratio.unwrap_or(0.5),
        values: f.values.unwrap_or(5),
        lease_guard: ov.lease_guard.or(f.lease_guard).unwrap_or_default(),
        jobs: f.jobs.unwrap_or(10_000),
        idempotency_keys: f.idempotency_keys.unwrap_or(false),
        name: f.name,
        kind: f.kind,
    };
    for (field, set) in [
        ("jobs", f.jobs.is_some()),
        ("idempotency_keys", f.idempotency_keys.is_some()),
    ] {
        if set && w.kind != Kind::Jobs {
            return Err(src.field(
                field,
                format!("the {} workload takes no `{field}`", w.kind.name()),
                Some("it is a parameter of kind = \"jobs\"; remove it"),
            ));
        }
    }
    check(src, &w, ov)?;
    Ok(w)
}

/// A workload whose half-lease rule ([`half_lease`]) waits for the
/// client's word: a library that renews its own leases (an adapter's
/// `renewals = "all"`) may hold longer than half a lease.
#[derive(Debug)]
pub struct Loaded {
    pub workload: Workload,
    /// The rule's complaint, kept for [`Loaded::finish`].
    half_lease: Option<WorkloadError>,
}

impl Loaded {
    /// The workload, the half-lease rule applied unless the client's
    /// library renews every lease by itself.
    pub fn finish(self, library_renews: bool) -> Result<Workload, WorkloadError> {
        match self.half_lease {
            Some(e) if !library_renews => Err(e),
            _ => Ok(self.workload),
        }
    }
}

/// [`load`], with the half-lease rule left to [`Loaded::finish`] (the
/// run asks the client adapter's handshake first).
pub fn load_for_client(name: &str, ov: &Overrides) -> Result<Loaded, WorkloadError> {
    let (src, _) = file::find(name, "workloads", BUILTIN)?;
    let workload = parse_and_check(&src, ov)?;
    let half_lease = half_lease(&src, &workload, ov).err();
    Ok(Loaded {
        workload,
        half_lease,
    })
}

/// Lengths in ms: up to a day.
const MS: Range = Range::new(0.0, file::DAY_MS, " ms");
/// A lease long enough to measure.
const TTL_MS: Range = Range::new(100.0, file::DAY_MS, " ms");
const CONCURRENCY: Range = Range::new(1.0, 256.0, " workers");
/// Up to a week.
const TIME_LIMIT_S: Range = Range::new(0.001, 604_800.0, " s");

/// A bad value of `field`, named as the flag `--flag` when a flag set it.
fn bad(src: &Source, field: &str, flag: Option<&str>, msg: String, hint: &str) -> WorkloadError {
    match flag {
        Some(flag) => FileError {
            file: format!("--{flag}"),
            line: 0,
            field: None,
            msg,
            hint: Some(hint.to_string()),
        },
        None => src.field(field, msg, Some(hint)),
    }
}

/// `v` of `field` within `r`, or an error naming the flag or the field.
fn ranged<N: Number>(
    src: &Source,
    field: &str,
    flag: Option<&str>,
    v: N,
    r: &Range,
) -> Result<(), WorkloadError> {
    match r.refuse(v) {
        Some((msg, hint)) => Err(bad(src, field, flag, msg, &hint)),
        None => Ok(()),
    }
}

/// Field checks; a flag that set a bad value is named as the flag.
fn check(src: &Source, w: &Workload, ov: &Overrides) -> Result<(), WorkloadError> {
    let flag = |name: &'static str, set: bool| set.then_some(name);
    let conc = flag("concurrency", ov.concurrency.is_some());
    ranged(src, "concurrency", conc, w.concurrency, &CONCURRENCY)?;
    let limit = flag("time-limit", ov.time_limit_s.is_some());
    ranged(src, "time_limit_s", limit, w.time_limit_s, &TIME_LIMIT_S)?;
    for (field, set_by, v, range) in [
        (
            "ttl_ms",
            flag("ttl-ms", ov.ttl_ms.is_some()),
            w.ttl_ms,
            &TTL_MS,
        ),
        (
            "hold_ms",
            flag("hold-ms", ov.hold_ms.is_some()),
            w.hold_ms,
            &MS,
        ),
        (
            "think_ms",
            flag("think-ms", ov.think_ms.is_some()),
            w.think_ms,
            &MS,
        ),
        ("acquire_wait_ms", None, w.acquire_wait_ms, &MS),
    ] {
        ranged(src, field, set_by, v, range)?;
    }
    if w.acquire_once == Some(false) && w.acquire_wait_ms >= w.op_timeout_ms {
        return Err(src.field(
            "acquire_once",
            format!(
                "an acquire may wait acquire_wait_ms ({} ms), but each request gets only \
                 op_timeout_ms ({} ms): a waiting acquire would time out (info)",
                w.acquire_wait_ms, w.op_timeout_ms
            ),
            Some("set op_timeout_ms above acquire_wait_ms"),
        ));
    }
    if w.lease_guard.is_on() && w.op_timeout_ms >= w.ttl_ms {
        return Err(bad(
            src,
            "lease_guard",
            flag("lease-guard", ov.lease_guard.is_some()),
            format!(
                "the lease guard needs a whole op timeout ({} ms) left on the lease before each \
                 write, more than the {} ms lease: every write would be abandoned",
                w.op_timeout_ms, w.ttl_ms
            ),
            "set op_timeout_ms well below ttl_ms (e.g. a quarter of it)",
        ));
    }
    check_file_only(src, w)
}

/// The half-lease rule: without renewals a hold over half the lease
/// leaves a holder outliving its lease with no fault at all. Waived for a
/// library that renews its own leases ([`Loaded::finish`]).
fn half_lease(src: &Source, w: &Workload, ov: &Overrides) -> Result<(), WorkloadError> {
    if w.kind.uses_lock() && !w.renew && w.hold_ms * 2 > w.ttl_ms {
        return Err(bad(
            src,
            "hold_ms",
            ov.hold_ms.is_some().then_some("hold-ms"),
            format!(
                "a hold of {} ms leaves too little of the {} ms lease: a holder would outlive its lease with no fault at all",
                w.hold_ms, w.ttl_ms
            ),
            "keep hold_ms at most half of ttl_ms, or renew the lease (renew = true), or use a client adapter whose library renews its own leases (renewals = \"all\")",
        ));
    }
    Ok(())
}

/// The fields no flag overrides: errors name the file's line and field.
fn check_file_only(src: &Source, w: &Workload) -> Result<(), WorkloadError> {
    src.in_range(
        "op_timeout_ms",
        Some(w.op_timeout_ms),
        &Range::new(1.0, file::DAY_MS, " ms"),
    )?;
    src.in_range("read_ratio", Some(w.read_ratio), &Range::new(0.0, 1.0, ""))?;
    src.in_range("values", Some(w.values), &Range::new(1.0, 1e9, ""))?;
    // The jobs workload keeps one flag per job id.
    src.in_range("jobs", Some(w.jobs), &Range::new(1.0, 1e7, ""))?;
    for (field, v) in [("lock_key", &w.lock_key), ("storage_key", &w.storage_key)] {
        if v.is_empty() {
            return Err(src.field(field, "must not be empty", None));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
