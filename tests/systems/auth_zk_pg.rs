//! `--auth` against a ZooKeeper and a PostgreSQL that require it, with
//! certificates the test makes (openssl CLI), on loopback: ZooKeeper 3.8
//! with TLS only (`secureClientPort`, client certificates required) and
//! the digest scheme guarding the tree; PostgreSQL 15 with `ssl=on` and
//! `hostssl ... cert` only, for each `sslmode`. Ports 34400–34419.

use super::run_util::lockjaw;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use zookeeper_client as zk;

const DIGEST: &str = "locker:zk-S3cret-digest";
const ZK_PORT: u16 = 34400;
const PG_PORT: u16 = 34410;

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

/// A CA, a server certificate for `san`, a client certificate for `cn`,
/// and a second CA that signed nothing here.
fn certificates(dir: &Path, san: &str, cn: &str) {
    sh(
        dir,
        &format!(
            "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj '/CN=test CA'
             openssl req -x509 -newkey rsa:2048 -nodes -keyout other.key -out other-ca.pem -days 2 -subj '/CN=other CA'
             openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=server
             printf 'subjectAltName={san}\\nextendedKeyUsage=serverAuth,clientAuth\\n' > ext
             openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile ext
             openssl req -newkey rsa:2048 -nodes -keyout client-key.pem -out client.csr -subj /CN={cn}
             printf 'extendedKeyUsage=clientAuth\\n' > cext
             openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 2 -extfile cext
             chmod 600 client-key.pem server.key"
        ),
    );
}

