//! Reading an auth file: its TOML (unknown fields refused), the files and
//! environment variables it names, the mode of every secret file; errors
//! name the file, the line and the field, with a hint.

use super::read::{read_capped, Capped, ReadError, AUTH_FILE_CAP, PASSWORD_CAP, PEM_CAP};
use super::{Auth, Pem, Postgres, Secret, SecretPem, SecretSource, SslMode, Tls, User};
use crate::toml_file::{self, FileError, Source};
use serde::Deserialize;
use std::path::{Path, PathBuf};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    tls: Option<RawTls>,
    user: Option<RawUser>,
    zookeeper: Option<RawZk>,
    postgres: Option<RawPg>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTls {
    ca: String,
    cert: Option<String>,
    key: Option<String>,
    server_name: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUser {
    name: String,
    password_file: Option<String>,
    password_env: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawZk {
    digest_file: Option<String>,
    digest_env: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPg {
    sslmode: String,
    ca: Option<String>,
    cert: Option<String>,
    key: Option<String>,
}

/// Read the auth file at `path` and everything it names.
pub fn load(path: &Path) -> Result<Auth, FileError> {
    let name = path.display().to_string();
    let text = read_capped(path, AUTH_FILE_CAP)
        .map(|c| c.text)
        .map_err(|e| FileError {
            file: name.clone(),
            line: 0,
            field: None,
            msg: match &e {
                ReadError::Io(e) => format!("cannot read the auth file: {e}"),
                e => format!("the auth file: {}", e.message(path)),
            },
            hint: Some(match e {
                ReadError::Io(_) => "--auth takes the path of a TOML file (docs/auth.md)".into(),
                e => e.hint().to_string(),
            }),
        })?;
    let src = Source { name, text };
    let raw: Raw = toml_file::parse(&src)?;
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let f = In {
        src: &src,
        dir: abs.parent().map(Path::to_path_buf).unwrap_or_default(),
    };
    let auth = Auth {
        file: Some(abs.clone()),
        tls: raw.tls.map(|t| f.tls(t)).transpose()?,
        user: raw.user.map(|u| f.user(u)).transpose()?,
        zookeeper_digest: raw.zookeeper.map(|z| f.digest(z)).transpose()?,
        postgres: raw.postgres.map(|p| f.postgres(p)).transpose()?,
    };
    if auth.is_empty() {
        return Err(src.whole(
            "the auth file gives no credentials",
            Some("add a [tls], [user], [zookeeper] or [postgres] table (docs/auth.md)"),
        ));
    }
    Ok(auth)
}

/// The file being read, for errors and relative paths.
struct In<'a> {
    src: &'a Source,
    dir: PathBuf,
}

impl In<'_> {
    /// An error about `table.key`, at the line that sets it (or the
    /// table's header when the key is absent).
    fn err(&self, table: &str, key: &str, msg: impl Into<String>, hint: &str) -> FileError {
        FileError {
            file: self.src.name.clone(),
            line: line_in(&self.src.text, table, key),
            field: Some(format!("{table}.{key}")),
            msg: msg.into(),
            hint: (!hint.is_empty()).then(|| hint.to_string()),
        }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.join(p)
    }

    /// A file the auth file names: a regular file of at most `cap` bytes
    /// (`read::read_capped`), with its permission bits.
    fn read_file(
        &self,
        table: &str,
        key: &str,
        p: &str,
        cap: u64,
    ) -> Result<(PathBuf, Capped), FileError> {
        let path = self.path(p);
        read_capped(&path, cap)
            .map(|c| (path.clone(), c))
            .map_err(|e| self.err(table, key, e.message(&path), e.hint()))
    }

    /// A file the auth file names (not secret): a PEM certificate.
    fn read(&self, table: &str, key: &str, p: &str) -> Result<(PathBuf, String), FileError> {
        self.read_file(table, key, p, PEM_CAP)
            .map(|(path, c)| (path, c.text))
    }

    /// A secret file: only its owner may read it.
    fn read_secret(
        &self,
        table: &str,
        key: &str,
        p: &str,
        cap: u64,
    ) -> Result<(PathBuf, Secret), FileError> {
        let (path, c) = self.read_file(table, key, p, cap)?;
        let mode = c.mode & 0o777;
        if mode & 0o077 != 0 {
            return Err(self.err(
                table,
                key,
                format!(
                    "{} holds a secret but is readable by group or others (mode {mode:04o})",
                    path.display()
                ),
                &format!("chmod 600 {}", path.display()),
            ));
        }
        Ok((path, Secret::new(c.text)))
    }

    /// A certificate chain: PEM with at least one certificate.
    fn cert(&self, table: &str, key: &str, p: &str) -> Result<Pem, FileError> {
        let (path, pem) = self.read(table, key, p)?;
        if !pem.contains("-----BEGIN CERTIFICATE-----") {
            return Err(self.err(
                table,
                key,
                format!("{} holds no PEM certificate", path.display()),
                "give a PEM file (-----BEGIN CERTIFICATE-----)",
            ));
        }
        Ok(Pem { path, pem })
    }

    /// A private key: PEM, a secret file.
    fn key(&self, table: &str, key: &str, p: &str) -> Result<SecretPem, FileError> {
        let (path, pem) = self.read_secret(table, key, p, PEM_CAP)?;
        let t = pem.expose();
        if !(t.contains("-----BEGIN") && t.contains("PRIVATE KEY-----")) {
            return Err(self.err(
                table,
                key,
                format!("{} holds no PEM private key", path.display()),
                "give the client certificate's key as PEM (-----BEGIN PRIVATE KEY-----)",
            ));
        }
        Ok(SecretPem { path, pem })
    }

    /// `cert` and `key`: both or neither.
    fn identity(
        &self,
        table: &str,
        cert: Option<&str>,
        key: Option<&str>,
    ) -> Result<Option<(Pem, SecretPem)>, FileError> {
        match (cert, key) {
            (Some(c), Some(k)) => Ok(Some((
                self.cert(table, "cert", c)?,
                self.key(table, "key", k)?,
            ))),
            (None, None) => Ok(None),
            (Some(_), None) => Err(self.err(
                table,
                "key",
                "a client certificate needs its key",
                "add key = \"client-key.pem\"",
            )),
            (None, Some(_)) => Err(self.err(
                table,
                "cert",
                "a client key needs its certificate",
                "add cert = \"client.pem\"",
            )),
        }
    }

    fn tls(&self, t: RawTls) -> Result<Tls, FileError> {
        let name = t.server_name.trim();
        if name.is_empty() || name.contains(['/', ':', ' ']) {
            return Err(self.err(
                "tls",
                "server_name",
                format!("{:?} is not a host name", t.server_name),
                "the DNS name (or IP address) the server's certificate names; clients dial \
                 lockjaw's proxies on 127.0.0.1, so it is never taken from the address",
            ));
        }
        Ok(Tls {
            ca: self.cert("tls", "ca", &t.ca)?,
            identity: self.identity("tls", t.cert.as_deref(), t.key.as_deref())?,
            server_name: name.to_string(),
        })
    }

    /// A secret from exactly one of `<what>_file` and `<what>_env`.
    fn secret(
        &self,
        table: &str,
        what: &str,
        file: Option<&str>,
        env: Option<&str>,
    ) -> Result<(Secret, SecretSource), FileError> {
        let (fk, ek) = (format!("{what}_file"), format!("{what}_env"));
        let (secret, source) = match (file, env) {
            (Some(p), None) => {
                let (path, s) = self.read_secret(table, &fk, p, PASSWORD_CAP)?;
                let s = s.expose().trim_end_matches(['\n', '\r']).to_string();
                (Secret::new(s), SecretSource::File(path))
            }
            (None, Some(var)) => match std::env::var(var) {
                Ok(v) => (Secret::new(v), SecretSource::Env(var.to_string())),
                Err(_) => {
                    return Err(self.err(
                        table,
                        &ek,
                        format!("environment variable {var} is not set (or not UTF-8)"),
                        &format!("export {var} before running lockjaw, or use {fk}"),
                    ))
                }
            },
            (Some(_), Some(_)) => {
                return Err(self.err(
                    table,
                    &ek,
                    format!("both {fk} and {ek} are given"),
                    "keep one of them",
                ))
            }
            (None, None) => {
                return Err(self.err(
                    table,
                    &fk,
                    format!("no {what}: give {fk} or {ek}"),
                    "secrets come from a file only its owner can read, or from the environment",
                ))
            }
        };
        if secret.expose().is_empty() {
            let k = if matches!(source, SecretSource::File(_)) {
                &fk
            } else {
                &ek
            };
            return Err(self.err(table, k, format!("the {what} is empty"), ""));
        }
        Ok((secret, source))
    }

    fn user(&self, u: RawUser) -> Result<User, FileError> {
        if u.name.is_empty() || u.name.contains(char::is_whitespace) {
            return Err(self.err(
                "user",
                "name",
                format!("{:?} is not a user name", u.name),
                "the ACL (Redis) or etcd user, without spaces",
            ));
        }
        let (password, source) = self.secret(
            "user",
            "password",
            u.password_file.as_deref(),
            u.password_env.as_deref(),
        )?;
        Ok(User {
            name: u.name,
            password,
            source,
        })
    }

    fn digest(&self, z: RawZk) -> Result<Secret, FileError> {
        let (d, source) = self.secret(
            "zookeeper",
            "digest",
            z.digest_file.as_deref(),
            z.digest_env.as_deref(),
        )?;
        if !d.expose().contains(':') {
            let k = match source {
                SecretSource::File(_) => "digest_file",
                SecretSource::Env(_) => "digest_env",
            };
            return Err(self.err(
                "zookeeper",
                k,
                "the digest is not of the form user:password",
                "write it as user:password (the digest scheme's credentials)",
            ));
        }
        Ok(d)
    }

    fn postgres(&self, p: RawPg) -> Result<Postgres, FileError> {
        let sslmode = SslMode::parse(&p.sslmode).ok_or_else(|| {
            self.err(
                "postgres",
                "sslmode",
                format!("unknown sslmode {:?}", p.sslmode),
                &format!("one of {}", SslMode::NAMES.join(", ")),
            )
        })?;
        let ca =
            p.ca.as_deref()
                .map(|c| self.cert("postgres", "ca", c))
                .transpose()?;
        if matches!(sslmode, SslMode::VerifyCa | SslMode::VerifyFull) && ca.is_none() {
            return Err(self.err(
                "postgres",
                "ca",
                format!(
                    "sslmode {} needs the CA that signed the server's certificate",
                    sslmode.name()
                ),
                "add ca = \"ca.pem\"",
            ));
        }
        Ok(Postgres {
            sslmode,
            ca,
            identity: self.identity("postgres", p.cert.as_deref(), p.key.as_deref())?,
        })
    }
}

/// The 1-based line that sets `key` inside `[table]`, else the table's
/// header line, else 0.
pub(super) fn line_in(text: &str, table: &str, key: &str) -> usize {
    let mut inside = false;
    let mut header = 0;
    for (i, l) in text.lines().enumerate() {
        let t = l.trim();
        if t.starts_with('[') {
            inside = t.trim_start_matches('[').trim_end_matches(']').trim() == table;
            if inside {
                header = i + 1;
            }
        } else if inside
            && t.split_once('=')
                .is_some_and(|(k, _)| k.trim().trim_matches('"') == key)
        {
            return i + 1;
        }
    }
    header
}
