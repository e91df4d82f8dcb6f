//! Issue 40, item 3, the full sweep of commands (make test-long): with
//! the marker password of [`super::secrets`], `run --runs`, `sweep`,
//! `bugs run`, `shrink` and `heal` of a SIGKILLed run on the test's
//! PostgreSQL, and `run` and `compare` on a Redis whose ACL user's
//! password is the marker, given in an auth file. The same looks: every
//! file under the output directory, stdout and stderr, and the argv and
//! environment of every process on the machine while they run.
//! Ports: the Redis on 33510–33519, runs' blocks in 33800–33999.

use super::run_util::{free_base, json_file, lockjaw, lockjaw_objects_left};
use super::secrets::{clean_output, db, files_with_mark, lockjaw_cmd, Scan, MARK};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|a| a.to_string()).collect()
}

/// The test's Redis: no default user, `locker` with the marker password
/// (from a config file, so not on the server's own command line).
struct Redis(std::process::Child, u16);

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn redis(dir: &Path) -> Redis {
    let port = (33510..33520)
        .find(|p| lockjaw::process::ports::reserve(Some(*p), 1).is_ok())
        .expect("a free port in 33510..33520");
    let conf = dir.join("redis.conf");
    std::fs::write(
        &conf,
        format!(
            "port {port}\nbind 127.0.0.1\nsave \"\"\nappendonly no\ndir {}\n\
             user default off\nuser locker on >{MARK} ~* &* +@all\n",
            dir.display()
        ),
    )
    .unwrap();
    let child = std::process::Command::new("redis-server")
        .arg(&conf)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "redis-server answers"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::write(dir.join("password"), MARK).unwrap();
    std::fs::set_permissions(dir.join("password"), std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(
        dir.join("auth.toml"),
        "[user]\nname = \"locker\"\npassword_file = \"password\"\n",
    )
    .unwrap();
    Redis(child, port)
}

/// A bug catalogue with one row on the test's database: its `args` carry
/// the URL with the password.
fn catalogue(dir: &Path, url: &str) {
    let base = free_base(33880);
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("pg-secret.toml"),
        format!(
            "id = \"pg-secret\"\nlibrary = \"test\"\ntitle = \"a row with a password\"\n\
             links = [\"https://example.invalid/1\"]\nclass = \"safety\"\nsystem = \"postgres\"\n\
             workload = \"fenced-counter\"\nnemesis = \"none\"\n\
             args = [\"--time-limit\", \"1\", \"--ttl-ms\", \"1000\", \"--base-port\", \"{base}\", \"--postgres-url\", \"{url}\"]\n\
             expect = \"two-holders\"\nper = \"run\"\nruns = 1\n\n[buggy]\nclient = \"builtin\"\n"
        ),
    )
    .unwrap();
}

