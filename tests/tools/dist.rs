//! `make dist`'s tarball (scripts/make-dist.sh) unpacked in an empty
//! directory and run from another one, with no build and no checkout in
//! sight: `lockjaw run` against a real redis-server, `bugs list`, `bugs run`
//! of a row, and a nemesis and an adapter that only the tarball's folders
//! hold. Ports 38600–38619, and 38640–38659 for the long test.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The tarball of this build's binary, unpacked under `into`: its `bin/lockjaw`.
fn unpacked(into: &Path) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = into.join("out");
    let o = Command::new(root.join("scripts/make-dist.sh"))
        .env("DIST_BIN", env!("CARGO_BIN_EXE_lockjaw"))
        .env("DIST_DIR", &out)
        .env("DIST_GZIP", "1")
        .output()
        .expect("scripts/make-dist.sh");
    assert!(o.status.success(), "make-dist: {}", text(&o));
    let tarball = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
    let name = tarball.file_name().unwrap().to_string_lossy().to_string();
    assert!(
        name.starts_with(&format!("lockjaw-{}-", env!("CARGO_PKG_VERSION")))
            && name.ends_with(".tar.gz"),
        "tarball name {name}"
    );
    let list = Command::new("tar")
        .arg("-tzf")
        .arg(&tarball)
        .output()
        .unwrap();
    let list = String::from_utf8_lossy(&list.stdout).to_string();
    for want in [
        "/bin/lockjaw",
        "/bugs/redlock-169.toml",
        "/workloads/fenced-counter.toml",
        "/nemesis/delay-grant-late.toml",
        "/clients/lib/build-env",
        "/clients/python-redis-py/adapter",
        "/scripts/install-deps.sh",
        "/scripts/ci-shard.sh",
    ] {
        assert!(
            list.lines().any(|l| l.ends_with(want)),
            "no {want} in the tarball:\n{list}"
        );
    }
    for never in [
        "/venv/",
        "/node_modules/",
        "/classes/",
        "/__pycache__/",
        "/.built",
    ] {
        assert!(!list.contains(never), "{never} in the tarball:\n{list}");
    }
    // As action.yml installs it.
    let unpack = into.join("unpacked");
    let o = Command::new(root.join("scripts/install-dist.sh"))
        .arg(&tarball)
        .arg(&unpack)
        .output()
        .unwrap();
    assert!(o.status.success(), "install-dist: {}", text(&o));
    std::fs::remove_dir_all(&out).unwrap();
    let top = name.trim_end_matches(".tar.gz");
    let home = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
    assert_eq!(
        home,
        unpack.canonicalize().unwrap().join(top),
        "{}",
        text(&o)
    );
    home.join("bin/lockjaw")
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\n{}\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `bin` run in `cwd` with no LOCKJAW_* variable that could point at the checkout.
fn run(bin: &Path, cwd: &Path, args: &[&str]) -> Output {
    let mut c = Command::new(bin);
    c.current_dir(cwd).args(args);
    for (k, _) in std::env::vars() {
        if k.starts_with("LOCKJAW_") && k != "LOCKJAW_LOG" {
            c.env_remove(k);
        }
    }
    c.output().unwrap()
}

/// The tarball unpacked under `root`, and an empty directory beside it
/// to run from: (the binary, that directory).
fn unpacked_elsewhere(root: &Path) -> (PathBuf, PathBuf) {
    let bin = unpacked(root);
    let cwd = root.join("elsewhere");
    std::fs::create_dir(&cwd).unwrap();
    (bin, cwd)
}

#[test]
fn the_unpacked_tarball_runs_from_any_directory_without_a_build() {
    let tmp = tempfile::tempdir().unwrap();
    let (bin, cwd) = unpacked_elsewhere(tmp.path());

    let o = run(
        &bin,
        &cwd,
        &[
            "run",
            "--system",
            "redis",
            "--workload",
            "fenced-counter",
            "--time-limit",
            "2",
            "--base-port",
            "38600",
            "--out",
            "r1",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "lockjaw run: {}", text(&o));
    assert!(
        cwd.join("r1/history.jsonl").is_file(),
        "no history: {}",
        text(&o)
    );

    let o = run(&bin, &cwd, &["bugs", "list"]);
    assert!(o.status.success(), "bugs list: {}", text(&o));
    let listed = String::from_utf8_lossy(&o.stdout);
    for id in ["redlock-169", "etcd-11456", "redis-py-818"] {
        assert!(listed.contains(id), "bugs list lacks {id}: {}", text(&o));
    }
    // A not-reproduced row loads from the tarball's bugs/ and exits 0 with
    // its reason, without running (every runnable row pins a library
    // version that build-env would install first).
    let o = run(
        &bin,
        &cwd,
        &["bugs", "run", "etcd-11456", "--base-port", "38610"],
    );
    assert_eq!(o.status.code(), Some(0), "bugs run: {}", text(&o));
    assert!(
        text(&o).contains("no buggy side to replay"),
        "bugs run: {}",
        text(&o)
    );

    // delay-grant-late is no built-in nemesis and python-redis-py's adapter
    // (Debian's python3-redis) lives only in the tarball's folders.
    let o = run(
        &bin,
        &cwd,
        &[
            "run",
            "--system",
            "redis",
            "--client",
            "python-redis-py",
            "--workload",
            "lock",
            "--nemesis",
            "delay-grant-late",
            "--time-limit",
            "2",
            "--base-port",
            "38615",
            "--out",
            "r2",
        ],
    );
    assert!(
        matches!(o.status.code(), Some(0) | Some(1)),
        "run with the tarball's adapter and nemesis: {}",
        text(&o)
    );
    let params = std::fs::read_to_string(cwd.join("r2/nemesis.json")).unwrap_or_default();
    assert!(
        params.contains("delay-grant-late"),
        "nemesis.json: {params}\n{}",
        text(&o)
    );
    assert!(
        std::fs::read_dir(&cwd).unwrap().count() == 2,
        "only r1 and r2 were written in the working directory"
    );
}

/// A replayable row's buggy side from the unpacked tarball: build-env
/// installs the pinned library (redis 2.10.6 from PyPI) into the tarball's
/// own clients/ on first use, then the run goes as in a checkout. About
/// 30 s, most of it the install: `make test-long`.
#[test]
#[ignore]
fn the_unpacked_tarball_replays_a_bug_row() {
    let tmp = tempfile::tempdir().unwrap();
    let (bin, cwd) = unpacked_elsewhere(tmp.path());
    let o = run(
        &bin,
        &cwd,
        &[
            "bugs",
            "run",
            "redis-py-818",
            "--version",
            "buggy",
            "--runs",
            "1",
            "--base-port",
            "38640",
        ],
    );
    // Whether one run lands its injection is the row's business (exit 1
    // or 2); that the side ran, counted, is the tarball's.
    assert_ne!(o.status.code(), Some(3), "bugs run: {}", text(&o));
    assert!(
        text(&o).contains("runs: 1 (1 counted, 0 failed"),
        "bugs run: {}",
        text(&o)
    );
    let built = bin
        .parent()
        .unwrap()
        .join("../clients/python-redis-py-pipeline/versions/2.10.6/venv");
    assert!(built.is_dir(), "no {}", built.display());
}
