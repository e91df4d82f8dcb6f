//! `lockjaw toxiproxy`: run the embedded Toxiproxy-compatible server in the
//! foreground until Ctrl-C or SIGTERM.

use crate::exit::Exit;
use std::net::{SocketAddr, ToSocketAddrs};
use tokio::signal::unix::{signal, SignalKind};

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
    match run(args) {
        Ok(()) => Exit::Valid,
        Err(e) => crate::exit::fail(&e),
    }
}

fn run(args: ToxiproxyArgs) -> anyhow::Result<()> {
    let addr = resolve(&args.host, args.port)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        // Handlers first: a signal right after the URL is printed must stop
        // the server cleanly.
        let mut int = signal(SignalKind::interrupt())?;
        let mut term = signal(SignalKind::terminate())?;
        let mut server = super::server::spawn(addr).await?;
        println!("lockjaw toxiproxy: Toxiproxy API on {}", server.url());
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        server.shutdown().await;
        Ok(())
    })
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
