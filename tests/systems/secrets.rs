//! Issue 40, item 3: no secret in anything lockjaw writes, prints or
//! passes on. A PostgreSQL that requires a marker password of its user
//! (scram-sha-256 on loopback; the test's own server, started as the
//! `postgres` user) and, in the long test, a Redis with an ACL user whose
//! password is the same marker in an auth file. Every command that takes
//! a secret runs; the marker is then looked for in every file under the
//! output directories, in stdout and stderr, and, while they run, in the
//! argv and environment of every process on the machine (a `/proc` scan:
//! the test bed's hosts are network namespaces of this machine, so their
//! processes are scanned too). The one process excused is the top-level
//! `lockjaw` the test starts with the password on its own command line
//! (the user's choice); none it starts may carry it.
//! Ports: 33500–33599 the test's own servers, runs' blocks in 33600–33999.

use super::run_util::{free_base, lockjaw, lockjaw_objects_left};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The marker password (URL-safe, found nowhere else).
pub const MARK: &str = "Mk40pw-q7Zr2vX9";

/// A `/proc` scan running beside the commands: every 10 ms, the argv and
/// environment of every process; hits are `(pid, what, argv)`.
pub struct Scan {
    stop: Arc<AtomicBool>,
    hits: Arc<Mutex<Vec<(u32, String, String)>>>,
    seen: Arc<Mutex<usize>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Scan {
    pub fn start() -> Scan {
        Scan::for_mark(MARK)
    }

    /// A scan for another secret than [`MARK`] (a bed's ACL password).
    pub fn for_mark(mark: &'static str) -> Scan {
        let stop = Arc::new(AtomicBool::new(false));
        let hits = Arc::new(Mutex::new(vec![]));
        let seen = Arc::new(Mutex::new(0));
        let (s, h, n) = (stop.clone(), hits.clone(), seen.clone());
        let me = std::process::id();
        let thread = std::thread::spawn(move || {
            let mut pids = std::collections::BTreeSet::new();
            while !s.load(Ordering::SeqCst) {
                for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
                    let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<u32>().ok())
                    else {
                        continue;
                    };
                    if pid == me {
                        continue;
                    }
                    pids.insert(pid);
                    for what in ["cmdline", "environ"] {
                        let b = std::fs::read(e.path().join(what)).unwrap_or_default();
                        if contains(&b, mark) {
                            let argv = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
                            let argv = String::from_utf8_lossy(&argv).replace('\0', " ");
                            h.lock().unwrap().push((pid, what.to_string(), argv));
                        }
                    }
                }
                *n.lock().unwrap() = pids.len();
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        Scan {
            stop,
            hits,
            seen,
            thread: Some(thread),
        }
    }

    /// Stop; the hits, but for the excused pids and their forks caught
    /// before their exec (a fork shows its parent's argv until it execs:
    /// the very same command line); how many processes were seen.
    pub fn finish(mut self, excused: &[u32]) -> (Vec<String>, usize) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        let hits = self.hits.lock().unwrap();
        let theirs: Vec<&String> = hits
            .iter()
            .filter(|(p, what, _)| excused.contains(p) && what == "cmdline")
            .map(|(_, _, argv)| argv)
            .collect();
        let mut v: Vec<String> = hits
            .iter()
            .filter(|(p, what, argv)| {
                let fork_of_excused = what == "cmdline" && theirs.contains(&argv);
                !(excused.contains(p) || fork_of_excused)
            })
            .map(|(p, what, argv)| format!("{what} of {p}: {argv}"))
            .collect();
        v.dedup();
        let seen = *self.seen.lock().unwrap();
        (v, seen)
    }
}

impl Scan {
    /// Stop, and fail on any hit ([`Scan::finish`]) or a scan that saw
    /// too few processes to have seen anything.
    pub fn assert_clean(self, excused: &[u32]) {
        let (hits, seen) = self.finish(excused);
        assert!(seen > 10, "the scan saw the machine's processes ({seen})");
        assert!(
            hits.is_empty(),
            "the password in a process lockjaw started:\n{}",
            hits.join("\n")
        );
    }
}

impl Drop for Scan {
    /// A scan left unfinished (a retried attempt) stops too.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// Every file beneath `dir` that holds the marker.
pub fn files_with_mark(dir: &Path) -> Vec<PathBuf> {
    files_with(dir, MARK)
}

/// Every file beneath `dir` that holds `mark`.
pub fn files_with(dir: &Path, mark: &str) -> Vec<PathBuf> {
    let mut out = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() && contains(&std::fs::read(&p).unwrap_or_default(), mark) {
                out.push(p);
            }
        }
    }
    out
}

/// A command's output: the marker in neither stream.
pub fn clean_output(what: &str, o: &Output) -> String {
    let (so, se) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    eprintln!("== {what}: exit {:?}\n{so}{se}", o.status.code());
    assert!(!so.contains(MARK), "{what}: the password on stdout:\n{so}");
    assert!(!se.contains(MARK), "{what}: the password on stderr:\n{se}");
    format!("{so}{se}")
}

/// The test's PostgreSQL: user `locker` must give [`MARK`] (scram over
/// TCP); `postgres` stays trusted for the test's own checks.
pub struct Db {
    pub server: lockjaw::service::postgres::Server,
    pub url: String,
}

