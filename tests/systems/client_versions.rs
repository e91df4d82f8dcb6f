//! `--client NAME@VERSION` (docs/adapters.md, "Library versions"): a
//! version the adapter has no folder for, one that cannot be installed and
//! one whose adapter runs another version are refused (exit 3, naming the
//! version and the reason) before anything starts; and the bug row
//! sherlock-66 with the real library, one short run per side: sherlock
//! 0.4.0's renewal deletes the lock (two holders), 0.4.1's does not. A
//! hostile version folder (a path pin whose setup.py would run, a folder
//! linked to another's) is refused by lockjaw and by build-env run by hand,
//! and nothing runs or is deleted.
//! Ports (run_util::run_local): 41100 and 41200.

use crate::run_util::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// An adapter `fake` in a clients folder of its own: it answers the
/// handshake with the version lockjaw asked for, except 0.5 (it runs 0.4
/// then). Versions: 0.5 (built: its `.built` marker names its `venv/` and
/// matches its pins), 1.0
/// (Python) and 1.1 (Node), each pinning (with a hash or an integrity) a
/// package that does not exist.
fn fake_clients(root: &Path) -> PathBuf {
    let clients = root.join("clients");
    let a = clients.join("fake").join("adapter");
    std::fs::create_dir_all(a.parent().unwrap()).unwrap();
    std::fs::write(
        &a,
        "#!/usr/bin/python3\nimport json, os, sys\nsys.stdin.readline()\n\
         v = os.environ.get('LOCKJAW_CLIENT_VERSION', 'none')\n\
         print(json.dumps({'type': 'hello_ok', 'library': 'fake', \
         'version': '0.4' if v == '0.5' else v, 'fence': False, 'lease': 'acquire', \
         'renewals': 'none'}), flush=True)\nsys.stdin.read()\n",
    )
    .unwrap();
    std::fs::set_permissions(&a, std::fs::Permissions::from_mode(0o755)).unwrap();
    let v = clients.join("fake").join("versions");
    std::fs::create_dir_all(v.join("0.5")).unwrap();
    std::fs::write(v.join("0.5").join("requirements.txt"), "# nothing\n").unwrap();
    std::fs::create_dir_all(v.join("0.5").join("venv")).unwrap();
    let venv = std::fs::metadata(v.join("0.5").join("venv")).unwrap();
    std::fs::write(
        v.join("0.5").join(".built"),
        format!("{}:{}\n# nothing\n", venv.dev(), venv.ino()),
    )
    .unwrap();
    std::fs::create_dir_all(v.join("1.0")).unwrap();
    std::fs::write(
        v.join("1.0").join("requirements.txt"),
        format!(
            "lockjaw-no-such-package-b7f3==1.0 --hash=sha256:{}\n",
            "0".repeat(64)
        ),
    )
    .unwrap();
    let node = v.join("1.1");
    std::fs::create_dir_all(&node).unwrap();
    let dep = r#""lockjaw-no-such-package-b7f3":"1.0.0""#;
    std::fs::write(
        node.join("package.json"),
        format!(r#"{{"name":"fake","version":"1.1.0","dependencies":{{{dep}}}}}"#),
    )
    .unwrap();
    let tgz = "https://registry.npmjs.org/lockjaw-no-such-package-b7f3/-/lockjaw-no-such-package-b7f3-1.0.0.tgz";
    std::fs::write(
        node.join("package-lock.json"),
        format!(
            r#"{{"name":"fake","version":"1.1.0","lockfileVersion":3,"requires":true,"packages":{{"":{{"name":"fake","version":"1.1.0","dependencies":{{{dep}}}}},"node_modules/lockjaw-no-such-package-b7f3":{{"version":"1.0.0","resolved":"{tgz}","integrity":"sha512-{}=="}}}}}}"#,
            "A".repeat(86)
        ),
    )
    .unwrap();
    clients
}

/// `lockjaw run --client SPEC` with `LOCKJAW_CLIENTS=clients`: exit 3,
/// nothing started (no run directory); its stderr.
fn refused_client(clients: &Path, spec: &str) -> String {
    let mut cmd = lockjaw();
    cmd.current_dir(repo("")).env("LOCKJAW_CLIENTS", clients);
    let err = refused_by(
        cmd,
        &["--system", "redis", "--nemesis", "none", "--client", spec],
    );
    eprintln!("[{spec}] {err}");
    err
}

/// A version that does not exist, one that cannot be installed (npm: a
/// second; pip's venv takes longer, below), one whose adapter runs another.
#[test]
fn unknown_uninstallable_and_mismatched_versions_are_refused() {
    let root = tempfile::tempdir().unwrap();
    let clients = fake_clients(root.path());
    let e = refused_client(&clients, "fake@2.0");
    assert!(
        e.contains("fake@2.0: the adapter has no version 2.0")
            && e.contains("its versions: 0.5, 1.0, 1.1"),
        "{e}"
    );
    let e = refused_client(&clients, "fake@1.1");
    assert!(
        e.contains("fake@1.1: cannot install version 1.1")
            && e.contains("lockjaw-no-such-package-b7f3")
            && e.contains("never falls back"),
        "{e}"
    );
    let built = clients.join("fake/versions/1.1/node_modules");
    assert!(!built.exists(), "a failed build leaves no environment");
    let e = refused_client(&clients, "fake@0.5");
    assert!(
        e.contains("asked for 0.5, the adapter runs fake 0.4"),
        "{e}"
    );
    let e = refused_client(&clients, "fake@");
    assert!(e.contains("nothing after `@`"), "{e}");
}

/// The Python side of an uninstallable version: pip finds no such package.
#[test]
#[ignore = "make test-long: a venv is made before pip fails (about 10 s)"]
fn an_uninstallable_python_version_is_refused_with_pips_reason() {
    let root = tempfile::tempdir().unwrap();
    let clients = fake_clients(root.path());
    let e = refused_client(&clients, "fake@1.0");
    assert!(
        e.contains("fake@1.0: cannot install version 1.0")
            && e.contains("No matching distribution found for lockjaw-no-such-package-b7f3")
            && e.contains("never falls back"),
        "{e}"
    );
    let venv = clients.join("fake/versions/1.0/venv");
    assert!(!venv.exists(), "a failed build leaves no environment");
}

/// Hostile version folders: 6.0 pins a local path whose setup.py would
/// write a marker; 7.0 is a link to a folder whose `venv/` must survive;
/// 8.0's `venv` is a link to that `venv/`. lockjaw refuses each (exit 3,
/// naming the file, line or link), and so does build-env run by hand; no
/// marker, the linked `venv/` intact.
#[test]
fn hostile_version_folders_are_refused_and_nothing_runs_or_is_deleted() {
    use std::os::unix::fs::symlink;
    let root = tempfile::tempdir().unwrap();
    let clients = fake_clients(root.path());
    let marker = root.path().join("setup-py-ran");
    let evil = root.path().join("evil");
    std::fs::create_dir_all(&evil).unwrap();
    std::fs::write(
        evil.join("setup.py"),
        format!(
            "open({:?}, 'w').write('ran')\n",
            marker.display().to_string()
        ),
    )
    .unwrap();
    let v = clients.join("fake/versions");
    std::fs::create_dir_all(v.join("6.0")).unwrap();
    std::fs::write(
        v.join("6.0/requirements.txt"),
        format!("# looks harmless\n{}\n", evil.display()),
    )
    .unwrap();
    let target = root.path().join("someone-elses");
    std::fs::create_dir_all(target.join("venv")).unwrap();
    std::fs::write(target.join("venv/keep"), "mine").unwrap();
    std::fs::write(target.join("requirements.txt"), "# nothing\n").unwrap();
    symlink(&target, v.join("7.0")).unwrap();
    std::fs::create_dir_all(v.join("8.0")).unwrap();
    std::fs::write(v.join("8.0/requirements.txt"), "# nothing\n").unwrap();
    symlink(target.join("venv"), v.join("8.0/venv")).unwrap();

    let e = refused_client(&clients, "fake@6.0");
    assert!(
        e.contains("6.0/requirements.txt:2: ") && e.contains("is a URL or a path"),
        "{e}"
    );
    let e = refused_client(&clients, "fake@7.0");
    assert!(e.contains("versions/7.0 is a symbolic link"), "{e}");
    let e = refused_client(&clients, "fake@8.0");
    assert!(e.contains("versions/8.0/venv is a symbolic link"), "{e}");
    for version in ["6.0", "7.0", "8.0"] {
        let out = std::process::Command::new(repo("clients/lib/build-env"))
            .arg(v.join(version))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "build-env {version}: {err}");
        assert!(err.starts_with("refused: "), "{err}");
    }
    assert!(!marker.exists(), "setup.py ran");
    assert_eq!(
        std::fs::read_to_string(target.join("venv/keep")).unwrap(),
        "mine"
    );
    assert!(!v.join("6.0/venv").exists() && !target.join(".built").exists());
}

