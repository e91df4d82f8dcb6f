//! Register clients: read, write and compare-and-set of integer registers
//! straight on a lock service's own store (the runner's `register`
//! workload, checked for linearizability). One small trait, one file per
//! store.
//!
//! What an outcome means, for every implementation:
//!
//! | call | `Ok` | `Err(Definite)` | `Err(Indeterminate)` |
//! |---|---|---|---|
//! | `read` | the value at a point inside the call (`None` = absent) | no value read (a read never changes the register, so every read error is definite) | never |
//! | `write` | written | not written | maybe written |
//! | `cas(old, new)` | `true`: the value was `old` and became `new`, atomically; `false`: the value was not `old` (or absent) at a point inside the call, nothing written | not written | maybe written |
//!
//! Record `Ok(false)` of a cas as `fail` (it had no effect, and it also
//! saw another value); definite errors as `fail`; indeterminate ones as
//! `info`.

use super::ClientError;
use async_trait::async_trait;

pub mod etcd;
pub mod redis;
pub mod zookeeper;

/// One register client on a lock service's own store.
#[async_trait]
pub trait RegisterClient: Send {
    /// The register's value; `None` if it was never written.
    async fn read(&mut self, key: &str) -> Result<Option<i64>, ClientError>;

    /// Set the register to `value`.
    async fn write(&mut self, key: &str, value: i64) -> Result<(), ClientError>;

    /// Set the register to `new` if and only if it holds `old`.
    async fn cas(&mut self, key: &str, old: i64, new: i64) -> Result<bool, ClientError>;
}

/// Parse a stored value; anything but a decimal integer is a definite
/// error naming the key.
pub(crate) fn parse(key: &str, raw: &[u8]) -> Result<i64, ClientError> {
    std::str::from_utf8(raw)
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .ok_or_else(|| {
            ClientError::Definite(format!(
                "register {key} holds {:?}, not an integer (hint: use a key only the register workload writes)",
                String::from_utf8_lossy(raw)
            ))
        })
}

/// A read that failed changed nothing: make its error definite.
pub(crate) fn read_error(e: ClientError) -> ClientError {
    match e {
        ClientError::Indeterminate(m) => ClientError::Definite(m),
        d => d,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_accepts_integers_only() {
        assert_eq!(parse("k", b"42").unwrap(), 42);
        assert_eq!(parse("k", b"-7").unwrap(), -7);
        let e = parse("k", b"x1").unwrap_err();
        assert!(e.is_definite());
        assert!(e.to_string().contains("register k holds \"x1\""), "{e}");
    }

    #[test]
    fn read_errors_are_definite() {
        let e = read_error(ClientError::Indeterminate("timed out".into()));
        assert!(e.is_definite());
        assert_eq!(e.to_string(), "timed out");
    }
}