pub async fn db(tmp: &Path) -> Db {
    let port = (33500..33510)
        .find(|p| lockjaw::process::ports::reserve(Some(*p), 1).is_ok())
        .expect("a free port in 33500..33510");
    let server = lockjaw::service::postgres::Server::start(tmp, "pgtest-secrets", port)
        .await
        .unwrap();
    let t = Duration::from_secs(5);
    let c = lockjaw::client::postgres_conn::connect(&server.url(), None, t)
        .await
        .unwrap();
    c.batch_execute(&format!(
        "SET password_encryption = 'scram-sha-256'; CREATE ROLE locker LOGIN SUPERUSER PASSWORD '{MARK}'"
    ))
    .await
    .unwrap();
    let hba: String = c.query_one("SHOW hba_file", &[]).await.unwrap().get(0);
    std::fs::write(
        &hba,
        "local all all trust\nhost all locker 127.0.0.1/32 scram-sha-256\nhost all all 127.0.0.1/32 trust\n",
    )
    .unwrap();
    c.batch_execute("SELECT pg_reload_conf()").await.unwrap();
    let addr = server.addr();
    let no_pw = format!("postgres://locker@{addr}/postgres");
    let mut refused = false;
    for _ in 0..50 {
        if lockjaw::client::postgres_conn::connect(&no_pw, None, t)
            .await
            .is_err()
        {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(refused, "the server asks locker for its password");
    let url = format!("postgres://locker:{MARK}@{addr}/postgres");
    lockjaw::client::postgres_conn::connect(&url, None, t)
        .await
        .expect("the marker is the password");
    Db { server, url }
}

fn run_args(url: &str, base: u16, out: &Path) -> Vec<String> {
    [
        "run",
        "--system",
        "postgres",
        "--workload",
        "fenced-counter",
        "--nemesis",
        "none",
        "--time-limit",
        "1",
        "--ttl-ms",
        "1000",
        "--no-progress",
        "--postgres-url",
        url,
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([
        "--base-port".into(),
        base.to_string(),
        "--out".into(),
        out.display().to_string(),
    ])
    .collect()
}

/// `lockjaw ARGS`, waited for; its pid (excused from the scan only when
/// `excuse`, for a password on its own command line) and output.
pub fn lockjaw_cmd(args: &[String], excused: &Mutex<Vec<u32>>, excuse: bool) -> Output {
    let child = lockjaw()
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    if excuse {
        excused.lock().unwrap().push(child.id());
    }
    child.wait_with_output().unwrap()
}

/// make test: `run` with the password in `--postgres-url` (the issue's
/// case), then `report` on its directory, and `compare -- --postgres-url`
/// (the issue's stdout case; its cell a child `lockjaw run`). Each valid
/// (so the password did reach the server), and the marker in no file, no
/// output, no argv or environment of a process lockjaw started; the run's
/// tables are dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue40_no_password_in_files_output_or_processes() {
    let tmp = tempfile::tempdir().unwrap();
    let db = db(&tmp.path().join("db")).await;
    let out = tmp.path().join("out");
    let scan = Scan::start();
    let excused = Arc::new(Mutex::new(vec![]));
    let (url, ex, o2) = (db.url.clone(), excused.clone(), out.clone());
    let said = tokio::task::spawn_blocking(move || {
        let run_dir = o2.join("run");
        let r = lockjaw_cmd(&run_args(&url, free_base(33600), &run_dir), &ex, true);
        let said = clean_output("run", &r);
        assert_eq!(
            r.status.code(),
            Some(0),
            "valid: the password reached the server"
        );
        let rep = lockjaw_cmd(
            &["report".into(), run_dir.display().to_string()],
            &ex,
            false,
        );
        clean_output("report", &rep);
        let cmp: Vec<String> = [
            "compare",
            "--systems",
            "postgres",
            "--nemesis",
            "none",
            "--time-limit",
            "1",
            "--ttl-ms",
            "1000",
            "--out",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([o2.join("cmp").display().to_string(), "--".into()])
        .chain(["--postgres-url".into(), url.clone(), "--base-port".into()])
        .chain([free_base(33700).to_string()])
        .collect();
        let c = lockjaw_cmd(&cmp, &ex, true);
        assert_eq!(c.status.code(), Some(0), "the cell ran and was valid");
        said + &clean_output("compare", &c)
    })
    .await
    .unwrap();
    scan.assert_clean(&excused.lock().unwrap());
    let files = files_with_mark(&out);
    assert!(files.is_empty(), "the password in files: {files:?}");
    assert!(out.join("run/report.html").is_file() && out.join("cmp/compare.md").is_file());
    let md = std::fs::read_to_string(out.join("run/summary.md")).unwrap();
    assert!(
        md.contains("postgres://locker@") && md.contains("PGPASSWORD"),
        "the reproduce line names where the password comes from:\n{md}"
    );
    let cell = out.join("cmp/cells/postgres-fenced-counter-none-0");
    let md = std::fs::read_to_string(cell.join("summary.md")).unwrap();
    assert!(
        md.contains("PGPASSWORD") && !md.contains("postgres.password"),
        "a cell's reproduce line names no removed file:\n{md}"
    );
    assert!(
        !cell.join("postgres.password").exists(),
        "compare removes its copy"
    );
    assert!(!said.contains("could not undo"), "{said}");
    assert_eq!(
        lockjaw_objects_left(&db.server.url()).await,
        0,
        "the runs' tables are dropped"
    );
    db.server.close().unwrap();
}