fn wait_port(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "port {port} never opened");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `lockjaw run` with `args`, `--auth dir/auth` if given; exit code and
/// stderr.
fn run(dir: &Path, args: &[&str], auth: Option<&str>, out: &str) -> (i32, String) {
    let mut c = lockjaw();
    c.arg("run")
        .args(args)
        .args(["--time-limit", "2", "--no-progress", "--out"])
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

/// No file of `run_dir` holds `secret`.
fn no_secret_in(run_dir: &Path, secret: &str) {
    let files = crate::secrets::files_with(run_dir, secret);
    assert!(files.is_empty(), "a secret in {files:?}");
}

/// The test's own server process: killed (its pid, our child) when
/// dropped.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// ZooKeeper 3.8 with TLS only: its one client port is the
/// `secureClientPort` (Netty, PEM stores, client certificates required).
fn zookeeper(dir: &Path) -> Child {
    std::fs::create_dir_all(dir.join("data")).unwrap();
    let store = format!(
        "{}{}",
        std::fs::read_to_string(dir.join("server.pem")).unwrap(),
        std::fs::read_to_string(dir.join("server.key")).unwrap()
    );
    std::fs::write(dir.join("server-store.pem"), store).unwrap();
    let d = dir.display();
    std::fs::write(
        dir.join("zoo.cfg"),
        format!(
            "tickTime=250\ndataDir={d}/data\nsecureClientPort={ZK_PORT}\n\
             secureClientPortAddress=127.0.0.1\n\
             serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n\
             ssl.keyStore.location={d}/server-store.pem\nssl.keyStore.type=PEM\n\
             ssl.trustStore.location={d}/ca.pem\nssl.trustStore.type=PEM\nssl.clientAuth=need\n\
             4lw.commands.whitelist=*\nadmin.enableServer=false\n\
             minSessionTimeout=500\nmaxSessionTimeout=5000\n"
        ),
    )
    .unwrap();
    let log = std::fs::File::create(dir.join("zk.log")).unwrap();
    let child = Command::new("java")
        .args([
            "-Xmx256m",
            "-XX:TieredStopAtLevel=1",
            "-Dzookeeper.admin.enableServer=false",
            "-cp",
            "/usr/share/java/zookeeper.jar:/usr/share/java/netty-codec.jar:/usr/share/java/slf4j-simple.jar",
            "org.apache.zookeeper.server.ZooKeeperServerMain",
        ])
        .arg(dir.join("zoo.cfg"))
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    Child(child)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "make test-long: ZooKeeper with TLS only and the digest scheme, --auth (~13 s)"]
async fn zookeeper_with_tls_and_digest_acls_needs_auth() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    certificates(dir, "DNS:zk.test", "locker");
    std::fs::write(dir.join("digest"), DIGEST).unwrap();
    sh(dir, "chmod 600 digest");
    let tls = "[tls]\nca = \"ca.pem\"\ncert = \"client.pem\"\nkey = \"client-key.pem\"\nserver_name = \"zk.test\"\n";
    let auth = format!("{tls}\n[zookeeper]\ndigest_file = \"digest\"\n");
    std::fs::write(dir.join("auth.toml"), &auth).unwrap();
    std::fs::write(
        dir.join("wrong.toml"),
        auth.replace("zk.test", "wrong.test"),
    )
    .unwrap();
    let _zk = zookeeper(dir);
    wait_port(ZK_PORT);

    // The digest identity guards the tree: "/" and "/locks" are its only.
    let a = lockjaw::auth::load(&dir.join("auth.toml")).unwrap();
    let ep = format!("127.0.0.1:{ZK_PORT}");
    let t = Duration::from_secs(5);
    let mut admin = None;
    for _ in 0..40 {
        match lockjaw::client::zookeeper::open_session(&ep, t, t, &a).await {
            Ok(s) => {
                admin = Some(s);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
    let (admin, _bridge) = admin.expect("a TLS session with the digest");
    let mine = zk::CreateMode::Persistent.with_acls(zk::Acls::creator_all());
    admin.create("/locks", b"", &mine).await.unwrap();
    admin
        .set_acl("/", &zk::Acls::creator_all(), None)
        .await
        .unwrap();

    let args = ["--system", "zookeeper", "--endpoints", &ep];
    // The lock nodes lockjaw creates are the digest identity's too: read
    // while the run goes on, since the run deletes them at its end.
    let (d2, ep2) = (dir.to_path_buf(), ep.clone());
    let ok = tokio::task::spawn_blocking(move || {
        let args = ["--system", "zookeeper", "--endpoints", &ep2];
        run(&d2, &args, Some("auth.toml"), "ok")
    });
    let mut seen = std::collections::BTreeMap::new();
    while !ok.is_finished() {
        for k in admin.list_children("/locks").await.unwrap_or_default() {
            if let Ok((acl, _)) = admin.get_acl(&format!("/locks/{k}")).await {
                seen.insert(k, acl);
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (code, err) = ok.await.unwrap();
    assert_eq!(code, 0, "{err}");
    assert!(!seen.is_empty(), "no lock node seen during the run");
    for (k, acl) in &seen {
        // The creator's identities: the digest (and the client
        // certificate's x509 one), never anyone's.
        assert!(
            acl.iter().all(|a| a.scheme() != "world") && acl.iter().any(|a| a.scheme() == "digest"),
            "/locks/{k} is open to others: {acl:?}"
        );
    }
    // And gone after it, deleted with the run's digest.
    let left = admin.list_children("/locks").await.unwrap();
    assert!(left.is_empty(), "{left:?} left in /locks");
    let (code, err) = run(dir, &args, None, "plain");
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("does not answer as a zookeeper server"),
        "{err}"
    );
    let (code, err) = run(dir, &args, Some("wrong.toml"), "wrong");
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("not valid for name \"wrong.test\""), "{err}");
    let info = std::fs::read_to_string(dir.join("ok").join("run.json")).unwrap();
    assert!(
        info.contains("\"server_name\": \"zk.test\"")
            && info.contains("\"zookeeper_digest\": true"),
        "{info}"
    );
    no_secret_in(&dir.join("ok"), DIGEST.split(':').nth(1).unwrap());
    let key = std::fs::read_to_string(dir.join("client-key.pem")).unwrap();
    no_secret_in(&dir.join("ok"), key.lines().nth(1).unwrap());
}

/// An auth file `name` with `[postgres]` of `sslmode` and `extra` lines.
fn pg_auth(dir: &Path, name: &str, sslmode: &str, extra: &str) {
    std::fs::write(
        dir.join(name),
        format!("[postgres]\nsslmode = \"{sslmode}\"\n{extra}"),
    )
    .unwrap();
}

/// PostgreSQL 15 (lockjaw's own server, as the test's) made to require
/// TLS with a client certificate: `ssl=on` with the test's certificates,
/// and `hostssl ... cert` as the only TCP lines of `pg_hba.conf`.
async fn pg_requiring_certificates(dir: &Path) -> lockjaw::service::postgres::Server {
    use std::os::unix::fs::MetadataExt;
    let server = lockjaw::service::postgres::Server::start(&dir.join("db"), "pgtest-tls", PG_PORT)
        .await
        .unwrap();
    let data = server.cluster.nodes()[0].data_dir.clone();
    let meta = std::fs::metadata(&data).unwrap();
    for f in ["server.pem", "server.key", "ca.pem"] {
        std::fs::copy(dir.join(f), data.join(f)).unwrap();
        std::os::unix::fs::chown(data.join(f), Some(meta.uid()), Some(meta.gid())).unwrap();
    }
    std::fs::write(
        data.join("pg_hba.conf"),
        "local all all trust\nhostssl all postgres 127.0.0.1/32 cert\n",
    )
    .unwrap();
    let t = Duration::from_secs(5);
    let c = lockjaw::client::postgres_conn::connect(&server.url(), None, t)
        .await
        .unwrap();
    let d = data.display();
    for sql in [
        "ALTER SYSTEM SET ssl = on".to_string(),
        format!("ALTER SYSTEM SET ssl_cert_file = '{d}/server.pem'"),
        format!("ALTER SYSTEM SET ssl_key_file = '{d}/server.key'"),
        format!("ALTER SYSTEM SET ssl_ca_file = '{d}/ca.pem'"),
        "SELECT pg_reload_conf()".to_string(),
    ] {
        c.simple_query(&sql).await.unwrap();
    }
    // Until the reload took: a plain connection is refused.
    let deadline = Instant::now() + Duration::from_secs(10);
    while lockjaw::client::postgres_conn::connect(&server.url(), None, t)
        .await
        .is_ok()
    {
        assert!(
            Instant::now() < deadline,
            "the server still takes plain text"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "make test-long: PostgreSQL requiring TLS and a client certificate, each sslmode (~14 s)"]
async fn postgres_with_tls_and_client_certificates_takes_each_sslmode() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().to_path_buf();
    certificates(&dir, "DNS:localhost", "postgres");
    let server = pg_requiring_certificates(&dir).await;
    let id = "cert = \"client.pem\"\nkey = \"client-key.pem\"\n";
    pg_auth(
        &dir,
        "full.toml",
        "verify-full",
        &format!("ca = \"ca.pem\"\n{id}"),
    );
    pg_auth(
        &dir,
        "ca.toml",
        "verify-ca",
        &format!("ca = \"ca.pem\"\n{id}"),
    );
    pg_auth(&dir, "require.toml", "require", id);
    pg_auth(
        &dir,
        "other-ca.toml",
        "require",
        &format!("ca = \"other-ca.pem\"\n{id}"),
    );
    pg_auth(&dir, "no-cert.toml", "verify-full", "ca = \"ca.pem\"\n");
    let by_name = format!("postgres://postgres@localhost:{PG_PORT}/postgres");
    let by_ip = format!("postgres://postgres@127.0.0.1:{PG_PORT}/postgres");
    let cases: Vec<(&str, Option<&str>, &str, Option<&str>)> = vec![
        // The certificate names localhost: verify-full by that name.
        ("full", Some("full.toml"), &by_name, None),
        // verify-ca checks the chain only: the address need not match.
        ("ca", Some("ca.toml"), &by_ip, None),
        // require without a CA verifies nothing.
        ("require", Some("require.toml"), &by_ip, None),
        (
            "full-by-ip",
            Some("full.toml"),
            &by_ip,
            Some("not valid for name"),
        ),
        // libpq's rule: require with a CA verifies the chain.
        (
            "other-ca",
            Some("other-ca.toml"),
            &by_ip,
            Some("invalid peer certificate"),
        ),
        (
            "no-cert",
            Some("no-cert.toml"),
            &by_name,
            Some("certificate"),
        ),
        ("plain", None, &by_name, Some("no pg_hba.conf entry")),
    ];
    for (name, auth, url, refused) in cases {
        let (dir, auth, url) = (dir.clone(), auth.map(str::to_string), url.to_string());
        let (code, err) = tokio::task::spawn_blocking(move || {
            let args = [
                "--system",
                "postgres",
                "--workload",
                "fenced-counter",
                "--storage",
                "postgres",
                "--nemesis",
                "none",
                "--ttl-ms",
                "1000",
                "--postgres-url",
                &url,
            ];
            run(&dir, &args, auth.as_deref(), name)
        })
        .await
        .unwrap();
        match refused {
            None => assert_eq!(code, 0, "{name}: {err}"),
            Some(why) => {
                assert_eq!(code, 3, "{name}: {err}");
                assert!(err.contains(why), "{name}: {err}");
            }
        }
    }
    let info = std::fs::read_to_string(dir.join("full").join("run.json")).unwrap();
    assert!(
        info.contains("\"postgres_sslmode\": \"verify-full\""),
        "{info}"
    );
    let key = std::fs::read_to_string(dir.join("client-key.pem")).unwrap();
    no_secret_in(&dir.join("full"), key.lines().nth(1).unwrap());
    server.close().unwrap();
}
