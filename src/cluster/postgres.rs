//! PostgreSQL servers: `initdb` and `postgres` from the Debian package's
//! `/usr/lib/postgresql/15/bin`, run as the `postgres` system user (the
//! server refuses root) in the node's cgroup, listening on 127.0.0.1 only
//! with its socket in its data directory. The data directory lies in the
//! temporary directory ([`super::tmpdata`]), since the cluster directory
//! may be closed to that user. Backends call `setsid()`, so node faults act
//! on the whole cgroup ([`crate::process::Spec::whole_cgroup`]).
//!
//! Settings for a quick, light, throwaway server: `fsync=off`,
//! `full_page_writes=off`, `shared_buffers=16MB`, trust authentication on
//! loopback (`initdb --auth=trust --no-sync`). Commits stay synchronous:
//! a commit is written to the kernel before it is acknowledged, so a
//! SIGKILLed server (`kill-node`) restarts with every acknowledged commit
//! (the fence counter never goes back); only a crash of the machine could
//! lose them.
//!
//! Also the pieces `--postgres-url` and `--storage postgres` share: the
//! [`Server`] handle of one server started for a run, URL parsing, the
//! `lockjaw_<run-id>_*` table names and dropping them.

use super::node::Node;
use super::{ClusterError, Plan};
use std::path::Path;

/// Where the Debian package puts the server's programs.
pub const BIN_DIR: &str = "/usr/lib/postgresql/15/bin";
/// Overrides [`BIN_DIR`] (another installation of PostgreSQL).
pub const BIN_ENV: &str = "LOCKJAW_POSTGRES_BIN";

/// The directory of `initdb` and `postgres`.
pub fn bin_dir() -> String {
    std::env::var(BIN_ENV).unwrap_or_else(|_| BIN_DIR.to_string())
}
/// The system user the server runs as.
pub const USER: &str = "postgres";

/// Start a node: `initdb` on the first start (no `PG_VERSION` yet), then
/// `exec postgres`, so the process lockjaw tracks is the postmaster.
/// Positional parameters: $1 the bin directory, $2 the data directory,
/// $3 the port.
const LAUNCH: &str = r#"set -e
if [ ! -s "$2/PG_VERSION" ]; then
  "$1/initdb" -D "$2" -U postgres --auth=trust --no-sync --no-instructions -E UTF8 --locale=C >/dev/null
fi
exec "$1/postgres" -D "$2" -c listen_addresses=127.0.0.1 -c port="$3" \
  -c unix_socket_directories="$2" -c fsync=off -c full_page_writes=off -c shared_buffers=16MB -c max_connections=200 \
  -c logging_collector=off -c log_min_messages=warning"#;

/// The programs a local server needs, or an error naming the missing one.
pub fn check_installed() -> Result<(), ClusterError> {
    for prog in ["initdb", "postgres"] {
        let p = Path::new(&bin_dir()).join(prog);
        if !p.is_file() {
            return Err(ClusterError::Usage(format!(
                "PostgreSQL is not installed: {} is missing (hint: install the Debian package \
                 postgresql (version 15), e.g. with scripts/install-deps.sh, set {BIN_ENV} to \
                 another installation's bin directory, or give your own database with \
                 --postgres-url)",
                p.display()
            )));
        }
    }
    Ok(())
}

pub(crate) fn plan(p: &Plan<'_>) -> Result<Vec<Node>, ClusterError> {
    check_installed()?;
    super::as_user::plan(
        p,
        &super::as_user::Launch {
            node_prefix: "pg",
            user: USER,
            script: LAUNCH,
            argv0: "lockjaw-postgres",
            bin: bin_dir(),
        },
    )
}

/// The private file in a run directory that holds `--postgres-url`.
pub const URL_FILE: &str = "postgres.url";

/// Write `url` to `dir/postgres.url`, readable by its owner only.
pub fn write_url_file(dir: &Path, url: &str) -> std::io::Result<std::path::PathBuf> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let p = dir.join(URL_FILE);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&p)?;
    f.write_all(format!("{url}\n").as_bytes())?;
    Ok(p)
}

/// The cgroup group (and data directory infix) of the server a run starts
/// beside another system (`--storage postgres`): `<run-id>-pg`, beside
/// the run's own group, which belongs to the run directory.
pub fn storage_group(run_id: &str) -> String {
    format!("{run_id}-pg")
}
