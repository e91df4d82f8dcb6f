//! The proof that a process discovery found on a host (`--attach`) is the
//! node's server, before anything is signalled: by the server's own
//! answer where it gives one (Redis `INFO server` `process_id`, etcd's
//! `process_start_time_seconds` and member id, ZooKeeper's `serverId` and
//! `dataDir` tied to the process through the `zoo.cfg` on its command
//! line), else by a listening socket on the node's client address held by
//! a process of the found tree in its own network namespace. An answer
//! that names another process refuses even when a socket would prove it;
//! an answer that cannot be had (or compared) falls back to the socket.
//! Pure functions of what the host and the server said.

use crate::remote::attach::{Found, Listening};
use serde::{Deserialize, Serialize};

/// What a server says of its own process ([`super::Servers::identity`]).
#[derive(Clone, Debug, PartialEq)]
pub enum ServerSays {
    /// Redis and Sentinel: `INFO server`'s `process_id`.
    Pid(u32),
    /// etcd: `process_start_time_seconds` of `/metrics` (unix seconds) and
    /// its member id (`etcd_server_id`).
    Etcd { started: f64, member: String },
    /// ZooKeeper: `conf`'s `serverId` and `dataDir` (its `version-2`
    /// directory).
    Zk { id: u64, data_dir: String },
}

/// What a ZooKeeper process's own configuration says: the `zoo.cfg` on
/// its command line, its `dataDir`, and the `myid` there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZkConf {
    pub cfg: String,
    pub data_dir: String,
    pub myid: u64,
}

/// How a node was proven to be its server: recorded in run.json and
/// printed by `--plan` ("pid 4711: Redis process_id 4711, listening on
/// 10.0.0.3:6379").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proof {
    /// The pid the proof names (the main process unless a descendant
    /// answers or listens).
    pub pid: u32,
    /// The server's own answer, as it matched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// The listening socket a process of the tree holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<String>,
    /// Why the server's answer did not prove it (the socket did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_answer: Option<String>,
}

impl std::fmt::Display for Proof {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<&str> = [&self.answer, &self.socket]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect();
        write!(f, "pid {}: {}", self.pid, parts.join(", "))?;
        if let Some(why) = &self.no_answer {
            write!(f, " (no answer used: {why})")?;
        }
        Ok(())
    }
}

/// What the server's answer makes of the found processes.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// It names a found process: (that pid, what it said).
    Proves(u32, String),
    /// It names another process: refused, whatever a socket says.
    Contradicts(String),
    /// No answer, or none that can be compared here: the socket decides.
    Unusable(String),
}

/// How far apart etcd's start time and the process's may be (the metric
/// keeps 12 digits: 10 ms; the stamp counts clock ticks).
const START_SLACK_S: f64 = 0.05;

