//! The auth file: every error names file, line and field; secrets come
//! only from owner-only files or the environment and never print.

use super::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
const KEY: &str = "-----BEGIN PRIVATE KEY-----\nS3CRETKEYBODY\n-----END PRIVATE KEY-----\n";

/// A directory with a CA, a client cert, an owner-only key and password,
/// and the auth file `text`.
fn dir_with(text: &str) -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let w = |name: &str, body: &str, mode: u32| {
        let p = d.path().join(name);
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    w("ca.pem", CERT, 0o644);
    w("client.pem", CERT, 0o644);
    w("client-key.pem", KEY, 0o600);
    w("password", "hunter2-secret\n", 0o600);
    w("open-password", "hunter2-secret\n", 0o644);
    w("digest", "zk:zk-secret\n", 0o600);
    w("auth.toml", text, 0o644);
    let p = d.path().join("auth.toml");
    (d, p)
}

fn err(text: &str) -> toml_file_err::E {
    let (_d, p) = dir_with(text);
    let e = load(&p).unwrap_err();
    toml_file_err::E {
        line: e.line,
        field: e.field.clone(),
        text: e.to_string(),
    }
}

mod toml_file_err {
    #[derive(Debug)]
    pub struct E {
        pub line: usize,
        pub field: Option<String>,
        pub text: String,
    }
}

const FULL: &str = r#"# a complete file
[tls]
ca = "ca.pem"
cert = "client.pem"
key = "client-key.pem"
server_name = "etcd.example"

[user]
name = "lockjaw"
password_file = "password"

[zookeeper]
digest_file = "digest"

[postgres]
sslmode = "verify-full"
ca = "ca.pem"
"#;

#[test]
fn a_complete_file_loads_and_hides_its_secrets() {
    let (d, p) = dir_with(FULL);
    let a = load(&p).unwrap();
    let t = a.tls.as_ref().unwrap();
    assert_eq!(t.server_name, "etcd.example");
    assert_eq!(t.ca.path, d.path().join("ca.pem"));
    assert_eq!(t.identity.as_ref().unwrap().1.pem.expose(), KEY);
    let u = a.user.as_ref().unwrap();
    assert_eq!(
        (u.name.as_str(), u.password.expose()),
        ("lockjaw", "hunter2-secret")
    );
    assert_eq!(
        a.zookeeper_digest.as_ref().unwrap().expose(),
        "zk:zk-secret"
    );
    assert_eq!(a.postgres.as_ref().unwrap().sslmode, SslMode::VerifyFull);
    let shown = format!("{a:?} {:?}", a.summary());
    for secret in ["hunter2", "zk-secret", "S3CRETKEYBODY"] {
        assert!(!shown.contains(secret), "{secret} printed: {shown}");
    }
    let s = serde_json::to_string(&a.summary()).unwrap();
    assert!(s.contains("\"server_name\":\"etcd.example\"") && s.contains("\"user\":\"lockjaw\""));
    assert!(!s.contains("hunter2"));
}

#[test]
fn a_password_from_the_environment() {
    std::env::set_var("LOCKJAW_AUTH_TEST_PW", "from-env");
    let (_d, p) = dir_with("[user]\nname = \"u\"\npassword_env = \"LOCKJAW_AUTH_TEST_PW\"\n");
    let a = load(&p).unwrap();
    let u = a.user.unwrap();
    assert_eq!(u.password.expose(), "from-env");
    assert_eq!(u.source, SecretSource::Env("LOCKJAW_AUTH_TEST_PW".into()));
}

#[test]
fn every_error_names_line_and_field() {
    let cases: &[(&str, usize, &str, &str)] = &[
        ("[tls]\nca = \"ca.pem\"\nserver_name = \"x\"\nbogus = 1\n", 4, "bogus", "unknown field"),
        ("[nope]\n", 1, "nope", "unknown field"),
        ("[tls]\nca = \"ca.pem\"\n", 1, "server_name", "missing field"),
        ("[tls]\nca = \"missing.pem\"\nserver_name = \"x\"\n", 2, "tls.ca", "cannot read"),
        ("[tls]\nca = \"password\"\nserver_name = \"x\"\n", 2, "tls.ca", "no PEM certificate"),
        ("[tls]\nca = \"ca.pem\"\nserver_name = \"127.0.0.1:2379\"\n", 3, "tls.server_name", "not a host name"),
        ("[tls]\nca = \"ca.pem\"\ncert = \"client.pem\"\nserver_name = \"x\"\n", 1, "tls.key", "needs its key"),
        ("[tls]\nca = \"ca.pem\"\nkey = \"client-key.pem\"\nserver_name = \"x\"\n", 1, "tls.cert", "needs its certificate"),
        ("[tls]\nca = \"ca.pem\"\ncert = \"client.pem\"\nkey = \"ca.pem\"\nserver_name = \"x\"\n", 4, "tls.key", "readable by group or others"),
        ("[user]\nname = \"u\"\n", 1, "user.password_file", "no password"),
        ("[user]\nname = \"u\"\npassword_file = \"open-password\"\n", 3, "user.password_file", "chmod 600"),
        ("[user]\nname = \"u\"\npassword_file = \"password\"\npassword_env = \"X\"\n", 4, "user.password_env", "both"),
        ("[user]\nname = \"u\"\npassword_env = \"LOCKJAW_AUTH_TEST_UNSET\"\n", 3, "user.password_env", "is not set"),
        ("[user]\nname = \"a b\"\npassword_file = \"password\"\n", 2, "user.name", "not a user name"),
        ("[zookeeper]\ndigest_file = \"password\"\n", 2, "zookeeper.digest_file", "user:password"),
        ("[postgres]\nsslmode = \"maybe\"\n", 2, "postgres.sslmode", "one of disable"),
        ("[postgres]\nsslmode = \"verify-ca\"\n", 1, "postgres.ca", "needs the CA"),
        ("[tls\n", 1, "", "invalid table header"),
    ];
    for (text, line, field, msg) in cases {
        let e = err(text);
        assert_eq!(e.line, *line, "{text}: {e:?}");
        if !field.is_empty() {
            assert_eq!(e.field.as_deref(), Some(*field), "{text}: {e:?}");
        }
        assert!(e.text.contains(msg), "{text}: {e:?}");
        assert!(e.text.contains("auth.toml"), "{text}: {e:?}");
    }
}

#[test]
fn an_empty_or_missing_file_is_refused() {
    assert!(err("# nothing\n").text.contains("gives no credentials"));
    let e = load(Path::new("/nonexistent/auth.toml")).unwrap_err();
    assert!(e.to_string().contains("cannot read the auth file"), "{e}");
}

#[test]
fn secrets_never_print() {
    let s = Secret::new("pw");
    assert_eq!(format!("{s} {s:?}"), "<secret> <secret>");
}

#[test]
fn line_in_finds_the_key_of_its_table() {
    let t = "[tls]\nca = 1\n[postgres]\nca = 2\n";
    assert_eq!(load::line_in(t, "postgres", "ca"), 4);
    assert_eq!(load::line_in(t, "tls", "ca"), 2);
    assert_eq!(load::line_in(t, "tls", "key"), 1);
    assert_eq!(load::line_in(t, "user", "name"), 0);
}
