//! The `python-redis-py-asyncio` adapter (redis-py's asyncio Lock) with its
//! pinned versions 7.1.1 and 7.2.0 (`clients/python-redis-py-asyncio/
//! versions/`, the two sides of redis-py issue 3847): a fault-free run of
//! each is clean and names the exact version. `#[ignore]`d (make
//! test-long): building the two environments takes a while the first time.
//!
//! Ports: the first free 10-port base from 42960.

use crate::run_util::*;
use std::path::Path;

#[test]
#[ignore = "make test-long: builds two redis-py environments, two 3 s runs"]
fn redis_py_asyncio_versions_run_clean() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for version in ["7.1.1", "7.2.0"] {
        let tmp = tempfile::tempdir().unwrap();
        let env = root
            .join("clients/python-redis-py-asyncio/versions")
            .join(version);
        let built = std::process::Command::new(root.join("clients/lib/build-env"))
            .arg(&env)
            .status()
            .unwrap();
        assert!(built.success(), "cannot build {}", env.display());
        // The versions contract set by a wrapper, not in this process.
        let wrapper = tmp.path().join("adapter");
        std::fs::write(
            &wrapper,
            format!(
                "#!/bin/sh\nexport LOCKJAW_CLIENT_VERSION={version} LOCKJAW_CLIENT_ENV={}\nexec {}\n",
                env.display(),
                root.join("clients/python-redis-py-asyncio/adapter").display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
        let r = run_local(
            &format!("asyncio-{version}"),
            tmp.path(),
            42960,
            &[
                "--system",
                "redis",
                "--client",
                wrapper.to_str().unwrap(),
                "--nemesis",
                "none",
                "--hold-ms",
                "50",
                "--time-limit",
                "3",
            ],
        );
        assert_eq!(r.results()["valid"], true, "{}", r.stdout);
        assert_eq!(r.code, 0);
        let text = std::fs::read_to_string(r.dir.join("history.jsonl")).unwrap();
        let meta: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(meta["client"]["version"], version, "{meta}");
        assert_nothing_left(&r.dir);
    }
}
