//! `--client NAME|PATH` before a run: find the adapter and ask its
//! handshake, so a missing, broken or unwilling adapter stops the run
//! before any server starts, and the run knows the library it tests.

use super::protocol::AdapterSpec;
use crate::client::adapter::{self, Answer, Hello};
use crate::service::System;
use crate::workload::Workload;

/// The adapter's answer for `system`: `Ok(Ok(spec))` it serves it,
/// `Ok(Err(why))` it declares the system unsupported, `Err` it cannot be
/// run or answered badly.
pub fn ask(
    name: &str,
    system: System,
    w: &Workload,
    endpoints: Option<&[String]>,
) -> Result<Result<AdapterSpec, String>, String> {
    let path = adapter::resolve(name)?;
    let path =
        std::path::absolute(&path).map_err(|e| format!("adapter {}: {e}", path.display()))?;
    // The adapter must not contact the servers before its first request:
    // before a local cluster exists these are only where it will be.
    let eps = endpoints.map(<[String]>::to_vec).unwrap_or_else(|| {
        (0..system.default_nodes())
            .map(|i| format!("127.0.0.1:{}", usize::from(system.default_base_port()) + i))
            .collect()
    });
    let mut hello = Hello::new(system.name(), eps, &w.lock_key, w.ttl_ms);
    hello.op_timeout_ms = w.op_timeout_ms;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    Ok(match rt.block_on(adapter::query(&path, &hello))? {
        Answer::Offer(offer) => Ok(AdapterSpec { path, offer }),
        Answer::Unsupported(why) => Err(why),
    })
}

/// [`ask`] for a run: an unsupported system is an error too.
pub fn preflight(
    name: &str,
    system: System,
    w: &Workload,
    endpoints: Option<&[String]>,
) -> Result<AdapterSpec, String> {
    ask(name, system, w, endpoints)?.map_err(|why| {
        format!(
            "--client {name}: the adapter declares --system {system} unsupported: {why} \
             (hint: docs/adapters.md lists which systems each shipped adapter serves)"
        )
    })
}
