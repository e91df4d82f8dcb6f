//! MariaDB servers: `mariadb-install-db` and `mariadbd` from the Debian
//! package, run as the `mysql` system user (the server refuses root) in
//! the node's cgroup, listening on 127.0.0.1 only (networking on, name
//! resolution off) with its unix socket in its data directory, never
//! Debian's `/run/mysqld`. `--no-defaults` keeps `/etc/mysql` out, and
//! Debian's own service is never started. The data directory lies in the
//! temporary directory ([`super::tmpdata`]), since the cluster directory
//! may be closed to that user.
//!
//! Settings for a quick, light, throwaway server: a 16 MB buffer pool, an
//! 8 MB redo log, no binary log, and `innodb_flush_log_at_trx_commit=2`:
//! each commit is written to the kernel before it is acknowledged and
//! flushed to disk once a second, so a SIGKILLed server (`kill-node`)
//! restarts with every acknowledged commit (the fence counter never goes
//! back); only a crash of the machine could lose the last second. The
//! server reports the setting, and `run.json` records it with the version.
//!
//! On every start an init file (in the data directory) makes sure of the
//! `lockjaw` user (no password, from any host: the server listens on
//! loopback only) and the `lockjaw` database.

use super::node::Node;
use super::{ClusterError, Plan};
use std::path::Path;

/// The system user the server runs as.
pub const USER: &str = "mysql";
/// Overrides the directory of `mariadb-install-db` and `mariadbd`
/// (another installation); by default they are found on the `PATH` (and
/// in `/usr/sbin`, where Debian puts the server).
pub const BIN_ENV: &str = "LOCKJAW_MARIADB_BIN";

/// Start a node: install the system tables on the first start (no
/// `lockjaw-installed` marker yet: a start killed half-way installs
/// afresh), then `exec mariadbd`, so the process lockjaw tracks is the
/// server. Positional parameters: $1 the directory of the programs (empty:
/// the `PATH`), $2 the data directory, $3 the port.
const LAUNCH: &str = r#"set -e
[ -n "$1" ] && PATH="$1:$PATH"
PATH="$PATH:/usr/sbin"
if [ ! -e "$2/lockjaw-installed" ]; then
  rm -rf "$2"
  mkdir -m 700 "$2"
  mariadb-install-db --no-defaults --datadir="$2" --auth-root-authentication-method=socket \
    --skip-test-db --innodb-log-file-size=8M --innodb-buffer-pool-size=16M >/dev/null
  cat > "$2/lockjaw-init.sql" <<'SQL'
CREATE USER IF NOT EXISTS 'lockjaw'@'%';
GRANT ALL ON *.* TO 'lockjaw'@'%';
CREATE DATABASE IF NOT EXISTS lockjaw;
SQL
  touch "$2/lockjaw-installed"
fi
exec mariadbd --no-defaults --datadir="$2" --bind-address=127.0.0.1 --port="$3" \
  --skip-networking=0 --socket="$2/mysqld.sock" --pid-file="$2/mysqld.pid" --skip-name-resolve \
  --init-file="$2/lockjaw-init.sql" --innodb-log-file-size=8M --innodb-buffer-pool-size=16M \
  --innodb-flush-log-at-trx-commit=2 --skip-log-bin --max-connections=300 --log-warnings=1"#;

/// The directory `BIN_ENV` names, or empty for the `PATH`.
fn bin_dir() -> String {
    std::env::var(BIN_ENV).unwrap_or_default()
}

/// The programs a local server needs, or an error naming the missing one.
pub fn check_installed() -> Result<(), ClusterError> {
    let dir = bin_dir();
    for prog in ["mariadb-install-db", "mariadbd"] {
        let found = if dir.is_empty() {
            std::env::var("PATH")
                .unwrap_or_default()
                .split(':')
                .chain(["/usr/sbin"])
                .any(|d| Path::new(d).join(prog).is_file())
        } else {
            Path::new(&dir).join(prog).is_file()
        };
        if !found {
            return Err(ClusterError::Usage(format!(
                "MariaDB is not installed: {prog} is missing (hint: install the Debian package \
                 mariadb-server, e.g. with scripts/install-deps.sh, set {BIN_ENV} to another \
                 installation's directory, or give your own server with --endpoints)"
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
            node_prefix: "my",
            user: USER,
            script: LAUNCH,
            argv0: "lockjaw-mariadb",
            bin: bin_dir(),
        },
    )
}

/// The cgroup group (and data directory infix) of the server a run starts
/// beside its system for `--storage mariadb`: `<run-id>-my`.
pub fn storage_group(run_id: &str) -> String {
    format!("{run_id}-my")
}