/// `lockjaw run` SIGKILLed once its history has grown, then `lockjaw heal`.
fn killed_and_healed(url: &str, out: &Path, excused: &Mutex<Vec<u32>>) -> String {
    let dir = out.join("killed");
    let mut a = s(&[
        "run",
        "--system",
        "postgres",
        "--workload",
        "fenced-counter",
    ]);
    a.extend(s(&[
        "--nemesis",
        "none",
        "--time-limit",
        "60",
        "--no-progress",
    ]));
    a.extend(["--postgres-url".into(), url.into(), "--out".into()]);
    a.extend([dir.display().to_string(), "--base-port".into()]);
    a.push(free_base(33900).to_string());
    let mut child = lockjaw()
        .args(&a)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    excused.lock().unwrap().push(child.id());
    let t = Instant::now();
    while std::fs::metadata(dir.join("history.jsonl")).map_or(0, |m| m.len()) < 4096 {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the run makes progress"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let h = lockjaw_cmd(&["heal".into(), dir.display().to_string()], excused, false);
    assert_eq!(h.status.code(), Some(0));
    assert!(
        !dir.join("postgres.url").exists(),
        "heal removes the URL file"
    );
    clean_output("heal", &h)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "make test-long: every command that takes a secret, about 2 minutes"]
async fn issue40_no_password_from_any_command() {
    let tmp = tempfile::tempdir().unwrap();
    let db = db(&tmp.path().join("db")).await;
    let rdir = tmp.path().join("redis");
    std::fs::create_dir_all(&rdir).unwrap();
    let redis = redis(&rdir);
    let out = tmp.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let pwfile = tmp.path().join("pgpassword");
    std::fs::write(&pwfile, format!("{MARK}\n")).unwrap();
    std::fs::set_permissions(&pwfile, std::fs::Permissions::from_mode(0o600)).unwrap();
    let scan = Scan::start();
    let excused = Arc::new(Mutex::new(vec![]));
    let (url, ex, o, rport) = (db.url.clone(), excused.clone(), out.clone(), redis.1);
    let bare = url.replace(&format!(":{MARK}@"), "@");
    tokio::task::spawn_blocking(move || {
        let ex = &*ex;
        let pg = |base: u16| {
            let mut a = s(&["--system", "postgres", "--workload", "fenced-counter"]);
            a.extend(s(&[
                "--time-limit",
                "1",
                "--ttl-ms",
                "1000",
                "--no-progress",
            ]));
            a.extend(["--postgres-url".into(), url.clone(), "--base-port".into()]);
            a.push(free_base(base).to_string());
            a
        };
        // run --runs 2
        let mut a = s(&["run", "--nemesis", "none", "--runs", "2", "--out"]);
        a.push(o.join("runs").display().to_string());
        a.extend(pg(33800));
        let r = lockjaw_cmd(&a, ex, true);
        clean_output("run --runs 2", &r);
        assert_eq!(r.status.code(), Some(0));
        // sweep: its runs are children, as compare's
        let mut a = s(&["sweep", "--system", "postgres", "--nemesis", "pause-holder"]);
        a.extend(s(&[
            "--vary",
            "duration_leases=1,2",
            "--runs",
            "1",
            "--time-limit",
            "2",
        ]));
        a.extend(s(&["--ttl-ms", "1000", "--no-progress", "--out"]));
        a.extend([o.join("sweep").display().to_string(), "--".into()]);
        a.extend(["--postgres-url".into(), url.clone(), "--base-port".into()]);
        a.push(free_base(33820).to_string());
        let r = lockjaw_cmd(&a, ex, true);
        clean_output("sweep", &r);
        assert!(r.status.code().is_some_and(|c| c < 3), "the sweep ran");
        // bugs run: the row's args carry the password (the catalogue is
        // the user's file; its runs' records must not)
        catalogue(&tmp_cat(&o), &url);
        let mut a = s(&["bugs", "--catalogue"]);
        a.extend([
            tmp_cat(&o).display().to_string(),
            "run".into(),
            "pg-secret".into(),
        ]);
        a.extend(s(&["--runs", "1", "--out"]));
        a.push(o.join("bugs").display().to_string());
        clean_output("bugs run", &lockjaw_cmd(&a, ex, false));
        assert!(o.join("bugs/buggy/run-1/run.json").is_file(), "the row ran");
        // shrink of a stale-write run whose password is in a file
        let mut a = s(&[
            "run",
            "--system",
            "redis",
            "--storage",
            "postgres",
            "--workload",
        ]);
        a.extend(s(&[
            "fenced-counter",
            "--nemesis",
            "pause-holder",
            "--fencing",
            "off",
        ]));
        a.extend(s(&[
            "--time-limit",
            "4",
            "--ttl-ms",
            "1000",
            "--seed",
            "11",
            "--no-progress",
        ]));
        a.extend([
            "--postgres-url".into(),
            bare.clone(),
            "--postgres-password-file".into(),
        ]);
        a.extend([pwfile.display().to_string(), "--out".into()]);
        a.extend([o.join("stale").display().to_string(), "--base-port".into()]);
        a.push(free_base(33850).to_string());
        let r = lockjaw_cmd(&a, ex, false);
        clean_output("run (password file)", &r);
        assert_eq!(r.status.code(), Some(1), "stale writes without fencing");
        let mut a = s(&["shrink"]);
        a.push(o.join("stale").display().to_string());
        a.extend(s(&["--runs", "1", "--confirm", "1", "--budget", "60s"]));
        clean_output("shrink", &lockjaw_cmd(&a, ex, false));
        assert!(
            o.join("stale/shrink/state.json").is_file(),
            "shrink ran its steps"
        );
        // heal of a SIGKILLed run
        killed_and_healed(&url, &o, ex);
        // Redis with an ACL user from an auth file: run and compare
        let auth = rdir.join("auth.toml").display().to_string();
        let ep = format!("127.0.0.1:{rport}");
        let mut a = s(&["run", "--system", "redis", "--workload", "fenced-counter"]);
        a.extend(s(&[
            "--nemesis",
            "none",
            "--time-limit",
            "1",
            "--no-progress",
        ]));
        a.extend([
            "--endpoints".into(),
            ep.clone(),
            "--auth".into(),
            auth.clone(),
        ]);
        a.extend(["--out".into(), o.join("acl").display().to_string()]);
        a.extend(["--base-port".into(), free_base(33950).to_string()]);
        let r = lockjaw_cmd(&a, ex, false);
        clean_output("run --auth", &r);
        assert_eq!(r.status.code(), Some(0), "valid with the ACL user");
        let mut a = s(&["compare", "--systems", "redis", "--nemesis", "none"]);
        a.extend(s(&["--time-limit", "1", "--out"]));
        a.extend([o.join("acl-cmp").display().to_string(), "--".into()]);
        a.extend([
            "--endpoints".into(),
            ep,
            "--auth".into(),
            auth,
            "--base-port".into(),
        ]);
        a.push(free_base(33970).to_string());
        let r = lockjaw_cmd(&a, ex, false);
        clean_output("compare --auth", &r);
        assert_eq!(r.status.code(), Some(0));
        let rep = lockjaw_cmd(
            &["report".into(), o.join("acl").display().to_string()],
            ex,
            false,
        );
        clean_output("report", &rep);
    })
    .await
    .unwrap();
    scan.assert_clean(&excused.lock().unwrap());
    let mut files = files_with_mark(&out);
    files.retain(|f| !f.starts_with(tmp_cat(&out)));
    assert!(files.is_empty(), "the password in files: {files:?}");
    let state = json_file(&out.join("stale/shrink/state.json"));
    assert!(!state.to_string().contains(MARK));
    assert_eq!(
        lockjaw_objects_left(&db.server.url()).await,
        0,
        "the runs' tables are dropped"
    );
    drop(redis);
    db.server.close().unwrap();
}

/// The catalogue folder (the user's input, not lockjaw's output).
fn tmp_cat(out: &Path) -> std::path::PathBuf {
    out.join("catalogue")
}
