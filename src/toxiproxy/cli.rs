//! The arguments of `lockjaw toxiproxy` (the embedded Toxiproxy-compatible
//! server in the foreground until Ctrl-C or SIGTERM:
//! [`super::server::serve_until_signal`]).

use crate::exit::Exit;
use std::net::{SocketAddr, ToSocketAddrs};

#[derive(clap::Args, Debug)]
pub struct ToxiproxyArgs {
    /// Address to serve the Toxiproxy HTTP API on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to serve the API on (0 picks a free one).
    #[arg(long, default_value_t = 8474)]
    pub port: u16,
}

pub fn toxiproxy(args: ToxiproxyArgs) -> Exit {
    match resolve(&args.host, args.port).and_then(super::server::serve_until_signal) {
        Ok(()) => Exit::Valid,
        Err(e) => crate::exit::fail(&e),
    }
}

fn resolve(host: &str, port: u16) -> anyhow::Result<SocketAddr> {
    (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "cannot resolve --host {host:?} (hint: use an IP address such as 127.0.0.1)"
            )
        })
}
