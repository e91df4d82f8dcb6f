//! Credentials and TLS settings from an `--auth FILE`: what the built-in
//! clients, the cluster layer's probes and the client adapters need to
//! reach a server that requires them (client certificates, a Redis ACL or
//! etcd user, a ZooKeeper digest, PostgreSQL's `sslmode`).
//!
//! One TOML file serves a system; every path in it is relative to the
//! file's own directory. Secrets (passwords, the digest, private keys)
//! come from files whose mode lets only their owner read them, or from
//! environment variables the file names; never from the command line.
//! [`Secret`] never prints its value ([`std::fmt::Debug`] shows
//! `<secret>`), so a logged `Auth` holds none. What a run records of it is
//! [`Auth::summary`]: that TLS and a user were used, the server name and
//! the user name, and no secret.
//!
//! A utility above `toml_file`: the client, cluster, service and runner
//! layers all read credentials through it.

mod load;
pub mod read;
pub mod redact;
#[cfg(test)]
mod tests;

pub use load::load;
pub use read::password_file;

use std::fmt;
use std::path::PathBuf;

/// A secret value: a password, a digest or a private key's PEM text.
/// Its `Debug` and `Display` never show the value.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Secret {
        Secret(s.into())
    }

    /// The value, for the one call that sends it to a server.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<secret>")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<secret>")
    }
}

/// Where a secret came from: a file (its absolute path) or an environment
/// variable (its name). Adapters are told this, not the value, when the
/// value is in a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SecretSource {
    File(PathBuf),
    Env(String),
}

/// The client side of TLS: whom to trust, who we are, whom we expect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tls {
    /// PEM certificates the server's chain must end in; `None`: the
    /// system's roots are not loaded, so a CA is required (see `load`).
    pub ca: Pem,
    /// The client certificate chain and its private key (client
    /// certificate authentication), both or neither.
    pub identity: Option<(Pem, SecretPem)>,
    /// The name the server's certificate must carry. Clients dial proxy
    /// addresses (127.0.0.1:port), so this is what is verified, never the
    /// dialled address.
    pub server_name: String,
}

/// A PEM file's path and contents (not secret: certificates).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pem {
    pub path: PathBuf,
    pub pem: String,
}

/// A private key's path and contents (secret).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretPem {
    pub path: PathBuf,
    pub pem: Secret,
}

/// A user name and its password: Redis ACL `AUTH user password`, etcd's
/// user authentication.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub password: Secret,
    pub source: SecretSource,
}

/// PostgreSQL's TLS: libpq's `sslmode` and certificates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Postgres {
    pub sslmode: SslMode,
    pub ca: Option<Pem>,
    pub identity: Option<(Pem, SecretPem)>,
}

/// libpq's `sslmode` values lockjaw supports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    pub const NAMES: &'static [&'static str] =
        &["disable", "prefer", "require", "verify-ca", "verify-full"];

    pub fn parse(s: &str) -> Option<SslMode> {
        Some(match s {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

/// Everything an auth file gives. `Auth::default()`: no credentials (what
/// every run without `--auth` uses).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Auth {
    /// The auth file (absolute), when one was read: workers and heal read
    /// it again rather than receive its secrets.
    pub file: Option<PathBuf>,
    pub tls: Option<Tls>,
    pub user: Option<User>,
    /// ZooKeeper's `digest` scheme: `"user:password"`.
    pub zookeeper_digest: Option<Secret>,
    pub postgres: Option<Postgres>,
}

impl Auth {
    /// True when the file gave nothing (or there is no file).
    pub fn is_empty(&self) -> bool {
        self.tls.is_none()
            && self.user.is_none()
            && self.zookeeper_digest.is_none()
            && self.postgres.is_none()
    }

    /// What a run records (`run.json`): the non-secret fields only.
    pub fn summary(&self) -> Summary {
        Summary {
            file: self.file.as_ref().map(|p| p.display().to_string()),
            tls: self.tls.is_some(),
            client_certificate: self.tls.as_ref().is_some_and(|t| t.identity.is_some()),
            server_name: self.tls.as_ref().map(|t| t.server_name.clone()),
            user: self.user.as_ref().map(|u| u.name.clone()),
            zookeeper_digest: self.zookeeper_digest.is_some(),
            postgres_sslmode: self.postgres.as_ref().map(|p| p.sslmode.name().to_string()),
        }
    }
}

/// The record of a run's credentials: which were used, no secret.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Summary {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default)]
    pub tls: bool,
    #[serde(default)]
    pub client_certificate: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default)]
    pub zookeeper_digest: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postgres_sslmode: Option<String>,
}
