//! `--auth FILE` for a run: read and checked before anything starts,
//! refused where lockjaw starts the servers itself, and refused (never
//! ignored) where the system's clients cannot use a part of it.

use super::cli::RunArgs;

/// `--auth FILE`, read and checked before anything starts. lockjaw's own
/// servers take no credentials, so it needs servers lockjaw did not start.
pub(crate) fn auth_of(
    file: Option<&std::path::Path>,
    a: &RunArgs,
) -> Result<crate::auth::Auth, String> {
    let Some(file) = file else {
        return Ok(Default::default());
    };
    // `--system postgres --postgres-url`: the URL names the user's server.
    let pg_url = a.system.locks_in_postgres_url() && a.postgres_url.is_some();
    if a.endpoints.is_none() && a.choices.hosts.is_none() && !pg_url {
        return Err(format!(
            "--auth {}: the servers lockjaw starts itself take no credentials \
             (hint: point lockjaw at your servers with --endpoints HOST:PORT,...)",
            file.display()
        ));
    }
    if let (None, Some(hosts)) = (&a.endpoints, &a.choices.hosts) {
        // Only servers that run already take them (attached nodes).
        let attached = crate::remote::hosts::HostsFile::read(hosts).map(|h| {
            h.nodes
                .iter()
                .any(|n| n.allows(a.system.name()) && n.attach.is_some())
        });
        if attached == Ok(false) {
            return Err(format!(
                "--auth {}: the servers lockjaw starts on --hosts take no credentials \
                 (hint: attach to your running servers with [node.attach] tables and \
                 --attach, docs/remote.md)",
                file.display()
            ));
        }
    }
    let auth = crate::auth::load(file).map_err(|e| e.to_string())?;
    let pg_user_db = a.system.locks_in_postgres_url() || a.postgres_url.is_some();
    if auth.postgres.is_some() && !pg_user_db {
        return Err(format!(
            "--auth {}: [postgres] is for --system postgres or --postgres-url, not --system {} \
             (hint: remove [postgres])",
            file.display(),
            a.system
        ));
    }
    match unsupported(a.system, &auth) {
        Some(why) => Err(format!("--auth {}: {why}", file.display())),
        None => Ok(auth),
    }
}

/// What of `auth` lockjaw's clients for `system` cannot use, if anything:
/// refused rather than ignored.
fn unsupported(system: crate::service::System, auth: &crate::auth::Auth) -> Option<String> {
    use crate::service::System as S;
    let redis = matches!(
        system,
        S::Redis | S::Redlock | S::Sentinel | S::RedisCluster
    );
    if auth.tls.is_some() && !(redis || system == S::Etcd || system == S::Zookeeper) {
        return Some(format!("lockjaw's {system} client speaks no TLS (hint: remove [tls]; docs/auth.md lists what each system takes)"));
    }
    if auth.user.is_some() && !(redis || system == S::Etcd) {
        return Some(format!("{system} takes no [user] (hint: ZooKeeper: [zookeeper] digest_file; PostgreSQL: the user in --postgres-url)"));
    }
    if auth.zookeeper_digest.is_some() && system != S::Zookeeper {
        return Some(format!(
            "[zookeeper] is for --system zookeeper, not {system}"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use crate::auth::{Auth, Postgres, Secret, SslMode};
    use crate::service::System;

    #[test]
    fn what_a_system_cannot_use_is_refused_not_ignored() {
        let digest = Auth {
            zookeeper_digest: Some(Secret::new("u:p")),
            ..Auth::default()
        };
        assert_eq!(super::unsupported(System::Zookeeper, &digest), None);
        let why = super::unsupported(System::Etcd, &digest).unwrap();
        assert!(
            why.contains("[zookeeper] is for --system zookeeper"),
            "{why}"
        );
        let pg = Auth {
            postgres: Some(Postgres {
                sslmode: SslMode::Require,
                ca: None,
                identity: None,
            }),
            ..Auth::default()
        };
        assert_eq!(super::unsupported(System::Postgres, &pg), None);
        let zk_tls = Auth {
            tls: Some(crate::auth::Tls {
                ca: crate::auth::Pem {
                    path: "ca.pem".into(),
                    pem: String::new(),
                },
                identity: None,
                server_name: "zk.test".into(),
            }),
            ..digest.clone()
        };
        assert_eq!(super::unsupported(System::Zookeeper, &zk_tls), None);
        let why = super::unsupported(System::RedisCluster, &digest).unwrap();
        assert!(why.contains("not redis-cluster"), "{why}");
        let user = Auth {
            user: Some(crate::auth::User {
                name: "u".into(),
                password: Secret::new("p"),
                source: crate::auth::SecretSource::Env("V".into()),
            }),
            ..Auth::default()
        };
        assert_eq!(super::unsupported(System::RedisCluster, &user), None);
    }
}
