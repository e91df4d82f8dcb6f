//! libfaketime, as every layer that starts or shifts a faked clock needs
//! it: the libraries preloaded into a server (`--faketime`) and the
//! offset syntax lockjaw writes into a control file, checked before the
//! offset reaches a file or a remote shell.

/// Where the libraries `--faketime` preloads live (mimalloc first: Debian's
/// jemalloc-linked redis-server hangs under libfaketime otherwise).
pub const FAKETIME_PRELOAD: &str =
    "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2 /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// Whether `offset` is a libfaketime offset lockjaw writes: a sign, a
/// number, an optional unit (`+30s`, `-2m`, `+1.5h`). The local and the
/// remote clock faults both check with it.
pub fn check_offset(offset: &str) -> Result<(), String> {
    let ok = offset.starts_with(['+', '-'])
        && offset.len() <= 32
        && offset[1..]
            .trim_end_matches(['s', 'm', 'h', 'd'])
            .parse::<f64>()
            .is_ok_and(f64::is_finite);
    if ok {
        Ok(())
    } else {
        Err(format!(
            "clock offset {offset:?} is not of the form +30s, -2m, +1.5h (hint: sign, number, optional unit s|m|h|d)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::check_offset;

    #[test]
    fn offsets_lockjaw_writes_pass_and_shell_text_does_not() {
        for ok in ["+30s", "-2m", "+1.5h", "+0", "-0.250s"] {
            check_offset(ok).unwrap();
        }
        for bad in ["30s", "+", "+1x", "+inf", "+1s; rm -rf /", "+NaN"] {
            assert!(check_offset(bad).is_err(), "{bad}");
        }
    }
}
