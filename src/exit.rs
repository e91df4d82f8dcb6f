//! Exit codes shared by every lockjaw command, and their composition.
//!
//! 0 valid, 1 invalid (anomalies found), 2 unknown, 3 bad input, bad usage or
//! failed setup. Over several results the first of 1, 3, 2, 0 that occurs wins.
//! (A verdict becomes an exit code by `From<Validity>`, in `check`.)
//!
//! A failed command's error is the first line of its stderr: while a run
//! goes, warnings ([`say`], and the log, whose writer calls [`write_stderr`])
//! are held ([`hold_stderr`]) and printed after the error, or before the
//! summary of a run that ended ([`release_stderr`]).

/// The outcome of one command, as the process exit code reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    Valid = 0,
    Invalid = 1,
    Unknown = 2,
    Error = 3,
}

impl Exit {
    /// Priority when composing results of several files: 1, then 3, then 2, then 0.
    fn rank(self) -> u8 {
        match self {
            Exit::Invalid => 3,
            Exit::Error => 2,
            Exit::Unknown => 1,
            Exit::Valid => 0,
        }
    }

    /// Compose two outcomes: the first of invalid, error, unknown, valid present.
    pub fn merge(self, other: Exit) -> Exit {
        if other.rank() > self.rank() {
            other
        } else {
            self
        }
    }

    pub fn code(self) -> u8 {
        self as u8
    }

    /// The outcome of an exit code (`None` for a code no command exits with).
    pub fn from_code(code: u8) -> Option<Exit> {
        [Exit::Valid, Exit::Invalid, Exit::Unknown, Exit::Error]
            .into_iter()
            .find(|e| e.code() == code)
    }
}

/// Print an error the way every command does (`error: ...` with its causes)
/// and return the bad-input/failed-setup exit code.
pub fn fail(err: &anyhow::Error) -> Exit {
    eprintln!("error: {err:#}");
    Exit::Error
}

/// Warnings held while a run goes (`None`: not holding).
static HELD: std::sync::Mutex<Option<Vec<u8>>> = std::sync::Mutex::new(None);

fn held() -> std::sync::MutexGuard<'static, Option<Vec<u8>>> {
    HELD.lock().unwrap_or_else(|e| e.into_inner())
}

/// From now on hold what [`say`] and [`write_stderr`] get.
pub fn hold_stderr() {
    held().get_or_insert_with(Vec::new);
}

/// Print what was held, in order, and stop holding.
pub fn release_stderr() {
    use std::io::Write;
    if let Some(b) = held().take() {
        let _ = std::io::stderr().write_all(&b);
    }
}

/// Bytes for stderr (a log line): held while holding, else written.
pub fn write_stderr(b: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    match held().as_mut() {
        Some(buf) => {
            buf.extend_from_slice(b);
            Ok(())
        }
        None => std::io::stderr().write_all(b),
    }
}

/// A warning line for stderr, held while holding.
pub fn say(line: &str) {
    let _ = write_stderr(format!("{line}\n").as_bytes());
}

impl From<Exit> for std::process::ExitCode {
    fn from(e: Exit) -> Self {
        std::process::ExitCode::from(e.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_lines_wait_for_the_release() {
        hold_stderr();
        say("warning: later");
        assert_eq!(
            held().as_deref(),
            Some(b"warning: later\n".as_slice()),
            "held, not printed"
        );
        release_stderr();
        assert!(held().is_none());
    }

    #[test]
    fn merge_follows_1_3_2_0() {
        use Exit::*;
        assert_eq!(Valid.merge(Unknown), Unknown);
        assert_eq!(Unknown.merge(Error), Error);
        assert_eq!(Error.merge(Invalid), Invalid);
        assert_eq!(Invalid.merge(Error), Invalid);
        assert_eq!(Valid.merge(Valid), Valid);
    }
}
