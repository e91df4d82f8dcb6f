//! `lockjaw storage`: the storage server run by hand, in the foreground,
//! until SIGINT or SIGTERM.

use super::StorageConfig;
use std::net::SocketAddr;

/// Serve on `addr` until SIGINT or SIGTERM, printing the address, then the
/// request counts when stopped.
pub fn until_signal(addr: SocketAddr, config: StorageConfig) -> anyhow::Result<()> {
    let mut handle = super::spawn(addr, config)?;
    let fencing = if handle.fencing().is_on() {
        "on"
    } else {
        "off"
    };
    println!("storage listening on {} (fencing {fencing})", handle.addr());
    wait_for_signal()?;
    let stats = handle.stats();
    handle.shutdown();
    eprintln!(
        "storage stopped: {} accepted, {} rejected (stale fence), {} malformed, last seq {}",
        stats.accepted, stats.rejected, stats.malformed, stats.last_seq
    );
    Ok(())
}

/// Block until SIGINT or SIGTERM.
fn wait_for_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut term = signal(SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r?,
            _ = term.recv() => {}
        }
        Ok(())
    })
}
