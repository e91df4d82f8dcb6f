//! `--client NAME@VERSION` (docs/adapters.md, "Library versions"): a
//! version the adapter has no folder for, one that cannot be installed and
//! one whose adapter runs another version are refused (exit 3, naming the
//! version and the reason) before anything starts; and the bug row
//! sherlock-66 with the real library, one short run per side: sherlock
//! 0.4.0's renewal deletes the lock (two holders), 0.4.1's does not.
//! Ports (run_util::run_local): 41100 and 41200.

use crate::run_util::*;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// An adapter `fake` in a clients folder of its own: it answers the
/// handshake with the version lockjaw asked for, except 0.5 (it runs 0.4
/// then). Versions: 0.5 (built: its `.built` marker matches its pins), 1.0
/// (Python) and 1.1 (Node), each pinning a package that does not exist.
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
    std::fs::write(v.join("0.5").join(".built"), "# nothing\n").unwrap();
    std::fs::create_dir_all(v.join("1.0")).unwrap();
    std::fs::write(
        v.join("1.0").join("requirements.txt"),
        "lockjaw-no-such-package-b7f3==1.0\n",
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
            r#"{{"name":"fake","version":"1.1.0","lockfileVersion":3,"requires":true,"packages":{{"":{{"name":"fake","version":"1.1.0","dependencies":{{{dep}}}}},"node_modules/lockjaw-no-such-package-b7f3":{{"version":"1.0.0","resolved":"{tgz}"}}}}}}"#
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