/// The environment of `clients/python-sherlock/versions/VERSION` exists.
fn need_sherlock(version: &str) {
    let py = repo(&format!(
        "clients/python-sherlock/versions/{version}/venv/bin/python"
    ));
    assert!(
        py.exists(),
        "{} is missing: run scripts/install-deps.sh (make deps) first",
        py.display()
    );
}

/// bugs/sherlock-66.toml, one short run per side: the buggy release's
/// renewal deletes the key and another worker is granted the lock inside
/// the lease the renewal reported (the safety check); the fixed release
/// shows none.
#[test]
fn sherlock_66_renewal_deletes_the_lock_in_0_4_0_not_in_0_4_1() {
    let tmp = tempfile::tempdir().unwrap();
    for (version, block, buggy) in [("0.4.0", 41100, true), ("0.4.1", 41200, false)] {
        need_sherlock(version);
        let spec = format!("python-sherlock@{version}");
        let r = run_local(
            &spec,
            tmp.path(),
            block,
            &[
                "--system",
                "redis",
                "--client",
                &spec,
                "--workload",
                "lock-renewing",
                "--nemesis",
                "none",
                "--fencing",
                "off",
                "--time-limit",
                "3",
            ],
        );
        let run = r.run_json();
        assert_eq!(run["client"], spec.as_str(), "run.json names the spec");
        assert_eq!(run["client_library"], format!("sherlock {version}"));
        let (meta, ops) = r.history();
        let client = meta_param(&meta, "client");
        assert_eq!(client["version"], version, "{client}");
        let renewed = ops
            .iter()
            .filter(|o| o.f == "renew" && o.kind == lockjaw::history::OpType::Ok)
            .count();
        assert!(renewed > 0, "{spec}: the holders renewed");
        let safety = &r.lock()["checks"]["safety"];
        if buggy {
            assert_eq!(r.code, 1, "{spec}");
            assert!(safety["count"].as_u64().unwrap_or(0) > 0, "{safety}");
        } else {
            assert_eq!(r.code, 0, "{spec}");
            assert_eq!(safety["count"], 0, "{safety}");
            assert_eq!(r.lock()["service"]["valid"], true);
        }
        let summary = std::fs::read_to_string(r.dir.join("summary.md")).unwrap();
        assert!(
            summary.contains(&format!("--client {spec}")),
            "reproduce line"
        );
    }
}
