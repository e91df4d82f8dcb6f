//! A loopback TLS bridge for a client library that speaks only plain TCP
//! to the addresses it is given (ZooKeeper's client, whose own TLS
//! feature verifies the dialled address and pulls in a second crypto
//! backend): for each target it listens on 127.0.0.1, and wraps every
//! connection it accepts in lockjaw's TLS ([`super::tls::connect`]: the
//! auth file's CA and client certificate, verifying its `server_name`)
//! to the target (a worker's proxy, or the server itself).
//!
//! Only connections from this process's own user are bridged: the peer's
//! socket owner is looked up in `/proc/net/tcp`, so another user on the
//! machine cannot borrow the client certificate. Dropping the [`Bridge`]
//! stops its listeners; connections already bridged end when either side
//! closes.

use crate::auth::Tls;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// The listeners of one client's targets.
pub struct Bridge {
    /// The local address standing for each target, in order.
    pub local: Vec<String>,
    /// The last TLS failure, for the error of a connect that timed out.
    last_error: Arc<Mutex<Option<String>>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Bridge {
    /// Listen for each of `targets` (`HOST:PORT`).
    pub async fn open(targets: &[String], tls: &Tls) -> std::io::Result<Bridge> {
        let last_error = Arc::new(Mutex::new(None));
        let mut b = Bridge {
            local: Vec::new(),
            last_error: last_error.clone(),
            tasks: Vec::new(),
        };
        for target in targets {
            let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
            let at = l.local_addr()?;
            b.local.push(at.to_string());
            let (target, tls, last) = (target.clone(), Arc::new(tls.clone()), last_error.clone());
            b.tasks.push(tokio::spawn(async move {
                loop {
                    let Ok((sock, peer)) = l.accept().await else {
                        // Out of descriptors, say: try again shortly.
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        continue;
                    };
                    if !own_user(peer, at) {
                        continue;
                    }
                    let (target, tls, last) = (target.clone(), tls.clone(), last.clone());
                    tokio::spawn(async move {
                        let mut sock = sock;
                        let _ = sock.set_nodelay(true);
                        match super::tls::connect(&target, &tls).await {
                            Ok(mut s) => {
                                let _ = tokio::io::copy_bidirectional(&mut sock, &mut s).await;
                            }
                            Err(e) => {
                                *last.lock().unwrap_or_else(|p| p.into_inner()) =
                                    Some(e.to_string());
                            }
                        }
                    });
                }
            }));
        }
        Ok(b)
    }

    /// The last TLS failure of a bridged connection, if any.
    pub fn last_error(&self) -> Option<String> {
        self.last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Whether the socket at `peer`, connected to our listener at `at`, is
/// owned by this process's effective user (`/proc/net/tcp`).
fn own_user(peer: SocketAddr, at: SocketAddr) -> bool {
    let (SocketAddr::V4(peer), SocketAddr::V4(at)) = (peer, at) else {
        return false;
    };
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let me = unsafe { libc::geteuid() };
    owner_in(&table, peer, at) == Some(me)
}

/// The uid owning the socket whose local address is `local` and remote
/// address `remote`, in the text of `/proc/net/tcp`.
fn owner_in(table: &str, local: SocketAddrV4, remote: SocketAddrV4) -> Option<u32> {
    let hex = |a: SocketAddrV4| {
        format!(
            "{:08X}:{:04X}",
            u32::from_ne_bytes(a.ip().octets()),
            a.port()
        )
    };
    let (l, r) = (hex(local), hex(remote));
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.len() > 7 && f[1] == l && f[2] == r)
            .then(|| f[7].parse().ok())
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::owner_in;
    use std::net::SocketAddrV4;

    #[test]
    fn the_owner_of_a_loopback_socket_is_read_from_proc_net_tcp() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
            0: 0100007F:D431 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 42 1\n\
            1: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 43 1\n";
        let peer: SocketAddrV4 = "127.0.0.1:54321".parse().unwrap();
        let listener: SocketAddrV4 = "127.0.0.1:8080".parse().unwrap();
        if cfg!(target_endian = "little") {
            assert_eq!(owner_in(table, peer, listener), Some(1000));
            assert_eq!(owner_in(table, listener, peer), Some(0));
        }
        let other: SocketAddrV4 = "127.0.0.1:1".parse().unwrap();
        assert_eq!(owner_in(table, other, listener), None);
    }
}
