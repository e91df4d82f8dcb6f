//! Loops: an upstream that leads back into this server is refused (a proxy
//! to its own listen address, to another proxy's, to the API's), so two
//! proxies pointing at each other cannot make the server dial itself until
//! its descriptors run out. A listener on `0.0.0.0` or `::` is reached
//! through every address of this host, and connecting to `0.0.0.0` or `::`
//! reaches the loopback. A loop this cannot see (a name that does not
//! resolve yet, a hop through another host) meets the bound on each
//! proxy's connections instead (`proxy`). [`start_checked`] enables a
//! proxy only after the check, and checks again once a port-0 listen
//! address is bound.

use super::collection::ApiError;
use super::proxy::Proxy;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs, UdpSocket};

/// Who listens on an address of this server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Who {
    Api,
    Proxy(String),
}

/// An address this server listens on (or holds for a disabled proxy).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Listener {
    pub addr: SocketAddr,
    pub who: Who,
}

impl Listener {
    /// Proxy `name`'s listen address, resolved (`localhost:7070`, `:7070`);
    /// None if it does not resolve.
    pub fn proxy(name: &str, listen: &str) -> Option<Listener> {
        let addr = match listen.parse::<SocketAddr>() {
            Ok(a) => a,
            Err(_) => super::proxy::resolve_listen(listen)?.parse().ok()?,
        };
        Some(Listener {
            addr,
            who: Who::Proxy(name.to_string()),
        })
    }
}

/// Whether `ip` is an address of this host: binding to it succeeds.
fn is_local(ip: IpAddr) -> bool {
    ip.is_loopback() || ip.is_unspecified() || UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}

/// Whether a connection to `target` reaches a socket listening on `on`.
pub(crate) fn reaches(target: SocketAddr, on: SocketAddr) -> bool {
    if target.port() != on.port() {
        return false;
    }
    let (t, l) = (target.ip().to_canonical(), on.ip().to_canonical());
    let t = match t {
        IpAddr::V4(a) if a.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(a) if a.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        t => t,
    };
    t == l || (l.is_unspecified() && is_local(t))
}

/// Refuse `upstream` for proxy `name` when it resolves to an address one
/// of `listeners` is reached through. An upstream that does not resolve is
/// not judged (the connection bound covers it).
pub(crate) fn check(name: &str, upstream: &str, listeners: &[Listener]) -> Result<(), ApiError> {
    let Ok(targets) = upstream.to_socket_addrs() else {
        return Ok(());
    };
    let targets: Vec<SocketAddr> = targets.collect();
    let Some(l) = listeners
        .iter()
        .find(|l| targets.iter().any(|t| reaches(*t, l.addr)))
    else {
        return Ok(());
    };
    let message = match &l.who {
        Who::Proxy(n) if n == name => format!(
            "proxy would connect to itself: upstream {upstream} is its own listen address {} \
             (lockjaw refuses this loop)",
            l.addr
        ),
        Who::Proxy(n) => format!(
            "proxy would connect to this server: upstream {upstream} reaches {}, where proxy {n} \
             listens (lockjaw refuses loops: point the upstream at the real service)",
            l.addr
        ),
        Who::Api => format!(
            "proxy would connect to this server: upstream {upstream} reaches {}, where its API \
             listens (lockjaw refuses loops: point the upstream at the real service)",
            l.addr
        ),
    };
    Err(ApiError::new(400, message))
}

/// Refuse a loop before binding (the listen spec resolved), and start;
/// `others` are the server's other listeners ([`loops`]).
pub(crate) async fn start_checked(p: &mut Proxy, others: &[Listener]) -> Result<(), ApiError> {
    let mut all = others.to_vec();
    all.extend(Listener::proxy(&p.name, &p.listen));
    check(&p.name, &p.upstream, &all)?;
    p.start().await.map_err(ApiError::listen)?;
    all.extend(Listener::proxy(&p.name, &p.listen));
    if let Err(e) = check(&p.name, &p.upstream, &all) {
        // Port 0 bound to the very port the upstream names.
        p.stop().await;
        return Err(e);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn what_reaches_a_listener() {
        for (target, on, want) in [
            ("127.0.0.1:7", "127.0.0.1:7", true),
            ("127.0.0.1:7", "127.0.0.1:8", false),
            ("127.0.0.1:7", "0.0.0.0:7", true),
            ("[::1]:7", "[::]:7", true),
            ("127.0.0.1:7", "[::]:7", true),
            ("0.0.0.0:7", "127.0.0.1:7", true),
            ("[::]:7", "[::1]:7", true),
            ("[::ffff:127.0.0.1]:7", "127.0.0.1:7", true),
            ("127.0.0.2:7", "127.0.0.1:7", false),
            // An address of no interface here is another host.
            ("192.0.2.1:7", "0.0.0.0:7", false),
        ] {
            assert_eq!(reaches(a(target), a(on)), want, "{target} -> {on}");
        }
    }

    #[test]
    fn a_loop_names_what_it_reaches() {
        let ls = [
            Listener {
                addr: a("127.0.0.1:8474"),
                who: Who::Api,
            },
            Listener::proxy("b", "0.0.0.0:7001").unwrap(),
            Listener::proxy("a", "localhost:7002").unwrap(),
        ];
        let e = check("a", "localhost:8474", &ls).unwrap_err();
        assert!(e.message.contains("where its API listens"), "{}", e.message);
        let e = check("a", "127.0.0.1:7001", &ls).unwrap_err();
        assert!(e.message.contains("where proxy b listens"), "{}", e.message);
        let e = check("a", "127.0.0.1:7002", &ls).unwrap_err();
        assert!(e.message.contains("connect to itself"), "{}", e.message);
        assert_eq!(e.status, 400);
        assert!(check("a", "127.0.0.1:7003", &ls).is_ok());
        assert!(check("a", "no-such-host.invalid:7001", &ls).is_ok());
    }
}
