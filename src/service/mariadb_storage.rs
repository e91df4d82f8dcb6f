//! `--storage mariadb`: the protected value in a table of a MariaDB server
//! the run starts beside its lock service (in `DIR/mariadb`, cgroup group
//! `lockjaw/<run-id>-my`, data in the temporary directory), with the
//! fencing rule of `--storage postgres` ([`crate::storage::mariadb`]). The
//! runner asks these functions and knows no SQL.

use super::System;
use crate::client::mariadb_conn as my;
use crate::cluster::{self, Cluster};
use crate::process::ports::{self, PortBlock};
use crate::storage::mariadb::{self as store, MyResource, Names};
use crate::undo::{Undo, UndoLog};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The cluster directory of a run's MariaDB storage server.
pub fn server_dir(run_dir: &Path) -> PathBuf {
    run_dir.join("mariadb")
}

/// lockjaw's own login to its own server at `addr`.
fn opts(addr: &str) -> Result<mysql_async::Opts, String> {
    my::opts(
        addr,
        &my::Login {
            user: my::USER.into(),
            password: None,
            database: my::DATABASE.into(),
        },
    )
}

/// A worker's connection to the storage of run `run_id` through its proxy
/// at `addr`.
pub fn worker_resource(run_id: &str, addr: &str, timeout: Duration) -> Result<MyResource, String> {
    Ok(MyResource::new(opts(addr)?, &Names::new(run_id), timeout))
}

/// `--storage mariadb`: the run's server and the names of its objects.
pub struct MyStorage {
    cluster: Cluster,
    /// Where the workers' proxies point (`127.0.0.1:PORT`).
    pub addr: String,
    names: Names,
    pub run_id: String,
    /// Held until the run ends: no other run takes the server's port.
    _port: PortBlock,
}

impl MyStorage {
    /// Start the run's MariaDB server (its undo entry first) and create
    /// the table, sequence and procedure holding `initial`, fenced when
    /// `fencing`.
    pub async fn open(
        dir: &Path,
        undo: &UndoLog,
        run_id: &str,
        fencing: bool,
        initial: BTreeMap<String, Value>,
    ) -> Result<MyStorage, String> {
        let port = ports::reserve(None, 1)?;
        undo.push(Undo::Cluster {
            dir: server_dir(dir),
        })
        .map_err(|e| format!("cannot write the undo log: {e}"))?;
        let group = cluster::mariadb::storage_group(run_id);
        let cluster =
            super::postgres::start_one(System::Mariadb, server_dir(dir), group, port.base)
                .await
                .map_err(|e| format!("cannot start the MariaDB storage: {e}"))?;
        let addr = cluster.nodes()[0].addr.clone();
        let names = Names::new(run_id);
        let t = Duration::from_secs(10);
        store::setup(opts(&addr)?, &names, fencing, &initial, t)
            .await
            .map_err(|e| format!("cannot set up the MariaDB storage: {e}"))?;
        Ok(MyStorage {
            cluster,
            addr,
            names,
            run_id: run_id.to_string(),
            _port: port,
        })
    }

    /// End the workers' sessions and wait until they are gone (their
    /// proxies are cut already), then a connection of lockjaw's own for
    /// the final read.
    pub async fn final_reader(&self) -> Result<MyResource, String> {
        let t = Duration::from_secs(10);
        store::end_worker_sessions(opts(&self.addr)?, t)
            .await
            .map_err(|e| format!("final read: {e}"))?;
        Ok(MyResource::new(opts(&self.addr)?, &self.names, t))
    }

    /// Stop the server (its data directory goes with it).
    pub async fn close(self) {
        if let Err(e) = self.cluster.close() {
            crate::exit::say(&format!("warning: stopping the MariaDB storage: {e}"));
        }
    }
}
