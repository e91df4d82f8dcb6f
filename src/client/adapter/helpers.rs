//! The adapter protocol's helpers (`clients/lib/lockjaw_adapter.py` and
//! `lockjaw_adapter.js`), shipped inside lockjaw so that an adapter kept
//! anywhere (a library's own repository, a catalogue outside the project)
//! can use them: every adapter starts with the folder that holds them in
//! `$LOCKJAW_ADAPTER_LIB` and first on `PYTHONPATH` and `NODE_PATH`, so
//! `from lockjaw_adapter import Adapter` and `require('lockjaw_adapter')`
//! work without a path (docs/adapters.md).

use super::Env;
use std::path::{Path, PathBuf};

/// The helpers, as this lockjaw was built with them.
const FILES: [(&str, &str); 2] = [
    (
        "lockjaw_adapter.py",
        include_str!("../../../clients/lib/lockjaw_adapter.py"),
    ),
    (
        "lockjaw_adapter.js",
        include_str!("../../../clients/lib/lockjaw_adapter.js"),
    ),
];

/// The variable naming the helpers' folder.
pub const LIB_VAR: &str = "LOCKJAW_ADAPTER_LIB";

/// The helpers' folder: `lib/` of the first `clients/` folder lockjaw
/// finds (a checkout's) whose copies are this build's, else a copy written
/// once under the user's cache (`$XDG_CACHE_HOME`, else `~/.cache`, else
/// the temporary folder) `/lockjaw/adapter-lib-<version>/`.
pub fn dir() -> Result<PathBuf, String> {
    let same = |d: &Path| {
        FILES
            .iter()
            .all(|(f, text)| std::fs::read_to_string(d.join(f)).is_ok_and(|t| t == *text))
    };
    for c in super::wire::client_dirs() {
        let d = c.join("lib");
        if same(&d) {
            return std::path::absolute(&d).map_err(|e| format!("{}: {e}", d.display()));
        }
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    let d = cache
        .join("lockjaw")
        .join(format!("adapter-lib-{}", env!("CARGO_PKG_VERSION")));
    if !same(&d) {
        write(&d)?;
    }
    Ok(d)
}

/// Write the helpers into `d`, each through a temporary file renamed into
/// place (another run may read them meanwhile).
fn write(d: &Path) -> Result<(), String> {
    let fail = |e: std::io::Error| {
        format!(
            "cannot write the adapter helpers into {}: {e} (hint: set XDG_CACHE_HOME to a \
             writable folder)",
            d.display()
        )
    };
    std::fs::create_dir_all(d).map_err(fail)?;
    for (f, text) in FILES {
        let tmp = d.join(format!(".{f}.{}", std::process::id()));
        std::fs::write(&tmp, text).map_err(fail)?;
        std::fs::rename(&tmp, d.join(f)).map_err(fail)?;
    }
    Ok(())
}

/// The variables every adapter starts with: [`LIB_VAR`], and the folder
/// first on `PYTHONPATH` and `NODE_PATH` (before what they held).
pub fn env() -> Result<Env, String> {
    let d = dir()?.display().to_string();
    let first = |var: &str| match std::env::var(var) {
        Ok(old) if !old.is_empty() => format!("{d}:{old}"),
        _ => d.clone(),
    };
    Ok(vec![
        (LIB_VAR.into(), Some(d.clone())),
        ("PYTHONPATH".into(), Some(first("PYTHONPATH"))),
        ("NODE_PATH".into(), Some(first("NODE_PATH"))),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without a checkout's `clients/lib`, the shipped copies are written
    /// once into the cache folder and found there again.
    #[test]
    fn the_helpers_are_written_to_the_cache_when_no_checkout_has_them() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("lockjaw").join("adapter-lib-x");
        write(&d).unwrap();
        for (f, text) in FILES {
            assert_eq!(std::fs::read_to_string(d.join(f)).unwrap(), text);
        }
        // The checkout's own copies are this build's.
        let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/lib");
        for (f, text) in FILES {
            assert_eq!(std::fs::read_to_string(here.join(f)).unwrap(), text, "{f}");
        }
    }
}
