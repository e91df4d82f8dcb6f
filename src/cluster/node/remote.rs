//! A node on another host (`--hosts`): the SSH connection to it, its
//! processes found by their `LOCKJAW_TAG`, its files read and written
//! over SSH, and the runtime those synchronous calls run SSH on.

use super::{Handle, Node, RemoteInfo};
use crate::cluster::ClusterError;
use crate::process;
use crate::remote::{self, Host, HostSpec, RemoteError, RemoteLaunch};
use crate::undo::{RemoteEffect, Undo};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// A node on another host: the SSH connection to it, the tag its
/// processes carry (`lockjaw-<run-id>-<node>`), and the files it needs
/// there before each start.
#[derive(Clone)]
pub struct RemoteNode {
    pub host: Arc<Host>,
    pub spec: HostSpec,
    pub tag: String,
    pub files: Vec<(String, String)>,
}

impl std::fmt::Debug for RemoteNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RemoteNode({} {})", self.spec.name, self.tag)
    }
}

impl RemoteNode {
    pub(super) fn info(&self) -> RemoteInfo {
        RemoteInfo {
            host: self.spec.name.clone(),
            target: self.spec.target.clone(),
            tag: self.tag.clone(),
        }
    }

    /// The undo entry of `effect` on this node's host.
    pub fn undo(&self, effect: RemoteEffect) -> Undo {
        Undo::Remote {
            host: self.spec.name.clone(),
            target: self.spec.target.clone(),
            effect,
        }
    }
}

/// Run `f` to its end on the SSH runtime, from a thread of its own: the
/// node handle's calls are synchronous (nemeses call them off the async
/// threads, `Drop` calls `close`), SSH is not. One runtime for the whole
/// process, so what a connection opens on it (its kept-open shell) lives on.
pub(crate) fn block_on<F>(f: F) -> F::Output
where
    F: std::future::Future + Send,
    F::Output: Send,
{
    static RT: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    let rt = RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("lockjaw-ssh")
            .enable_all()
            .build()
            .expect("a tokio runtime for SSH calls")
    });
    std::thread::scope(|s| s.spawn(|| rt.block_on(f)).join())
        .expect("the SSH thread does not panic")
}

/// The handle of a node that runs on another host.
pub(super) struct OnHost<'a> {
    pub node: &'a Node,
    pub r: &'a RemoteNode,
}

impl OnHost<'_> {
    fn rerr(&self, e: RemoteError) -> ClusterError {
        ClusterError::Unhealthy {
            node: self.node.name.clone(),
            msg: e.to_string(),
        }
    }

    fn signal(&self, sig: process::Signal) -> Result<(), ClusterError> {
        block_on(remote::signal(&self.r.host, &self.r.tag, sig))
            .map(drop)
            .map_err(|e| self.rerr(e))
    }

    /// The shell line that makes the node's data directory, and its clock
    /// file (`+0`) if it has none.
    fn prepare_script(&self) -> String {
        let n = self.node;
        let q = |p: &Path| remote::quote(&p.to_string_lossy());
        let mut script = format!("mkdir -p {}", q(&n.data_dir));
        if let Some(f) = &n.faketime_file {
            let dir = f.parent().unwrap_or(Path::new("/"));
            let (d, f) = (q(dir), q(f));
            script.push_str(&format!(
                " {d} && {{ [ -s {f} ] || printf '+0\\n' > {f}; }}"
            ));
        }
        script
    }
}

impl Handle for OnHost<'_> {
    /// Start the node on its host: its files and directories first.
    fn spawn(&self, _detached: bool) -> Result<(), ClusterError> {
        let (n, r) = (self.node, self.r);
        let launch = n.launch.clone().ok_or_else(|| ClusterError::NoProcess {
            node: n.name.clone(),
            what: "start".into(),
        })?;
        let script = self.prepare_script();
        let env = launch
            .env
            .iter()
            .map(|(k, v)| match k.as_str() {
                "LD_PRELOAD" => (k.clone(), r.spec.faketime_preload.clone()),
                _ => (k.clone(), v.clone()),
            })
            .collect();
        let l = RemoteLaunch {
            tag: r.tag.clone(),
            program: r.spec.program(&launch.program),
            args: launch.args.clone(),
            env,
            log: n.log.to_string_lossy().into_owned(),
        };
        block_on(async {
            r.host.sh(&script).await?;
            for (path, text) in &r.files {
                r.host.write_file(path, text).await?;
            }
            remote::start(&r.host, &l).await
        })
        .map(drop)
        .map_err(|e| self.rerr(e))
    }

    fn pause(&self) -> Result<(), ClusterError> {
        self.signal(process::Signal::Stop)
    }

    fn resume(&self) -> Result<(), ClusterError> {
        self.signal(process::Signal::Cont)
    }

    fn stop(&self) -> Result<(), ClusterError> {
        self.stop_with(process::DEFAULT_GRACE, "stop")
    }

    fn stop_with(&self, grace: Duration, _what: &str) -> Result<(), ClusterError> {
        block_on(remote::stop(&self.r.host, &self.r.tag, grace)).map_err(|e| self.rerr(e))
    }

    fn is_alive(&self) -> bool {
        block_on(remote::alive(&self.r.host, &self.r.tag)).unwrap_or(false)
    }

    fn is_paused(&self) -> bool {
        block_on(remote::stopped(&self.r.host, &self.r.tag)).unwrap_or(false)
    }

    fn exited(&self) -> Option<String> {
        let r = self.r;
        match block_on(remote::alive(&r.host, &r.tag)) {
            Ok(true) => None,
            Ok(false) => Some(format!(
                "no process tagged {} on host {}",
                r.tag, r.spec.name
            )),
            Err(e) => Some(e.to_string()),
        }
    }

    fn read(&self, path: &Path) -> Option<String> {
        block_on(self.r.host.read_file(&path.to_string_lossy())).ok()
    }

    fn log_text(&self) -> Option<String> {
        let log = remote::quote(&self.node.log.to_string_lossy());
        block_on(self.r.host.sh(&format!("tail -n 8 {log}"))).ok()
    }

    fn clock_undo(&self, file: PathBuf, previous: String) -> Undo {
        self.r.undo(RemoteEffect::Clock {
            file: file.to_string_lossy().into_owned(),
            previous,
        })
    }
}
