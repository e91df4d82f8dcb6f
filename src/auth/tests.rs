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

/// A FIFO at `p` (nothing ever writes to it: an open that blocked would
/// hang the test).
fn fifo(p: &Path) {
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

#[test]
fn issue40_only_regular_files_are_read() {
    let (d, _) = dir_with("");
    fifo(&d.path().join("fifo"));
    std::fs::create_dir(d.path().join("adir")).unwrap();
    let cases: &[(&str, &str, &str)] = &[
        (
            "/proc/self/environ",
            "user.password_file",
            "is a /proc file",
        ),
        ("fifo", "user.password_file", "is a FIFO"),
        ("adir", "user.password_file", "is a directory"),
        ("/dev/zero", "user.password_file", "is a device"),
    ];
    for (file, field, msg) in cases {
        let text = format!("[user]\nname = \"u\"\npassword_file = \"{file}\"\n");
        std::fs::write(d.path().join("auth.toml"), &text).unwrap();
        let e = load(&d.path().join("auth.toml")).unwrap_err();
        assert_eq!(e.field.as_deref(), Some(*field), "{file}: {e}");
        assert_eq!(e.line, 3, "{file}: {e}");
        let t = e.to_string();
        assert!(
            t.contains(msg) && t.contains(file) && t.contains("regular file"),
            "{file}: {t}"
        );
    }
    for bad in ["/proc/self/environ", "/dev/zero"] {
        let e = load(Path::new(bad)).unwrap_err().to_string();
        assert!(e.contains("not a regular file") && e.contains(bad), "{e}");
    }
    let e = load(&d.path().join("fifo")).unwrap_err().to_string();
    assert!(e.contains("is a FIFO"), "{e}");
    let e = crate::auth::password_file(Path::new("/proc/self/environ"), "--postgres-password-file")
        .unwrap_err();
    assert!(
        e.contains("--postgres-password-file /proc/self/environ") && e.contains("/proc file"),
        "{e}"
    );
}

#[test]
fn issue40_files_over_their_cap_are_refused_unread() {
    let (d, p) = dir_with("");
    // Sparse: 200 MB that take no disk and, unread, no memory.
    let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    f.set_len(200 << 20).unwrap();
    let e = load(&p).unwrap_err().to_string();
    assert!(
        e.contains("auth.toml") && e.contains("cap of 64 KiB"),
        "{e}"
    );
    let big = |name: &str, len: u64| {
        let q = d.path().join(name);
        let f = std::fs::File::create(&q).unwrap();
        f.set_len(len).unwrap();
        std::fs::set_permissions(&q, std::fs::Permissions::from_mode(0o600)).unwrap();
    };
    big("big-password", 5000);
    big("big-key.pem", 300 << 10);
    big("big-ca.pem", 300 << 10);
    let cases: &[(&str, &str, &str)] = &[
        ("[user]\nname = \"u\"\npassword_file = \"big-password\"\n", "user.password_file", "cap of 4 KiB"),
        ("[tls]\nca = \"ca.pem\"\ncert = \"client.pem\"\nkey = \"big-key.pem\"\nserver_name = \"x\"\n", "tls.key", "cap of 256 KiB"),
        ("[tls]\nca = \"big-ca.pem\"\nserver_name = \"x\"\n", "tls.ca", "cap of 256 KiB"),
    ];
    for (text, field, msg) in cases {
        std::fs::write(&p, text).unwrap();
        let e = load(&p).unwrap_err();
        assert_eq!(e.field.as_deref(), Some(*field), "{e}");
        assert!(e.to_string().contains(msg), "{e}");
    }
    let e = crate::auth::password_file(&d.path().join("big-password"), "--postgres-password-file")
        .unwrap_err();
    assert!(
        e.contains("big-password") && e.contains("cap of 4 KiB"),
        "{e}"
    );
}

#[test]
fn issue40_a_password_file_on_the_command_line() {
    let (d, _) = dir_with("");
    let got = crate::auth::password_file(&d.path().join("password"), "--postgres-password-file");
    assert_eq!(got.unwrap().expose(), "hunter2-secret");
    let e = crate::auth::password_file(&d.path().join("open-password"), "--postgres-password-file")
        .unwrap_err();
    assert!(e.contains("chmod 600") && !e.contains("hunter2"), "{e}");
}
