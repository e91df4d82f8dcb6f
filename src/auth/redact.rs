//! Secrets out of command lines: a URL's password (`scheme://user:PASSWORD@host`,
//! and a `password=` query parameter) removed from every argument that
//! holds one, whatever the flag (`--postgres-url URL`, `--flag=URL`, a URL
//! after `--`). What lockjaw records, prints or passes on as a command
//! line goes through [`args`] first; the password itself reaches a child
//! through a file only its owner can read (`--postgres-password-file`).

/// `url` without its password, or `None` when it holds none (or is no
/// URL). The credentials end at the first `@` (as libpq and
/// tokio-postgres read them: an `@` in a password must be written `%40`).
pub fn url(s: &str) -> Option<String> {
    let i = s.find("://")? + 3;
    let (head, rest) = s.split_at(i);
    let mut out_rest = rest.to_string();
    let mut changed = false;
    // Over-redacts rather than leaks: whatever stands before the first `@`
    // and after a `:` goes.
    if let Some(at) = rest.find('@') {
        let creds = &rest[..at];
        if let Some((user, _password)) = creds.split_once(':') {
            let host = &rest[at + 1..];
            out_rest = if user.is_empty() {
                host.to_string()
            } else {
                format!("{user}@{host}")
            };
            changed = true;
        }
    }
    if let Some((path, query)) = out_rest.split_once('?') {
        let kept: Vec<&str> = query
            .split('&')
            .filter(|kv| {
                let k = kv.split_once('=').map_or(*kv, |(k, _)| k);
                !k.eq_ignore_ascii_case("password")
            })
            .collect();
        if kept.len() != query.split('&').count() {
            changed = true;
            out_rest = if kept.is_empty() {
                path.to_string()
            } else {
                format!("{path}?{}", kept.join("&"))
            };
        }
    }
    changed.then(|| format!("{head}{out_rest}"))
}

/// One argument without a URL password it may hold.
pub fn arg(a: &str) -> String {
    url(a).unwrap_or_else(|| a.to_string())
}

/// A command line without any URL password (see [`url`]).
pub fn args(argv: &[String]) -> Vec<String> {
    argv.iter().map(|a| arg(a)).collect()
}

/// Whether any argument holds a URL password.
pub fn has_secret(argv: &[String]) -> bool {
    argv.iter().any(|a| url(a).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_loses_its_password_and_keeps_the_rest() {
        let u = |s: &str| url(s);
        assert_eq!(
            u("postgres://locker:s3cr%40t/x@127.0.0.1:33501/db").as_deref(),
            Some("postgres://locker@127.0.0.1:33501/db")
        );
        assert_eq!(
            u("--postgres-url=postgresql://a:b@h/db?sslmode=disable").as_deref(),
            Some("--postgres-url=postgresql://a@h/db?sslmode=disable")
        );
        assert_eq!(
            u("postgres://a@h/db?password=x&sslmode=disable").as_deref(),
            Some("postgres://a@h/db?sslmode=disable")
        );
        assert_eq!(
            u("postgres://a@h/db?PASSWORD=x").as_deref(),
            Some("postgres://a@h/db")
        );
        assert_eq!(
            u("redis://:pw@h:6379/0").as_deref(),
            Some("redis://h:6379/0")
        );
        assert_eq!(
            u("mysql://u:p;$(rm)@h/db").as_deref(),
            Some("mysql://u@h/db")
        );
        assert_eq!(u("postgres://a@h/db"), None);
        assert_eq!(u("http://h:80/x"), None);
        assert_eq!(u("--system"), None);
    }

    #[test]
    fn a_command_line_keeps_every_other_argument() {
        let argv: Vec<String> = [
            "lockjaw",
            "run",
            "--postgres-url",
            "postgres://u:MARK@h/db",
            "--seed",
            "1",
        ]
        .map(String::from)
        .to_vec();
        assert!(has_secret(&argv));
        let out = args(&argv);
        assert_eq!(out[3], "postgres://u@h/db");
        assert_eq!(out.len(), 6);
        assert!(!out.join(" ").contains("MARK"));
        assert!(!has_secret(&out));
    }
}
