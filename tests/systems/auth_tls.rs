//! `--auth` against real servers that require it, with certificates the
//! test makes (openssl CLI): Redis with an ACL user and TLS only, etcd
//! with client-certificate authentication. Valid with `--auth`, refused
//! without it and with a wrong `server_name`; no secret in the run dir.
//! The servers run on a test bed host, started there by plain SSH (a
//! pidfile, as a service manager would), at the host's own address.

use super::run_util::lockjaw;
use lockjaw::testbed::Bed;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PASSWORD: &str = "pw-S3cret-auth-tls";

fn sh(dir: &Path, script: &str) {
    let st = Command::new("sh")
        .arg("-ec")
        .arg(script)
        .current_dir(dir)
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "{script}");
}

/// A CA, a server certificate for redis.test and etcd.test, a client
/// certificate, an owner-only password file and the auth file.
pub(crate) fn certificates(dir: &Path, server_name: &str, user: bool) {
    sh(
        dir,
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj '/CN=test CA'
         openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=server
         printf 'subjectAltName=DNS:redis.test,DNS:etcd.test\\nextendedKeyUsage=serverAuth,clientAuth\\n' > ext
         openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile ext
         openssl req -newkey rsa:2048 -nodes -keyout client-key.pem -out client.csr -subj /CN=root
         printf 'extendedKeyUsage=clientAuth\\n' > cext
         openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 2 -extfile cext
         chmod 600 client-key.pem server.key",
    );
    std::fs::write(dir.join("password"), PASSWORD).unwrap();
    sh(dir, "chmod 600 password");
    let mut auth = format!(
        "[tls]\nca = \"ca.pem\"\ncert = \"client.pem\"\nkey = \"client-key.pem\"\nserver_name = \"{server_name}\"\n"
    );
    if user {
        auth.push_str("\n[user]\nname = \"locker\"\npassword_file = \"password\"\n");
    }
    std::fs::write(dir.join("auth.toml"), &auth).unwrap();
    std::fs::write(
        dir.join("wrong.toml"),
        auth.replace(server_name, "wrong.test"),
    )
    .unwrap();
}

/// A server the test started on a bed host: its pidfile; when dropped,
/// that pid (the test's own server, its executable checked) is killed.
struct Server {
    pidfile: std::path::PathBuf,
    exe: &'static str,
}

