//! The adapter protocol's messages (version 1, `docs/adapters.md`) and
//! where `--client NAME|PATH` points.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The protocol version lockjaw speaks.
pub const PROTOCOL: u32 = 1;
/// The longest line lockjaw reads from an adapter.
pub const MAX_LINE: usize = 1 << 20;

/// The longest lease an adapter may report (`lease_ms`): one day. No lock
/// service grants longer ones in a test, and a larger number (2^63 + 5)
/// would overflow the nanosecond arithmetic of the checks.
pub const MAX_LEASE_MS: u64 = 86_400_000;

/// Why a reported `lease_ms` is refused, if it is.
pub fn bad_lease(lease_ms: u64) -> Option<String> {
    (lease_ms > MAX_LEASE_MS).then(|| {
        format!(
            "`lease_ms` {lease_ms} is longer than a day ({MAX_LEASE_MS} ms): no lease the \
             checks can count with (hint: report the lease the server enforces, in ms)"
        )
    })
}

/// lockjaw's first line to an adapter.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Hello {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub protocol: u32,
    pub system: String,
    pub endpoints: Vec<String>,
    pub dial: BTreeMap<String, String>,
    pub sentinel_master: String,
    pub key: String,
    pub ttl_ms: u64,
    pub op_timeout_ms: u64,
    pub clock_origin_ns: u64,
    pub worker: usize,
    /// `--auth`: the credentials the library connects with (only sent to
    /// an adapter whose answer says `"auth": true`; docs/adapters.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<Credentials>,
}

/// `--auth` as an adapter receives it: certificate and key as the paths
/// the adapter reads (the key file is its owner's only), the password and
/// digest as values over the pipe (lockjaw writes the hello nowhere).
/// `Debug` shows no secret.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Credentials {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsFiles>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<UserLogin>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zookeeper_digest: Option<Sent>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TlsFiles {
    pub ca: PathBuf,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cert: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<PathBuf>,
    pub server_name: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct UserLogin {
    pub name: String,
    /// Absent in the handshake before a run (see `without_secrets`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password: Option<Sent>,
}

/// A secret serialized as its value (into the hello only); `Debug` hides it.
#[derive(Clone, Debug, PartialEq)]
pub struct Sent(pub crate::auth::Secret);

impl Serialize for Sent {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0.expose())
    }
}

impl Credentials {
    /// The same without the password and digest: what the handshake
    /// before a run carries, to an adapter not yet known to take them.
    pub fn without_secrets(mut self) -> Credentials {
        if let Some(u) = &mut self.user {
            u.password = None;
        }
        self.zookeeper_digest = None;
        self
    }

    /// What the hello carries of `a`; `None` without credentials.
    pub fn of(a: &crate::auth::Auth) -> Option<Credentials> {
        if a.tls.is_none() && a.user.is_none() && a.zookeeper_digest.is_none() {
            return None;
        }
        Some(Credentials {
            tls: a.tls.as_ref().map(|t| TlsFiles {
                ca: t.ca.path.clone(),
                cert: t.identity.as_ref().map(|(c, _)| c.path.clone()),
                key: t.identity.as_ref().map(|(_, k)| k.path.clone()),
                server_name: t.server_name.clone(),
            }),
            user: a.user.as_ref().map(|u| UserLogin {
                name: u.name.clone(),
                password: Some(Sent(u.password.clone())),
            }),
            zookeeper_digest: a.zookeeper_digest.clone().map(Sent),
        })
    }
}

impl Hello {
    /// A hello with the fields that do not depend on the run filled in.
    pub fn new(system: &str, endpoints: Vec<String>, key: &str, ttl_ms: u64) -> Hello {
        Hello {
            kind: "hello",
            protocol: PROTOCOL,
            system: system.to_string(),
            endpoints,
            dial: BTreeMap::new(),
            sentinel_master: crate::client::SENTINEL_MASTER.to_string(),
            key: key.to_string(),
            ttl_ms,
            op_timeout_ms: 1000,
            clock_origin_ns: crate::history::clock::monotonic_raw_ns(),
            worker: 0,
            auth: None,
        }
    }
}

/// How the library's leases start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LeaseStart {
    /// The acquire starts the lease (Redis `SET .. PX`).
    Acquire,
    /// A session or lease grant started it earlier (ZooKeeper, etcd).
    Session,
}

/// Which background renewals the adapter reports as `renewed` events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Renewals {
    None,
    All,
    Some,
}

