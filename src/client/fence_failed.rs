//! What a session-lock client (PostgreSQL, MariaDB) reports when the fence
//! increment after a grant fails: the error, and whether the holding
//! session must be ended because the lock may still be held.

use super::ClientError;

/// The outcome of an acquire whose lock was granted but whose fence
/// increment failed with `fence`; `given_back` is the attempt to release
/// the lock again. A definite fence error stays definite only if the lock
/// was certainly given back; anything else is indeterminate and the
/// caller must end the session (which frees the lock): the `bool`.
pub fn fence_failed(
    fence: ClientError,
    given_back: Result<(), ClientError>,
) -> (ClientError, bool) {
    match (fence, given_back) {
        (ClientError::Definite(m), Ok(())) => (
            ClientError::Definite(format!("{m} (the lock was given back)")),
            false,
        ),
        (e, _) => (ClientError::Indeterminate(e.to_string()), true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definite_only_when_given_back() {
        let d = || ClientError::Definite("no table".into());
        let i = || ClientError::Indeterminate("timeout".into());
        let (e, end) = fence_failed(d(), Ok(()));
        assert_eq!(e.to_string(), "no table (the lock was given back)");
        assert!(e.is_definite() && !end);
        let (e, end) = fence_failed(d(), Err(i()));
        assert_eq!(e.to_string(), "no table");
        assert!(!e.is_definite() && end);
        let (e, end) = fence_failed(i(), Ok(()));
        assert!(!e.is_definite() && end);
    }
}