/// Compare what the server at `client` said (`says`: Err why it did
/// not answer; `Ok(None)`: the system gives no such answer) with what
/// discovery found; `zk` is the ZooKeeper process's own configuration.
pub fn answer(
    client: &str,
    found: &Found,
    says: &Result<Option<ServerSays>, String>,
    zk: Option<&Result<ZkConf, String>>,
) -> Answer {
    let main = found.procs.first().map_or(0, |p| p.pid);
    let facts = &found.facts;
    let says = match says {
        Err(e) => {
            return Answer::Unusable(format!("the server at {client} did not say who it is: {e}"))
        }
        Ok(None) => return Answer::Unusable("the system names no process of its own".into()),
        Ok(Some(s)) => s,
    };
    match says {
        ServerSays::Pid(p) if !facts.same_pid_ns => Answer::Unusable(format!(
            "Redis says process_id {p}, but pid {main} runs in another pid namespace than the SSH session, where that number names no process"
        )),
        ServerSays::Pid(p) => match found.procs.iter().find(|s| s.pid == *p) {
            Some(_) => Answer::Proves(*p, format!("Redis process_id {p}")),
            None => Answer::Contradicts(format!(
                "the Redis server at {client} says its process_id is {p}, which is neither pid {main} nor one of its descendants"
            )),
        },
        ServerSays::Etcd { .. } if !facts.same_time_ns => Answer::Unusable(format!(
            "pid {main} runs in another time namespace than the SSH session: its start time cannot be compared with etcd's"
        )),
        ServerSays::Etcd { started, member } => {
            let starts: Vec<(u32, f64)> = found
                .procs
                .iter()
                .filter_map(|s| Some((s.pid, facts.started_unix(s)?)))
                .collect();
            if starts.is_empty() {
                return Answer::Unusable("the host's boot time could not be read".into());
            }
            match starts.iter().find(|(_, s)| (s - started).abs() <= START_SLACK_S) {
                Some((pid, _)) => Answer::Proves(
                    *pid,
                    format!("etcd member {member} started at {started:.2}, as pid {pid} did"),
                ),
                None => Answer::Contradicts(format!(
                    "etcd member {member} at {client} started at {started:.2} (process_start_time_seconds), but pid {main} at {:.2}",
                    starts[0].1
                )),
            }
        }
        ServerSays::Zk { id, data_dir } => match zk {
            None => Answer::Unusable(format!("pid {main}'s command line names no zoo.cfg")),
            Some(Err(e)) => Answer::Unusable(e.clone()),
            Some(Ok(c)) => {
                let dir = data_dir.trim_end_matches('/');
                let dir = dir.strip_suffix("/version-2").unwrap_or(dir);
                if dir == c.data_dir.trim_end_matches('/') && *id == c.myid {
                    Answer::Proves(
                        main,
                        format!("ZooKeeper serverId {id} with dataDir {dir}, as pid {main}'s {} says", c.cfg),
                    )
                } else {
                    Answer::Contradicts(format!(
                        "the ZooKeeper server at {client} says serverId {id} and dataDir {dir}, but pid {main}'s {} says myid {} and dataDir {}",
                        c.cfg, c.myid, c.data_dir
                    ))
                }
            }
        },
    }
}

/// What a listening socket proves: Ok("listening on ADDR"), or why not.
pub fn socket(client: &str, found: &Found, l: &Listening) -> Result<(u32, String), String> {
    let main = found.procs.first().map_or(0, |p| p.pid);
    match l {
        Listening::Held { pid, at } if *pid == main => Ok((*pid, format!("listening on {at}"))),
        Listening::Held { pid, at } => Ok((*pid, format!("listening on {at} (pid {pid}, of pid {main}'s tree)"))),
        Listening::Other { pid, comm, at } => Err(format!(
            "the socket listening on {at} is held by pid {pid} ({comm}), which is not pid {main} nor one of its descendants (a port forward, e.g. a container's, hides the server)"
        )),
        Listening::Unheld { at, unreadable } if !unreadable.is_empty() => Err(format!(
            "something listens on {at}, but the open files of pid(s) {} cannot be read to see who (hint: attach as root)",
            unreadable.iter().map(u32::to_string).collect::<Vec<_>>().join(" ")
        )),
        Listening::Unheld { at, .. } => Err(format!(
            "something listens on {at}, but no process of its network namespace was seen holding it"
        )),
        Listening::Nothing => Err(format!(
            "nothing listens on {client} (nor on a wildcard address at its port) in pid {main}'s network namespace"
        )),
        Listening::Gone => Err(format!("pid {main} and its descendants are gone")),
        Listening::NotAsked => Err("its listening sockets were not looked at".into()),
    }
}

/// The proof from the server's answer and the listening socket, or why
/// the found process is refused.
pub fn judge(client: &str, found: &Found, a: Answer, l: &Listening) -> Result<Proof, String> {
    let main = found.procs.first().map_or(0, |p| p.pid);
    let refused = |why: String| {
        format!("pid {main} is not proven to be the server at {client}: {why}; refused, nothing signalled (hint: the attach table must describe the process that serves {client})")
    };
    match a {
        Answer::Contradicts(why) => Err(refused(why)),
        Answer::Proves(pid, said) => Ok(Proof {
            pid,
            answer: Some(said),
            socket: socket(client, found, l).ok().map(|(_, s)| s),
            no_answer: None,
        }),
        Answer::Unusable(why) => match socket(client, found, l) {
            Ok((pid, s)) => Ok(Proof {
                pid,
                answer: None,
                socket: Some(s),
                no_answer: Some(why),
            }),
            Err(e) => Err(refused(format!("{e}; and {why}"))),
        },
    }
}

#[cfg(test)]
#[path = "proof_tests.rs"]
mod tests;
