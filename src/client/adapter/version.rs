//! `--client NAME@VERSION` and `--client NAME@PATH` (docs/adapters.md,
//! "Library versions"): parse the spec, find the adapter's version folder
//! (`clients/NAME/versions/VERSION/`), build its pinned environment with the
//! adapter's `build-env` (else `clients/lib/build-env`), and the environment
//! variables the adapter is started with. A version folder is data, never
//! code: [`check_folder`] (with [`pins`] and `npm`) refuses anything but
//! hashed pins before the build script runs.

mod npm;
pub mod pins;

use std::path::{Path, PathBuf};

/// What a `--client` spec pins beyond the adapter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pin {
    /// The adapter's default library.
    Default,
    /// `NAME@VERSION`: the environment of `versions/VERSION/`.
    Version(String),
    /// `NAME@PATH`: a library source tree, first on the library path.
    Source(PathBuf),
}

/// A parsed `--client` value (other than `builtin`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientSpec {
    /// What [`super::resolve`] looks up: an adapter name or a path.
    pub adapter: String,
    pub pin: Pin,
}

/// Parse `NAME`, `PATH`, `NAME@VERSION`, `NAME@PATH` or `PATH@VERSION`. A
/// spec whose part before its first `@` has a `/` is a path: with
/// `@VERSION` after it when the spec itself is no file but the part before
/// its last `@` is (an `@` in a path is kept); a pin with a `/` is a
/// source tree, else a version.
pub fn parse(spec: &str) -> Result<ClientSpec, String> {
    if let Some((path, v)) = path_version(spec) {
        let (name, pin) = (path.to_string(), version_pin(spec, path, v)?);
        return Ok(ClientSpec { adapter: name, pin });
    }
    let Some((name, pin)) = spec.split_once('@').filter(|(n, _)| !n.contains('/')) else {
        return Ok(ClientSpec {
            adapter: spec.to_string(),
            pin: Pin::Default,
        });
    };
    if pin.is_empty() {
        return Err(format!(
            "--client {spec}: nothing after `@` (hint: NAME@VERSION, e.g. python-redis-py@3.0.0, \
             or NAME@PATH for a library source tree, e.g. python-redis-py@../redis-py)"
        ));
    }
    let pin = if pin.contains('/') {
        let p = std::path::absolute(pin).map_err(|e| format!("--client {spec}: {pin}: {e}"))?;
        if !p.is_dir() {
            return Err(format!(
                "--client {spec}: {} is not a directory (hint: NAME@PATH names a library's \
                 source tree, the folder its package is imported from)",
                p.display()
            ));
        }
        Pin::Source(p)
    } else {
        version_pin(spec, name, pin)?
    };
    Ok(ClientSpec {
        adapter: name.to_string(),
        pin,
    })
}

/// `PATH@VERSION`: the path of an adapter file and the version, when
/// `spec` has a `/` before its first `@`, is itself no file, and the part
/// before its last `@` is one.
fn path_version(spec: &str) -> Option<(&str, &str)> {
    let (first, _) = spec.split_once('@')?;
    let (path, v) = spec.rsplit_once('@')?;
    let fits = first.contains('/') && !v.is_empty() && !v.contains('/');
    (fits && !Path::new(spec).exists() && Path::new(path).is_file()).then_some((path, v))
}

/// A version pin `v` of `spec` (adapter `name`), checked.
fn version_pin(spec: &str, name: &str, v: &str) -> Result<Pin, String> {
    if v.starts_with('.')
        || !v
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-+".contains(c))
    {
        return Err(format!(
            "--client {spec}: {v:?} is not a version (letters, digits, `.`, `_`, `-`, `+`) \
             (hint: a path needs a `/`, e.g. {name}@./src)"
        ));
    }
    Ok(Pin::Version(v.to_string()))
}

