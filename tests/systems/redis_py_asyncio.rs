//! The `python-redis-py-asyncio` adapter (redis-py's asyncio Lock) with its
//! pinned versions 7.1.1 and 7.2.0 (`clients/python-redis-py-asyncio/
//! versions/`, the two sides of redis-py issue 3847): a fault-free run of
//! each, `--client python-redis-py-asyncio@VERSION`, is clean and names the
//! exact version. `#[ignore]`d (make test-long): lockjaw builds the two
//! environments on first use, which takes a while.
//!
//! Ports: the first free 10-port base from 42960.

use crate::run_util::*;

#[test]
#[ignore = "make test-long: builds two redis-py environments, two 3 s runs"]
fn redis_py_asyncio_versions_run_clean() {
    for version in ["7.1.1", "7.2.0"] {
        let tmp = tempfile::tempdir().unwrap();
        let client = format!("python-redis-py-asyncio@{version}");
        let r = run_local(
            &format!("asyncio-{version}"),
            tmp.path(),
            42960,
            &[
                "--system",
                "redis",
                "--client",
                &client,
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
        let meta = meta_json(&r);
        assert_eq!(meta["client"]["version"], version, "{meta}");
        assert_nothing_left(&r.dir);
    }
}
