//! Clock faults on the clients: `client-clock-jump` and
//! `client-clock-strobe`. A run with one starts every worker (and so its
//! adapter child, which inherits the environment) under libfaketime with a
//! control file of its own ([`WorkerPool::clock_file`]) and
//! `FAKETIME_DONT_FAKE_MONOTONIC=1`: only the wall clock moves, as when NTP
//! steps it. The fault moves the wall clock of the worker its `target`
//! names: the lock holder (default), a waiter (a worker blocked in
//! acquire) or the renewer (whose renewal is in flight), see
//! [`super::aim`]; the history's `target` names it under `holder`. History times stay on
//! the controller's monotonic clock, and lockjaw's own clients time leases
//! with the monotonic clock, so they must not notice; a library that times
//! leases with `time.time()` or `Date.now()` does.
//!
//! - `client-clock-jump`: once a worker holds the lock, jump its wall clock
//!   forward by `offset_ms` (default 2 × the requested lease; a negative
//!   offset jumps back) for the fault's length (default 1 lease), then set
//!   it back.
//! - `client-clock-strobe`: flip the holder's wall clock between
//!   `+offset_ms` and the real time every `period_ms` (default 100) for the
//!   fault's length (default 2 leases), then set it back.
//!
//! The control file's previous offset goes into the undo log (an
//! `Undo::Clock` beneath the run directory) before it is first written.
//!
//! [`WorkerPool::clock_file`]: super::WorkerPool::clock_file

