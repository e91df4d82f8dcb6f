//! A child `lockjaw run`'s secret, passed in a file rather than on its
//! command line: a `--postgres-url` password (from the parent's own
//! command line) goes to `postgres.password` in the child's run
//! directory (mode 0600, written before the child starts), the child gets
//! the URL without it and `--postgres-password-file`, and the file is
//! removed when the child has ended. `PGPASSWORD` goes the same way: the
//! child gets the file, not the variable.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The file in a child's run directory that holds its password.
pub const FILE: &str = "postgres.password";

/// Removes the password file when dropped (the child has ended, or the
/// parent unwinds).
pub struct PasswordFile(Option<PathBuf>);

impl Drop for PasswordFile {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// `argv` with `--postgres-url`'s password moved into a private file in
/// `dir`; any other URL password is dropped from the line. `env` is
/// `PGPASSWORD` as the parent has it: it goes into the file too when the
/// URL has none and no password file is named (the child is started
/// without it in its environment).
pub fn without_secrets(
    argv: Vec<String>,
    dir: &Path,
    env: Option<String>,
) -> Result<(Vec<String>, PasswordFile), String> {
    let mut password = None;
    let mut out = Vec::with_capacity(argv.len() + 2);
    let mut after_flag = false;
    for a in argv {
        let url = if after_flag {
            Some(a.as_str())
        } else {
            a.strip_prefix("--postgres-url=")
        };
        if let Some(u) = url {
            if let Ok(db) = crate::client::postgres_conn::parse_url(u) {
                password = db.password.or(password);
            }
        }
        after_flag = a == "--postgres-url";
        out.push(crate::auth::redact::arg(&a));
    }
    let has = |f: &str| {
        out.iter()
            .any(|a| a == f || a.starts_with(&format!("{f}=")))
    };
    if password.is_none() && has("--postgres-url") && !has("--postgres-password-file") {
        password = env.filter(|p| !p.is_empty());
    }
    let Some(p) = password else {
        return Ok((out, PasswordFile(None)));
    };
    let file = dir.join(FILE);
    let write = || -> std::io::Result<()> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)?;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&file)?;
        f.write_all(format!("{p}\n").as_bytes())
    };
    write().map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    out.extend([
        "--postgres-password-file".to_string(),
        file.display().to_string(),
    ]);
    Ok((out, PasswordFile(Some(file))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_leaves_the_line_for_a_private_file() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let cell = d.path().join("cell");
        let argv: Vec<String> = [
            "run",
            "--postgres-url",
            "postgres://u:MARK%21@127.0.0.1:33501/db",
        ]
        .map(String::from)
        .to_vec();
        let (out, guard) = without_secrets(argv, &cell, Some("other".into())).unwrap();
        let line = out.join(" ");
        assert!(!line.contains("MARK"), "{line}");
        assert!(
            line.contains("postgres://u@127.0.0.1:33501/db --postgres-password-file"),
            "{line}"
        );
        let f = cell.join(FILE);
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "MARK!\n");
        assert_eq!(
            std::fs::metadata(&f).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert!(crate::auth::password_file(&f, "x").is_ok());
        drop(guard);
        assert!(!f.exists(), "removed when the child has ended");
        let plain: Vec<String> = ["run", "--seed", "1"].map(String::from).to_vec();
        assert_eq!(
            without_secrets(plain.clone(), &cell, None).unwrap().0,
            plain
        );
        let env = Some("FROM-ENV".to_string());
        let bare: Vec<String> = ["run", "--postgres-url", "postgres://u@h/db"]
            .map(String::from)
            .to_vec();
        let (out, guard) = without_secrets(bare.clone(), &cell, env.clone()).unwrap();
        let named_file = format!("--postgres-password-file {}", f.display());
        assert!(out.join(" ").ends_with(&named_file), "{out:?}");
        assert_eq!(
            std::fs::read_to_string(&f).unwrap(),
            "FROM-ENV\n",
            "PGPASSWORD goes to the file"
        );
        drop(guard);
        let mut named = bare;
        named.extend(["--postgres-password-file".into(), "/home/me/pw".into()]);
        let (out, _g) = without_secrets(named.clone(), &cell, env).unwrap();
        assert_eq!(
            out, named,
            "the user's own password file is passed on as it is"
        );
        assert!(!f.exists());
    }
}
