//! Loopback port reservations shared by every lockjaw on a host.
//!
//! A run that starts servers takes a contiguous block of ports and holds an
//! exclusive `flock` on one file per port (`$TMPDIR/lockjaw-ports/PORT.lock`)
//! for as long as the [`PortBlock`] lives. Two runs on one host (a sweep with
//! `--jobs`, a test bed beside a local run) therefore never pick the same
//! ports, and a lockjaw killed with SIGKILL releases its locks with its file
//! descriptors: nothing is left to clean up. A port that something else has
//! bound (a server a killed run left behind, another program) is skipped
//! when the block is chosen automatically and refused when it was asked for.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

/// Where automatic blocks are taken from: below the kernel's default
/// ephemeral range (32768-60999), below the fixed defaults of
/// `lockjaw cluster up` (17000-17499), and clear of every port the test
/// suite binds itself (20000-29999 for its clusters, 30000-46999).
pub const AUTO_RANGE: std::ops::Range<u16> = 10000..17000;

/// A block of ports this process holds until the value is dropped.
#[derive(Debug)]
pub struct PortBlock {
    pub base: u16,
    pub count: u16,
    _locks: Vec<File>,
}

/// The directory of the lock files.
pub fn lock_dir() -> PathBuf {
    std::env::temp_dir().join("lockjaw-ports")
}

/// Reserve `count` ports starting at `base`, or, without `base`, the first
/// free block in [`AUTO_RANGE`] (the search starts at a random block, so
/// runs started together rarely contend). Errors name the port at fault and
/// end with a hint.
pub fn reserve(base: Option<u16>, count: u16) -> Result<PortBlock, String> {
    if count == 0 {
        return Err("a port block needs at least one port".into());
    }
    let dir = lock_dir();
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    if let Some(b) = base {
        if b as u32 + count as u32 > u16::MAX as u32 + 1 {
            return Err(format!(
                "--base-port {b} is too high for {count} ports (hint: pick a base port below {})",
                u16::MAX as u32 + 1 - count as u32
            ));
        }
        return try_block(b, count).map_err(|(port, why)| {
            format!("port {port} on 127.0.0.1 {why} (hint: pick other ports with --base-port, or leave it out to get a free block)")
        });
    }
    let blocks = (AUTO_RANGE.end - AUTO_RANGE.start) / count;
    if blocks == 0 {
        return Err(format!("cannot reserve {count} ports in one block"));
    }
    let first = rand::random::<u16>() % blocks;
    for k in 0..blocks {
        let b = AUTO_RANGE.start + ((first + k) % blocks) * count;
        if let Ok(block) = try_block(b, count) {
            return Ok(block);
        }
    }
    Err(format!(
        "no block of {count} free ports in {}-{} (hint: stop other lockjaw runs or servers there, or pass --base-port)",
        AUTO_RANGE.start,
        AUTO_RANGE.end - 1
    ))
}

/// Lock every port of the block and check that nothing listens there.
fn try_block(base: u16, count: u16) -> Result<PortBlock, (u16, &'static str)> {
    let mut locks = Vec::with_capacity(count as usize);
    for port in base..base + count {
        let path = lock_dir().join(format!("{port}.lock"));
        let f = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|_| (port, "has a lock file lockjaw cannot open"))?;
        // SAFETY: flock on a descriptor this function owns; no memory is shared.
        let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if r != 0 {
            return Err((port, "is reserved by another lockjaw run"));
        }
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_err() {
            return Err((port, "is in use"));
        }
        locks.push(f);
    }
    Ok(PortBlock {
        base,
        count,
        _locks: locks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reserved_block_is_refused_to_a_second_reservation_until_dropped() {
        let a = reserve(None, 7).unwrap();
        assert!(AUTO_RANGE.contains(&a.base) && AUTO_RANGE.contains(&(a.base + 6)));
        // flock is per open file description: a second open in this same
        // process conflicts just as another process would.
        let e = reserve(Some(a.base + 3), 2).unwrap_err();
        assert!(
            e.contains("reserved by another lockjaw run") && e.contains("hint"),
            "{e}"
        );
        let b = reserve(None, 7).unwrap();
        assert!(b.base + 7 <= a.base || a.base + 7 <= b.base, "{a:?} {b:?}");
        let base = a.base;
        drop(a);
        let again = reserve(Some(base), 7).unwrap();
        assert_eq!(again.base, base);
    }

    #[test]
    fn a_bound_port_is_refused_when_asked_for_and_skipped_otherwise() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let e = reserve(Some(port), 1).unwrap_err();
        assert!(
            e.contains(&format!("port {port}")) && e.contains("in use"),
            "{e}"
        );
    }

    #[test]
    fn a_block_past_the_last_port_is_refused() {
        let e = reserve(Some(65530), 10).unwrap_err();
        assert!(e.contains("--base-port 65530"), "{e}");
    }
}
