//! Clusters that live as long as the systems test binary: one set of
//! shared clusters per test area (each on its own fixed ports), temporary
//! directories, and the registry that stops them all at exit (an atexit
//! hook; the parent-death signal covers a binary that dies).

use lockjaw::cluster::{Cluster, ClusterError, ClusterSpec};
use lockjaw::service::System;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

struct Registry {
    clusters: Vec<&'static Cluster>,
    dirs: Vec<tempfile::TempDir>,
}

fn registry() -> &'static Mutex<Registry> {
    static R: OnceLock<Mutex<Registry>> = OnceLock::new();
    R.get_or_init(|| {
        extern "C" fn cleanup() {
            if let Ok(mut s) = registry().lock() {
                for c in s.clusters.drain(..) {
                    let _ = c.close();
                }
                s.dirs.clear();
            }
        }
        // SAFETY: registering a plain extern "C" fn with atexit.
        unsafe { libc::atexit(cleanup) };
        Mutex::new(Registry {
            clusters: Vec::new(),
            dirs: Vec::new(),
        })
    })
}

/// A temp dir named `lockjaw-TAG-...` that lives until the binary exits.
pub fn temp_dir(tag: &str) -> PathBuf {
    let d = tempfile::Builder::new()
        .prefix(&format!("lockjaw-{tag}-"))
        .tempdir()
        .unwrap();
    let p = d.path().to_path_buf();
    registry().lock().unwrap().dirs.push(d);
    p
}

/// Start a cluster from a thread of its own (tests run inside a runtime).
pub fn start_blocking(spec: ClusterSpec) -> Result<Cluster, ClusterError> {
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(Cluster::start(&spec))
    })
    .join()
    .unwrap()
}

/// The systems with a shared cluster, in the order of their port blocks.
const SHARED: [System; 5] = [
    System::Redis,
    System::Redlock,
    System::Sentinel,
    System::Etcd,
    System::Zookeeper,
];

/// One shared cluster per system of [`SHARED`], ten ports each from
/// `first` in that order, started on first use and stopped when the
/// binary exits.
pub struct SharedSet {
    /// Names the clusters' temp dirs: `lockjaw-AREA-SYSTEM-...`.
    area: &'static str,
    first: u16,
    cells: [OnceLock<&'static Cluster>; 5],
}

impl SharedSet {
    pub const fn new(area: &'static str, first: u16) -> SharedSet {
        SharedSet {
            area,
            first,
            cells: [const { OnceLock::new() }; 5],
        }
    }

    /// The set's cluster of `system`.
    pub fn get(&'static self, system: System) -> &'static Cluster {
        let i = SHARED
            .iter()
            .position(|s| *s == system)
            .unwrap_or(usize::MAX);
        let cell = self.cells.get(i).unwrap_or_else(|| {
            panic!(
                "{}: no shared cluster (it has no servers to share)",
                system.name()
            )
        });
        cell.get_or_init(|| {
            let dir = temp_dir(&format!("{}-{}", self.area, system.name()));
            let mut spec = ClusterSpec::new(system.servers(), dir);
            spec.base_port = Some(self.first + 10 * i as u16);
            spec.health_timeout = Duration::from_secs(60);
            let c: &'static Cluster = Box::leak(Box::new(
                start_blocking(spec).expect("shared cluster starts"),
            ));
            registry().lock().unwrap().clusters.push(c);
            c
        })
    }
}
