//! Exit codes shared by every lockjaw command, and their composition.
//!
//! 0 valid, 1 invalid (anomalies found), 2 unknown, 3 bad input, bad usage or
//! failed setup. Over several results the first of 1, 3, 2, 0 that occurs wins.
//! (A verdict becomes an exit code by `From<Validity>`, in `check`.)

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
}

/// Print an error the way every command does (`error: ...` with its causes)
/// and return the bad-input/failed-setup exit code.
pub fn fail(err: &anyhow::Error) -> Exit {
    eprintln!("error: {err:#}");
    Exit::Error
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
    fn merge_follows_1_3_2_0() {
        use Exit::*;
        assert_eq!(Valid.merge(Unknown), Unknown);
        assert_eq!(Unknown.merge(Error), Error);
        assert_eq!(Error.merge(Invalid), Invalid);
        assert_eq!(Invalid.merge(Error), Invalid);
        assert_eq!(Valid.merge(Valid), Valid);
    }
}