/// What the adapter's library offers (its `hello_ok`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offer {
    pub library: String,
    pub version: String,
    pub fence: bool,
    pub lease: LeaseStart,
    pub renewals: Renewals,
    /// The adapter takes `--auth` (the hello's `auth`); default false:
    /// lockjaw refuses `--auth` with it rather than have it ignored.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub auth: bool,
    /// What the library promises (`promises`); default: nothing declared.
    #[serde(default)]
    pub promises: Promises,
}

/// What a library promises, as its adapter's `hello_ok` declares
/// (`promises`); `None`: not declared. The fault registry's allows-rule
/// (`nemesis::allows`) reads it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Promises {
    /// A release deletes the lock only when it still holds its own token.
    #[serde(default)]
    pub own_token_release: Option<bool>,
    /// After a grant, the library checks the lease's remaining validity
    /// (and gives the lock up when too little is left).
    #[serde(default)]
    pub validity_check: Option<bool>,
    /// The library renews the lease by itself (`renewals = "all"`).
    #[serde(default)]
    pub renews_itself: Option<bool>,
}

impl Offer {
    /// `redis-py 4.3.4`.
    pub fn title(&self) -> String {
        format!("{} {}", self.library, self.version)
    }
}

/// One line from an adapter.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromAdapter {
    HelloOk(Offer),
    Unsupported {
        reason: String,
    },
    Ok {
        id: u64,
        #[serde(flatten)]
        fields: Map<String, Value>,
    },
    Fail {
        id: u64,
        #[serde(default)]
        error: Option<String>,
    },
    Info {
        id: u64,
        #[serde(default)]
        error: Option<String>,
    },
    Renewed {
        #[serde(default)]
        key: Option<String>,
        owner: String,
        lease_ms: u64,
        sent_ns: u64,
        done_ns: u64,
    },
    Lost {
        #[serde(default)]
        key: Option<String>,
        owner: String,
        #[serde(default)]
        reason: Option<String>,
    },
}

impl FromAdapter {
    /// Parse one line; the error says what is wrong with it.
    pub fn parse(line: &[u8]) -> Result<FromAdapter, String> {
        let v: Value = serde_json::from_slice(line).map_err(|e| format!("not JSON ({e})"))?;
        let Some(kind) = v.get("type").and_then(Value::as_str).map(str::to_string) else {
            return Err("not a protocol message: no string field `type`".into());
        };
        const KNOWN: [&str; 7] = [
            "hello_ok",
            "unsupported",
            "ok",
            "fail",
            "info",
            "renewed",
            "lost",
        ];
        if !KNOWN.contains(&kind.as_str()) {
            return Err(format!(
                "unknown message type {kind:?} (expected one of {})",
                KNOWN.join(", ")
            ));
        }
        serde_json::from_value(v).map_err(|e| format!("bad `{kind}` message: {e}"))
    }
}

/// One request to an adapter.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Request<'a> {
    pub id: u64,
    #[serde(rename = "type")]
    pub kind: &'a str,
    pub key: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<&'a str>,
}

/// A line shown in an error: at most 200 characters of it.
pub fn excerpt(line: &[u8]) -> String {
    let s = String::from_utf8_lossy(line);
    let s = s.trim_end();
    match s.char_indices().nth(200) {
        Some((i, _)) => format!("{:?}…", &s[..i]),
        None => format!("{s:?}"),
    }
}

/// Where lockjaw looks for `clients/NAME/adapter`: `$LOCKJAW_CLIENTS`,
/// the current directory's `clients/`, then `clients/` next to the binary
/// and in its parent directories.
pub(super) fn client_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(d) = std::env::var_os("LOCKJAW_CLIENTS") {
        dirs.push(PathBuf::from(d));
    }
    dirs.push(PathBuf::from("clients"));
    dirs.extend(crate::toml_file::beside_binary("clients"));
    dirs
}

