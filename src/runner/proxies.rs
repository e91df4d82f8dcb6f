//! The run's Toxiproxy proxies: one per worker × lock-service node and one
//! per worker × storage, so a fault can cut or slow one client's link
//! without touching the others. Each proxy listens on a free loopback port;
//! its undo entry (delete it) is written before it is created.

use crate::nemesis::Links;
use crate::toxiproxy::{NewProxy, ToxiproxyApi};
use crate::undo::{Undo, UndoLog};
use std::collections::BTreeMap;

/// What one worker dials.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorkerLinks {
    /// Node's announced address → this worker's proxy in front of it.
    pub dial: BTreeMap<String, String>,
    /// This worker's proxy in front of the storage.
    pub storage: Option<String>,
}

/// A node to put proxies in front of: (name, address).
pub type Upstream = (String, String);

/// What the name of every proxy of run `run_id` starts with (then `-`):
/// unique on a shared server, and what heal proves a proxy is the run's by.
pub fn prefix(run_id: &str) -> String {
    format!("lockjaw-{run_id}")
}

/// Create every proxy. `prefix` ([`prefix`]) makes the names unique on a
/// shared server.
pub async fn create(
    api: &dyn ToxiproxyApi,
    embedded: bool,
    undo: &UndoLog,
    prefix: &str,
    workers: usize,
    nodes: &[Upstream],
    storage: Option<&str>,
) -> Result<(Links, Vec<WorkerLinks>), String> {
    let mut links = Links::default();
    let mut per = Vec::with_capacity(workers);
    for w in 0..workers {
        let mut wl = WorkerLinks::default();
        for (name, addr) in nodes {
            let p = format!("{prefix}-w{w}-{name}");
            let listen = one(api, embedded, undo, &p, addr).await?;
            links.node.entry(w).or_default().insert(name.clone(), p);
            wl.dial.insert(addr.clone(), listen);
        }
        if let Some(addr) = storage {
            let p = format!("{prefix}-w{w}-storage");
            wl.storage = Some(one(api, embedded, undo, &p, addr).await?);
            links.storage.insert(w, p);
        }
        per.push(wl);
    }
    Ok((links, per))
}

async fn one(
    api: &dyn ToxiproxyApi,
    embedded: bool,
    undo: &UndoLog,
    name: &str,
    upstream: &str,
) -> Result<String, String> {
    undo.push(Undo::Proxy {
        url: api.url().to_string(),
        proxy: name.to_string(),
        embedded,
    })
    .map_err(|e| format!("cannot write the undo log: {e}"))?;
    let p = api
        .create_proxy(&NewProxy::new(name, "127.0.0.1:0", upstream))
        .await
        .map_err(|e| e.to_string())?;
    Ok(p.listen)
}

/// Close every connection through these proxies (disable, then enable): no
/// byte a toxic still holds is delivered afterwards.
pub async fn cut_all(api: &dyn ToxiproxyApi, names: &[String]) -> Result<(), String> {
    for n in names {
        api.cut_connections(n).await.map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_proxy_per_worker_and_node_plus_storage() {
        let d = tempfile::tempdir().unwrap();
        let undo = UndoLog::open(
            &d.path().join("undo.jsonl"),
            crate::runner::heal::executor(),
        )
        .unwrap();
        let srv = crate::toxiproxy::spawn_loopback().await.unwrap();
        let api = srv.client().unwrap();
        let nodes = vec![
            ("n1".to_string(), "127.0.0.1:1".to_string()),
            ("n2".to_string(), "127.0.0.1:2".to_string()),
        ];
        let (links, per) = create(&api, true, &undo, "t", 3, &nodes, Some("127.0.0.1:3"))
            .await
            .unwrap();
        assert_eq!(links.all().len(), 9);
        assert_eq!(links.node_proxies(1), vec!["t-w1-n1", "t-w1-n2"]);
        assert_eq!(per[2].dial.len(), 2);
        assert_ne!(per[0].dial["127.0.0.1:1"], per[1].dial["127.0.0.1:1"]);
        assert!(per[0].storage.as_deref().unwrap().starts_with("127.0.0.1:"));
        assert_eq!(api.proxies().await.unwrap().len(), 9);
        assert_eq!(undo.pending().len(), 9);
        assert!(undo.drain().await.is_empty());
        assert!(api.proxies().await.unwrap().is_empty());
    }
}