/// The version folders an adapter has (`versions/*/`), sorted.
pub fn versions(adapter_dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(adapter_dir.join("versions"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    v.sort();
    v
}

/// `versions/VERSION/` of the adapter at `adapter` (its executable), or an
/// error naming the version and listing the versions it has.
pub fn version_dir(spec: &str, adapter: &Path, version: &str) -> Result<PathBuf, String> {
    let dir = adapter.parent().unwrap_or(Path::new("."));
    let vd = dir.join("versions").join(version);
    if vd.is_dir() {
        return std::path::absolute(&vd).map_err(|e| format!("{}: {e}", vd.display()));
    }
    let have = versions(dir);
    let have = if have.is_empty() {
        "none".to_string()
    } else {
        have.join(", ")
    };
    Err(format!(
        "--client {spec}: the adapter has no version {version} (no folder {}; its versions: {have}) \
         (hint: pin one in {}/requirements.txt, every dependency with == and \
         its --hash, or package.json + package-lock.json; docs/adapters.md \"What a version \
         folder may hold\")",
        vd.display(),
        vd.display()
    ))
}

/// The file whose copy in `.built` marks a finished build.
fn pins(vd: &Path) -> Option<PathBuf> {
    ["requirements.txt", "package-lock.json"]
        .iter()
        .map(|f| vd.join(f))
        .find(|p| p.is_file())
}

/// Whether `vd`'s environment is built for its current pins: `.built`
/// holds the device and inode of the environment folder (`venv/` or
/// `node_modules/`) build-env made, a line `DEV:INO`, then a copy of the
/// pins. A folder that arrives with an environment and a marker (copied,
/// unpacked) has other inodes: it is rebuilt, never run as it came.
pub fn is_built(vd: &Path) -> bool {
    let Some(p) = pins(vd) else {
        return false;
    };
    match (built_marker(vd, &p), std::fs::read(vd.join(".built"))) {
        (Some(want), Ok(b)) => b == want,
        _ => false,
    }
}

/// The `.built` a finished build of `vd` with pins `p` leaves.
fn built_marker(vd: &Path, p: &Path) -> Option<Vec<u8>> {
    use std::os::unix::fs::MetadataExt;
    let env = if p.ends_with("requirements.txt") {
        "venv"
    } else {
        "node_modules"
    };
    let m = std::fs::symlink_metadata(vd.join(env)).ok()?;
    if !m.is_dir() {
        return None;
    }
    let mut b = format!("{}:{}\n", m.dev(), m.ino()).into_bytes();
    b.extend(std::fs::read(p).ok()?);
    Some(b)
}

/// The build script for the adapter at `adapter`: its own `build-env`,
/// else `lib/build-env` beside its folder, else in the first `clients/`
/// [`super::wire::client_dirs`] has one.
pub fn build_script(adapter: &Path) -> Option<PathBuf> {
    let dir = adapter.parent()?;
    let own = dir.join("build-env");
    if own.is_file() {
        return Some(own);
    }
    let mut places = vec![dir.parent().unwrap_or(Path::new(".")).to_path_buf()];
    places.extend(super::wire::client_dirs());
    places
        .into_iter()
        .map(|d| d.join("lib").join("build-env"))
        .find(|p| p.is_file())
}

/// What `build-env` reads or writes in a version folder: none may be a
/// symbolic link (it would read or write outside the folder).
const OWN: [&str; 8] = [
    "requirements.txt",
    "package.json",
    "package-lock.json",
    ".built",
    ".lock",
    "build.log",
    "venv",
    "node_modules",
];

/// Check that `vd` holds only data (docs/adapters.md, "What a version
/// folder may hold"): it and its `versions` folder are real folders, none
/// of [`OWN`] is a link, no `python` or `.npmrc` file, and its pins pass
/// [`pins::check`] or the npm checks. The error names the file and line.
pub fn check_folder(spec: &str, vd: &Path) -> Result<(), String> {
    let link_hint = "hint: a version folder, its `versions` folder and the files lockjaw \
                     builds there are real ones inside the adapter folder; copy the folder \
                     instead of linking it";
    let is_link = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_symlink());
    for p in [vd.parent().unwrap_or(vd), vd] {
        if is_link(p) {
            return Err(format!(
                "--client {spec}: {} is a symbolic link; lockjaw builds only in real \
                 folders ({link_hint})",
                p.display()
            ));
        }
    }
    if let Some(f) = OWN.iter().map(|f| vd.join(f)).find(|f| is_link(f)) {
        return Err(format!(
            "--client {spec}: {} is a symbolic link ({link_hint})",
            f.display()
        ));
    }
    for (f, hint) in [
        (
            "python",
            "the folder cannot choose the interpreter; set LOCKJAW_PYTHON to one, \
             default /usr/bin/python3",
        ),
        (
            ".npmrc",
            "npm's settings are the user's, not a version folder's",
        ),
    ] {
        let p = vd.join(f);
        if std::fs::symlink_metadata(&p).is_ok() {
            return Err(format!(
                "--client {spec}: {}: a version folder may not hold `{f}` (hint: remove it; {hint})",
                p.display()
            ));
        }
    }
    let read = |p: &Path| -> Result<String, String> {
        let m =
            std::fs::metadata(p).map_err(|e| format!("--client {spec}: {}: {e}", p.display()))?;
        if m.len() > pins::MAX_BYTES {
            return Err(format!(
                "--client {spec}: {}: {} bytes, more than a pin file's {} (hint: pin only \
                 the library and its dependencies)",
                p.display(),
                m.len(),
                pins::MAX_BYTES
            ));
        }
        std::fs::read_to_string(p).map_err(|e| format!("--client {spec}: {}: {e}", p.display()))
    };
    let req = vd.join("requirements.txt");
    let lock = vd.join("package-lock.json");
    let with_spec = |e: String| format!("--client {spec}: {e}");
    if req.is_file() {
        pins::check(&req, &read(&req)?).map_err(with_spec)?;
    } else if lock.is_file() {
        let manifest = vd.join("package.json");
        npm::check_manifest(&manifest, &read(&manifest)?).map_err(with_spec)?;
        npm::check_lock(&lock, &read(&lock)?).map_err(with_spec)?;
    } else {
        return Err(format!(
            "--client {spec}: {} has neither requirements.txt nor package-lock.json (hint: \
             docs/adapters.md \"What a version folder may hold\")",
            vd.display()
        ));
    }
    Ok(())
}

/// Build `vd`'s environment (idempotent: the script locks and skips a
/// finished build), after [`check_folder`]. The error names the spec, the
/// folder and the script's stderr; there is no fallback to another version.
pub fn build(spec: &str, adapter: &Path, vd: &Path) -> Result<(), String> {
    check_folder(spec, vd)?;
    let Some(script) = build_script(adapter) else {
        return Err(format!(
            "--client {spec}: no build-env script to build {} (looked for {}/build-env and \
             clients/lib/build-env) (hint: run from a lockjaw checkout, or set LOCKJAW_CLIENTS)",
            vd.display(),
            adapter.parent().unwrap_or(Path::new(".")).display()
        ));
    };
    let out = std::process::Command::new(&script)
        .arg(vd)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("--client {spec}: cannot run {}: {e}", script.display()))?;
    if out.status.success() {
        return Ok(());
    }
    let why = String::from_utf8_lossy(&out.stderr);
    let why = why.trim();
    Err(format!(
        "--client {spec}: cannot install version {} ({} {} {}): {} \
         (hint: fix the pins in {}; lockjaw never falls back to another version)",
        vd.file_name().unwrap_or_default().to_string_lossy(),
        script.display(),
        vd.display(),
        out.status,
        if why.is_empty() {
            "no reason on stderr"
        } else {
            why
        },
        vd.display()
    ))
}