impl Drop for Server {
    fn drop(&mut self) {
        let Some(pid) = std::fs::read_to_string(&self.pidfile)
            .ok()
            .and_then(|p| p.trim().parse::<i32>().ok())
        else {
            return;
        };
        // Its command line, not /proc/PID/exe: Debian's redis-server is a
        // link to redis-check-rdb (and Redis rewrites its argv[0]).
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let argv0 = String::from_utf8_lossy(&cmd)
            .split(['\0', ' '])
            .next()
            .map(str::to_string);
        if argv0.is_some_and(|a| a.rsplit('/').next() == Some(self.exe)) {
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

/// Run `script` on the bed's first host, in `dir` (the hosts share this
/// machine's filesystem), by plain SSH.
fn on_host(bed: &Bed, dir: &Path, script: &str) {
    let o = bed
        .ssh(&bed.hosts[0])
        .arg(format!("cd {} && {script}", dir.display()))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn wait_port(addr: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(addr).is_err() {
        assert!(Instant::now() < deadline, "{addr} never opened");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `lockjaw run` against `endpoint`; its exit code and stderr.
fn run(
    dir: &Path,
    system: &str,
    endpoint: &str,
    auth: Option<&str>,
    out: &str,
    client: &str,
) -> (i32, String) {
    let mut c = lockjaw();
    c.args([
        "run",
        "--system",
        system,
        "--endpoints",
        endpoint,
        "--time-limit",
        "3",
    ])
    .args(["--client", client, "--no-progress", "--out"])
    .arg(dir.join(out));
    if let Some(a) = auth {
        c.arg("--auth").arg(dir.join(a));
    }
    let o = c.output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// No file of `run_dir` holds the password or the client key's PEM body.
fn no_secret_in(run_dir: &Path, key_pem: &str) {
    let body = key_pem.lines().nth(1).unwrap();
    let mut stack = vec![run_dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(bytes) = std::fs::read(&p) {
                let text = String::from_utf8_lossy(&bytes);
                assert!(
                    !text.contains(PASSWORD),
                    "{} holds the password",
                    p.display()
                );
                assert!(!text.contains(body), "{} holds the key", p.display());
            }
        }
    }
}

#[test]
#[ignore = "make test-long: Redis with an ACL user and TLS only, --auth on a bed host (~25 s)"]
fn redis_with_acl_and_tls_needs_auth() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    certificates(dir, "redis.test", true);
    let (bed, _hosts, _down) = crate::remote_hosts::up(1, dir);
    let ip = bed.hosts[0].address;
    let ep = format!("{ip}:6380");
    let _redis = Server {
        pidfile: dir.join("redis.pid"),
        exe: "redis-server",
    };
    let d = dir.display();
    on_host(
        &bed,
        dir,
        &format!(
            "redis-server --bind {ip} --port 0 --tls-port 6380 --save '' \
             --tls-cert-file server.pem --tls-key-file server.key --tls-ca-cert-file ca.pem \
             --tls-auth-clients optional --user default off \
             --user locker on '>{PASSWORD}' '~*' '&*' '+@all' \
             --daemonize yes --pidfile {d}/redis.pid --logfile {d}/redis.log"
        ),
    );
    wait_port(&ep);
    let (code, err) = run(dir, "redis", &ep, Some("auth.toml"), "ok", "builtin");
    assert_eq!(code, 0, "{err}");
    let (code, err) = run(
        dir,
        "redis",
        &ep,
        Some("auth.toml"),
        "py",
        "python-redis-py",
    );
    assert_eq!(code, 0, "{err}");
    let (code, err) = run(dir, "redis", &ep, None, "plain", "builtin");
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("does not answer as a redis server"), "{err}");
    let (code, err) = run(dir, "redis", &ep, Some("wrong.toml"), "wrong", "builtin");
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("not valid for name \"wrong.test\""), "{err}");
    let (code, err) = run(
        dir,
        "redis",
        &ep,
        Some("auth.toml"),
        "asyncio",
        "python-redis-py-asyncio",
    );
    // It takes the ACL user only, and says so rather than drop the TLS.
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("no TLS here"), "{err}");
    let key = std::fs::read_to_string(dir.join("client-key.pem")).unwrap();
    for out in ["ok", "py"] {
        no_secret_in(&dir.join(out), &key);
        let info = std::fs::read_to_string(dir.join(out).join("run.json")).unwrap();
        assert!(
            info.contains("\"server_name\": \"redis.test\"")
                && info.contains("\"user\": \"locker\""),
            "{info}"
        );
    }
}

#[test]
#[ignore = "make test-long: etcd with client-certificate authentication, --auth on a bed host (~20 s)"]
fn etcd_with_client_certificates_needs_auth() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    certificates(dir, "etcd.test", false);
    let (bed, _hosts, _down) = crate::remote_hosts::up(1, dir);
    let ip = bed.hosts[0].address;
    let ep = format!("{ip}:2379");
    let _etcd = Server {
        pidfile: dir.join("etcd.pid"),
        exe: "etcd",
    };
    // The start script a service manager would run: its pid is etcd's.
    std::fs::write(
        dir.join("start-etcd.sh"),
        format!(
            "echo $$ > etcd.pid\nexec etcd --name a --data-dir data \\
             --listen-client-urls https://{ip}:2379 --advertise-client-urls https://{ip}:2379 \\
             --listen-peer-urls http://{ip}:2380 --initial-advertise-peer-urls http://{ip}:2380 \\
             --initial-cluster a=http://{ip}:2380 --client-cert-auth --trusted-ca-file ca.pem \\
             --cert-file server.pem --key-file server.key\n"
        ),
    )
    .unwrap();
    on_host(
        &bed,
        dir,
        "setsid -f sh start-etcd.sh > etcd.log 2>&1 < /dev/null",
    );
    wait_port(&ep);
    let (code, err) = run(dir, "etcd", &ep, Some("auth.toml"), "ok", "builtin");
    assert_eq!(code, 0, "{err}");
    // etcd's Go client (clients/go-etcd-concurrency) from the same file:
    // the CA, the client certificate and server_name through its hello.
    crate::adapters_node::require_installed("go-etcd-concurrency", "bin/adapter");
    let go = "go-etcd-concurrency";
    let (code, err) = run(dir, "etcd", &ep, Some("auth.toml"), "go", go);
    assert_eq!(code, 0, "{err}");
    let (code, err) = run(dir, "etcd", &ep, None, "plain", "builtin");
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("does not answer as a etcd server"), "{err}");
    let (code, err) = run(dir, "etcd", &ep, Some("wrong.toml"), "wrong", "builtin");
    assert_eq!(code, 3, "{err}");
    let key = std::fs::read_to_string(dir.join("client-key.pem")).unwrap();
    no_secret_in(&dir.join("ok"), &key);
    no_secret_in(&dir.join("go"), &key);
}

/// `make test`: an ACL user without TLS, its password from the environment
/// the auth file names (what unit tests cannot show: a real server's
/// `AUTH` through the probes, the workers, who read the file again, and the
/// run's record). On loopback.
#[test]
fn redis_acl_user_from_the_environment() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let port = 45030;
    let _redis = Server {
        pidfile: dir.join("redis.pid"),
        exe: "redis-server",
    };
    sh(
        dir,
        &format!(
            "redis-server --bind 127.0.0.1 --port {port} --save '' --user default off \
             --user locker on '>{PASSWORD}' '~*' '&*' '+@all' \
             --daemonize yes --pidfile {0}/redis.pid --logfile {0}/redis.log",
            dir.display()
        ),
    );
    let ep = format!("127.0.0.1:{port}");
    wait_port(&ep);
    std::fs::write(
        dir.join("auth.toml"),
        "[user]\nname = \"locker\"\npassword_env = \"LOCKJAW_TEST_REDIS_PASSWORD\"\n",
    )
    .unwrap();
    let mut c = lockjaw();
    c.args([
        "run",
        "--system",
        "redis",
        "--endpoints",
        &ep,
        "--time-limit",
        "2",
    ])
    .args(["--no-progress", "--auth"])
    .arg(dir.join("auth.toml"))
    .arg("--out")
    .arg(dir.join("ok"))
    .env("LOCKJAW_TEST_REDIS_PASSWORD", PASSWORD);
    let o = c.output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    no_secret_in(&dir.join("ok"), "-\nno key in this test\n-");
    let info = std::fs::read_to_string(dir.join("ok").join("run.json")).unwrap();
    assert!(
        info.contains("\"user\": \"locker\"") && !info.contains("\"tls\": true"),
        "{info}"
    );
    // Without the variable the auth file is refused before anything starts.
    let o = lockjaw()
        .args(["run", "--system", "redis", "--endpoints", &ep, "--auth"])
        .arg(dir.join("auth.toml"))
        .arg("--out")
        .arg(dir.join("unset"))
        .env_remove("LOCKJAW_TEST_REDIS_PASSWORD")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains("auth.toml:3: field `user.password_env`"),
        "{err}"
    );
}