/// The executable `--client NAME|PATH` names: a path if it contains `/`,
/// else `clients/NAME/adapter` in the first place [`client_dirs`] has it.
pub fn resolve(name: &str) -> Result<PathBuf, String> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return executable(&p).map(|()| p);
    }
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        || name.starts_with('.')
    {
        return Err(format!(
            "--client {name:?}: not an adapter name (letters, digits, `.`, `_`, `-`) \
             (hint: give a path with a `/` to run an executable elsewhere, e.g. ./my-adapter)"
        ));
    }
    let dirs = client_dirs();
    for d in &dirs {
        let p = d.join(name).join("adapter");
        if p.exists() {
            return executable(&p).map(|()| p);
        }
    }
    let looked: Vec<String> = dirs
        .iter()
        .map(|d| format!("{}/{name}/adapter", d.display()))
        .collect();
    Err(format!(
        "--client {name}: no adapter found (looked for {}) \
         (hint: `ls clients/` in a lockjaw checkout lists the shipped adapters; \
         set LOCKJAW_CLIENTS to the directory holding them, or give a path)",
        looked.join(", ")
    ))
}

/// An error unless `p` is an executable file.
fn executable(p: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let m = std::fs::metadata(p).map_err(|e| format!("adapter {}: {e}", p.display()))?;
    if !m.is_file() {
        return Err(format!("adapter {}: not a file", p.display()));
    }
    if m.permissions().mode() & 0o111 == 0 {
        return Err(format!(
            "adapter {}: not executable (hint: chmod +x {})",
            p.display(),
            p.display()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_parse_and_errors_name_the_field() {
        let ok = FromAdapter::parse(br#"{"type":"ok","id":3,"owner":"t","lease_ms":2000}"#);
        let Ok(FromAdapter::Ok { id: 3, fields }) = ok else {
            panic!("{ok:?}")
        };
        assert_eq!(fields["owner"], "t");
        let e = FromAdapter::parse(br#"{"type":"renewed","owner":"t","lease_ms":5}"#).unwrap_err();
        assert!(e.contains("renewed") && e.contains("sent_ns"), "{e}");
        let e = FromAdapter::parse(b"hello there").unwrap_err();
        assert!(e.starts_with("not JSON"), "{e}");
        let e = FromAdapter::parse(br#"{"type":"okay","id":1}"#).unwrap_err();
        assert!(e.contains("\"okay\"") && e.contains("hello_ok"), "{e}");
        let e = FromAdapter::parse(
            br#"{"type":"hello_ok","library":"x","version":"1","fence":false,"lease":"forever","renewals":"none"}"#,
        )
        .unwrap_err();
        assert!(e.contains("forever"), "{e}");
    }

    #[test]
    fn a_hello_ok_may_declare_promises_and_leaving_them_out_declares_none() {
        let hello = |extra: &str| {
            let line = format!(
                r#"{{"type":"hello_ok","library":"x","version":"1","fence":false,"lease":"acquire","renewals":"none"{extra}}}"#
            );
            FromAdapter::parse(line.as_bytes())
        };
        let Ok(FromAdapter::HelloOk(o)) = hello("") else {
            panic!("a hello_ok without promises")
        };
        assert_eq!(o.promises, Promises::default());
        let Ok(FromAdapter::HelloOk(o)) =
            hello(r#","promises":{"validity_check":true,"renews_itself":false}"#)
        else {
            panic!("a hello_ok with promises")
        };
        assert_eq!(o.promises.validity_check, Some(true));
        assert_eq!(o.promises.renews_itself, Some(false));
        assert_eq!(o.promises.own_token_release, None);
        let e = hello(r#","promises":{"validity":true}"#).unwrap_err();
        assert!(e.contains("validity"), "{e}");
    }

    #[test]
    fn names_resolve_in_clients_and_paths_must_be_executable() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("mine").join("adapter");
        std::fs::create_dir_all(a.parent().unwrap()).unwrap();
        std::fs::write(&a, "#!/bin/sh\n").unwrap();
        let e = resolve(a.to_str().unwrap()).unwrap_err();
        assert!(
            e.contains("not executable") && e.contains("chmod +x"),
            "{e}"
        );
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&a, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(resolve(a.to_str().unwrap()).unwrap(), a);
        assert!(resolve("..").unwrap_err().contains("not an adapter name"));
        assert!(resolve("a b").unwrap_err().contains("not an adapter name"));
        assert!(resolve("./nope").unwrap_err().contains("adapter ./nope: "));
        let e = resolve("no-such-adapter-here").unwrap_err();
        assert!(
            e.contains("no adapter found") && e.contains("LOCKJAW_CLIENTS"),
            "{e}"
        );
    }

    #[test]
    fn excerpts_are_short() {
        assert_eq!(excerpt(b"abc\n"), "\"abc\"");
        assert!(excerpt(&[b'x'; 500]).chars().count() < 210);
    }
}