/// The variables the adapter starts with: set ones, and `None` for ones it
/// must not inherit.
pub fn env(pin: &Pin, vd: Option<&Path>) -> Vec<(String, Option<String>)> {
    let s = |p: &Path| Some(p.display().to_string());
    match (pin, vd) {
        (Pin::Version(v), Some(vd)) => vec![
            (VERSION_VAR.into(), Some(v.clone())),
            (ENV_VAR.into(), s(vd)),
            (SOURCE_VAR.into(), None),
        ],
        (Pin::Source(p), _) => vec![
            (VERSION_VAR.into(), None),
            (ENV_VAR.into(), None),
            (SOURCE_VAR.into(), s(p)),
        ],
        _ => Vec::new(),
    }
}

/// The version an adapter was asked to run.
pub const VERSION_VAR: &str = "LOCKJAW_CLIENT_VERSION";
/// The absolute version folder whose environment it must use.
pub const ENV_VAR: &str = "LOCKJAW_CLIENT_ENV";
/// A library source tree it must put first on its library path.
pub const SOURCE_VAR: &str = "LOCKJAW_CLIENT_SOURCE";

/// An error when the handshake's version is not the one asked for.
pub fn check_version(spec: &str, asked: &str, library: &str, runs: &str) -> Result<(), String> {
    if asked == runs {
        return Ok(());
    }
    Err(format!(
        "--client {spec}: asked for {asked}, the adapter runs {library} {runs} \
         (hint: the adapter must use the environment in ${ENV_VAR}, and its hello_ok \
         name that version exactly; docs/adapters.md \"Library versions\")"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_into_name_and_pin() {
        let p = parse("python-redis-py").unwrap();
        assert_eq!(
            (p.adapter.as_str(), &p.pin),
            ("python-redis-py", &Pin::Default)
        );
        let p = parse("python-redis-py@3.0.0").unwrap();
        assert_eq!(p.adapter, "python-redis-py");
        assert_eq!(p.pin, Pin::Version("3.0.0".into()));
        assert_eq!(
            parse("x@5.0.0-beta.2+local").unwrap().pin,
            Pin::Version("5.0.0-beta.2+local".into())
        );
        // A path keeps its `@`.
        let p = parse("./odd@dir/adapter").unwrap();
        assert_eq!(
            (p.adapter.as_str(), &p.pin),
            ("./odd@dir/adapter", &Pin::Default)
        );
        let d = tempfile::tempdir().unwrap();
        let src = format!("x@{}", d.path().display());
        assert_eq!(
            parse(&src).unwrap().pin,
            Pin::Source(d.path().to_path_buf())
        );
    }

    #[test]
    fn bad_pins_are_refused_with_a_hint() {
        let e = parse("x@").unwrap_err();
        assert!(
            e.contains("nothing after `@`") && e.contains("NAME@VERSION"),
            "{e}"
        );
        let e = parse("x@1 2").unwrap_err();
        assert!(e.contains("not a version") && e.contains("x@./src"), "{e}");
        assert!(parse("x@..").unwrap_err().contains("not a version"));
        let e = parse("x@/no/such/tree").unwrap_err();
        assert!(e.contains("/no/such/tree is not a directory"), "{e}");
    }

    #[test]
    fn unknown_versions_list_the_ones_there() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("adapter");
        let e = version_dir("a@1.0", &a, "1.0").unwrap_err();
        assert!(
            e.contains("no version 1.0") && e.contains("its versions: none"),
            "{e}"
        );
        for v in ["2.0", "1.5"] {
            std::fs::create_dir_all(d.path().join("versions").join(v)).unwrap();
        }
        let e = version_dir("a@1.0", &a, "1.0").unwrap_err();
        assert!(
            e.contains("its versions: 1.5, 2.0") && e.contains("requirements.txt"),
            "{e}"
        );
        let vd = version_dir("a@1.5", &a, "1.5").unwrap();
        assert!(vd.is_absolute() && vd.ends_with("versions/1.5"));
        assert!(!is_built(&vd));
        std::fs::write(vd.join("requirements.txt"), "x==1\n").unwrap();
        std::fs::write(vd.join(".built"), "x==1\n").unwrap();
        assert!(!is_built(&vd), "a marker without the environment's inode");
        std::fs::create_dir(vd.join("venv")).unwrap();
        let marker = built_marker(&vd, &vd.join("requirements.txt")).unwrap();
        std::fs::write(vd.join(".built"), &marker).unwrap();
        assert!(is_built(&vd));
        std::fs::write(vd.join("requirements.txt"), "x==2\n").unwrap();
        assert!(!is_built(&vd), "changed pins need a new build");
        std::fs::write(vd.join("requirements.txt"), "x==1\n").unwrap();
        std::fs::create_dir(vd.join("venv.new")).unwrap();
        std::fs::remove_dir(vd.join("venv")).unwrap();
        std::fs::rename(vd.join("venv.new"), vd.join("venv")).unwrap();
        let same = std::fs::read(vd.join(".built")).unwrap() == marker;
        assert!(same && !is_built(&vd), "another venv/ than the one built");
    }

    #[test]
    fn failed_builds_name_the_version_and_the_reason() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("adapter");
        let script = d.path().join("build-env");
        std::fs::write(
            &script,
            "#!/bin/sh\necho \"no such package: nope==9\" >&2\nexit 1\n",
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let vd = d.path().join("versions").join("9");
        std::fs::create_dir_all(&vd).unwrap();
        std::fs::write(vd.join("requirements.txt"), "# nothing\n").unwrap();
        assert_eq!(build_script(&a), Some(script));
        let e = build("a@9", &a, &vd).unwrap_err();
        assert!(
            e.contains("cannot install version 9") && e.contains("no such package: nope==9"),
            "{e}"
        );
    }

    #[test]
    fn links_interpreters_and_bad_pins_are_refused_before_the_script() {
        use std::os::unix::fs::symlink;
        let d = tempfile::tempdir().unwrap();
        let versions = d.path().join("a").join("versions");
        let vd = versions.join("1");
        std::fs::create_dir_all(&vd).unwrap();
        let e = check_folder("a@1", &vd).unwrap_err();
        assert!(e.contains("has neither requirements.txt"), "{e}");
        std::fs::write(vd.join("requirements.txt"), "redis==3.0.0\n").unwrap();
        let e = check_folder("a@1", &vd).unwrap_err();
        assert!(
            e.contains("requirements.txt:1: redis==3.0.0 has no `--hash"),
            "{e}"
        );
        std::fs::write(vd.join("requirements.txt"), "# empty\n").unwrap();
        check_folder("a@1", &vd).unwrap();
        std::fs::write(vd.join("python"), "/bin/sh\n").unwrap();
        let e = check_folder("a@1", &vd).unwrap_err();
        assert!(
            e.contains("may not hold `python`") && e.contains("LOCKJAW_PYTHON"),
            "{e}"
        );
        std::fs::remove_file(vd.join("python")).unwrap();
        let outside = d.path().join("outside");
        std::fs::create_dir_all(outside.join("venv")).unwrap();
        symlink(&outside, versions.join("2")).unwrap();
        std::fs::write(outside.join("requirements.txt"), "# empty\n").unwrap();
        let e = check_folder("a@2", &versions.join("2")).unwrap_err();
        assert!(e.contains("versions/2 is a symbolic link"), "{e}");
        symlink(outside.join("venv"), vd.join("venv")).unwrap();
        let e = check_folder("a@1", &vd).unwrap_err();
        assert!(e.contains("versions/1/venv is a symbolic link"), "{e}");
        let linked = d.path().join("b").join("versions");
        std::fs::create_dir_all(linked.parent().unwrap()).unwrap();
        symlink(d.path().join("outside"), &linked).unwrap();
        let e = check_folder("b@x", &linked.join("x")).unwrap_err();
        assert!(e.contains("b/versions is a symbolic link"), "{e}");
    }

    #[test]
    fn shipped_version_folders_pass_the_checks() {
        let clients = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients");
        let mut n = 0;
        for a in std::fs::read_dir(&clients).unwrap().flatten() {
            for v in versions(&a.path()) {
                let vd = a.path().join("versions").join(&v);
                check_folder(&v, &vd).unwrap();
                n += 1;
            }
        }
        assert!(n >= 19, "{n} version folders");
    }

    #[test]
    fn versions_must_match_and_env_names_the_folder() {
        assert!(check_version("a@1", "1", "lib", "1").is_ok());
        let e = check_version("a@3.0.0", "3.0.0", "redis-py", "4.3.4").unwrap_err();
        assert!(
            e.contains("asked for 3.0.0, the adapter runs redis-py 4.3.4"),
            "{e}"
        );
        let vd = Path::new("/c/a/versions/1");
        let env = env(&Pin::Version("1".into()), Some(vd));
        assert!(env.contains(&(VERSION_VAR.into(), Some("1".into()))));
        assert!(env.contains(&(ENV_VAR.into(), Some("/c/a/versions/1".into()))));
        assert!(env.contains(&(SOURCE_VAR.into(), None)));
        assert!(super::env(&Pin::Default, None).is_empty());
    }
}