use super::clock::{offset_ms, offset_text, period, Strobing};
use super::{Ctx, Fault, Nemesis, NemesisError, NemesisSpec, Target};
use crate::undo::Undo;
use async_trait::async_trait;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The libfaketime library a worker is started with (glibc's malloc: no
/// allocator preload needed, unlike Debian's jemalloc-linked Redis).
pub const CLIENT_PRELOAD: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// True for the client clock faults.
pub fn is_client_clock_fault(fault: &str) -> bool {
    matches!(fault, "client-clock-jump" | "client-clock-strobe")
}

/// Whether a run of `spec` starts its workers under libfaketime.
pub fn needs_client_faketime(spec: &NemesisSpec) -> bool {
    super::together::leaves(spec)
        .iter()
        .any(|s| is_client_clock_fault(&s.fault))
}

/// Whether libfaketime is here.
pub fn host_ready() -> Result<(), String> {
    if Path::new(CLIENT_PRELOAD).exists() {
        Ok(())
    } else {
        Err(format!(
            "{CLIENT_PRELOAD} missing (hint: install the libfaketime package)"
        ))
    }
}

/// The environment a worker runs under: its wall clock follows `file`.
pub fn worker_env(file: &Path) -> Vec<(String, String)> {
    [
        ("LD_PRELOAD", CLIENT_PRELOAD.to_string()),
        ("FAKETIME_TIMESTAMP_FILE", file.display().to_string()),
        ("FAKETIME_NO_CACHE", "1".to_string()),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The start both faults share: wait for the holder (`None` when the run
/// ends first), remember its control file's offset in the undo log.
struct Aim {
    holder: Value,
    invoked_at: u64,
    file: PathBuf,
    undo: u64,
    offset: i64,
}

async fn aim(ctx: &mut Ctx, fault: &str) -> Result<Option<Aim>, NemesisError> {
    let Some(a) = super::aim::next_worker(ctx, fault).await? else {
        return Ok(None);
    };
    let slot = a.ev.slot;
    let holder = match a.target {
        Target::Holder => json!({
            "slot": slot,
            "process": a.ev.state.process,
            "owner": a.ev.state.owner,
            "holding_ns": a.ev.state.time,
        }),
        _ => a.json(),
    };
    let invoked_at = ctx.clock.now();
    let (file, undo) = remember(ctx, fault, slot)?;
    Ok(Some(Aim {
        holder,
        invoked_at,
        file,
        undo,
        offset: offset_ms(ctx),
    }))
}

/// The holder's control file, its previous offset remembered in the undo
/// log; the file and the undo id.
fn remember(ctx: &Ctx, fault: &str, slot: usize) -> Result<(PathBuf, u64), NemesisError> {
    let file = ctx.workers.clock_file(slot).ok_or_else(|| {
        NemesisError::new(
            fault,
            format!("worker {slot} was not started under libfaketime (hint: lockjaw starts the workers under it only for a client clock fault)"),
        )
    })?;
    let previous = std::fs::read_to_string(&file)
        .map(|t| t.trim().to_string())
        .ok()
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| "+0".into());
    let id = ctx.will(
        fault,
        Undo::Clock {
            file: file.clone(),
            previous,
        },
    )?;
    Ok((file, id))
}

fn set(fault: &str, file: &Path, offset: &str) -> Result<(), NemesisError> {
    crate::process::faketime::check_offset(offset).map_err(|e| NemesisError::new(fault, e))?;
    std::fs::write(file, format!("{offset}\n"))
        .map_err(|e| NemesisError::new(fault, format!("{}: {e}", file.display())))
}

/// Jump the holder's wall clock.
pub struct ClientClockJump;

#[async_trait]
impl Nemesis for ClientClockJump {
    fn name(&self) -> &'static str {
        "client-clock-jump"
    }

    async fn start(&mut self, ctx: &mut Ctx) -> Result<Option<Fault>, NemesisError> {
        let fault = self.name();
        let Some(a) = aim(ctx, fault).await? else {
            return Ok(None);
        };
        if let Err(e) = set(fault, &a.file, &offset_text(a.offset)) {
            let _ = ctx.revert(fault, &[a.undo]).await;
            return Err(e);
        }
        Ok(Some(Fault {
            invoked_at: a.invoked_at,
            undo: vec![a.undo],
            hold: ctx.spec.duration(ctx.ttl),
            target: json!({ "holder": a.holder, "offset_ms": a.offset, "aimed": ctx.spec.target.name() }),
            state: Value::Null,
        }))
    }
}

/// Flip the holder's wall clock back and forth.
#[derive(Default)]
pub struct ClientClockStrobe {
    running: Strobing,
}

#[async_trait]
impl Nemesis for ClientClockStrobe {
    fn name(&self) -> &'static str {
        "client-clock-strobe"
    }

    async fn start(&mut self, ctx: &mut Ctx) -> Result<Option<Fault>, NemesisError> {
        let fault = self.name();
        let Some(a) = aim(ctx, fault).await? else {
            return Ok(None);
        };
        let period = period(ctx);
        let file = a.file;
        self.running
            .start(offset_text(a.offset), period, move |text: String| {
                let r = set("client-clock-strobe", &file, &text);
                async move { r }
            });
        Ok(Some(Fault {
            invoked_at: a.invoked_at,
            undo: vec![a.undo],
            hold: ctx.spec.duration(ctx.ttl),
            target: json!({
                "holder": a.holder,
                "offset_ms": a.offset,
                "period_ms": period.as_millis() as u64,
            }),
            state: Value::Null,
        }))
    }

    async fn stop(&mut self, ctx: &mut Ctx, fault: &Fault) -> Result<Value, NemesisError> {
        self.running.stop(ctx, self.name(), fault).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_client_clock_faults_start_workers_under_libfaketime() {
        let jump = NemesisSpec::of("client-clock-jump").unwrap();
        assert!(needs_client_faketime(&jump));
        assert!(needs_client_faketime(
            &NemesisSpec::of("client-clock-strobe").unwrap()
        ));
        assert!(!needs_client_faketime(
            &NemesisSpec::of("clock-jump").unwrap()
        ));
        let env = worker_env(Path::new("/run/x/faketime/worker-0.offset"));
        assert!(env.contains(&("FAKETIME_DONT_FAKE_MONOTONIC".into(), "1".into())));
    }
}
