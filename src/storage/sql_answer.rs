//! The answer of the SQL storages' apply function (`--storage postgres`,
//! `--storage mariadb`): one row (status, seq, value, version, highest),
//! as the [`Reply`] lockjaw's own storage would give; and a connection
//! that could not be opened, as the [`CallError`] it would give.

use super::client::{CallError, Reply};
use super::protocol::OpKind;
use serde_json::Value;

/// A connection to the SQL server that could not be opened (`msg` says
/// why): definite, as a refused connection to lockjaw's own storage. The
/// drivers hide the socket address, so it stands as 127.0.0.1:0.
pub fn connect_failed(msg: String) -> CallError {
    CallError::Connect {
        addr: ([127, 0, 0, 1], 0).into(),
        error: std::io::Error::other(msg),
    }
}

/// One answer row: status (`ok`, `stale-fence`, `version-conflict`), the
/// request's number, the value read (JSON text, reads only), the row's
/// version and its highest fence.
pub type Answer = (String, i64, Option<String>, i64, Option<i64>);

/// The reply an answer row stands for.
pub fn reply(op: OpKind, (status, seq, val, version, highest): Answer) -> Result<Reply, CallError> {
    let (seq, version) = (seq as u64, version as u64);
    match status.as_str() {
        "ok" => {
            let value = match (op, val) {
                (OpKind::Read, Some(text)) => serde_json::from_str(&text)
                    .map_err(|e| CallError::Protocol(format!("value {text:?}: {e}")))?,
                _ => Value::Null,
            };
            Ok(Reply::Ok {
                value,
                seq,
                version,
            })
        }
        "stale-fence" => Ok(Reply::Rejected {
            seq,
            highest: highest.unwrap_or(0) as u64,
        }),
        "version-conflict" => Ok(Reply::Conflict { seq, version }),
        other => Err(CallError::Protocol(format!("unknown status {other:?}"))),
    }
}
