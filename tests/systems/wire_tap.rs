//! `lockjaw run --tap-wire` on Redis: `wire.jsonl` holds the requests the
//! run's proxies framed, and `explore::learn` reads them back with the
//! history, each in its worker's phase. lockjaw's own client acquires and
//! releases with its scripts (`EVALSHA`); redis-py 3.0.0 (the pinned
//! environment, built by make deps or on first use) acquires with `SET`
//! and releases with its script. A release carries the owner's token.
//! The storage link is not framed: it shows as opaque. Each run 1.5 s
//! with two workers. With an external Toxiproxy the flag is refused. Ports: 43500..43599 (a free base found first).

use crate::run_util::*;
use lockjaw::explore::learn::{learn, Learned, LinkKind, Phase, RequestKind};
use lockjaw::toxiproxy::tap::{self, Dir};
use std::collections::BTreeSet;
use std::path::Path;

fn tapped(name: &str, tmp: &Path, client: &str) -> (Run, Learned) {
    let args = [
        "--system",
        "redis",
        "--client",
        client,
        "--workload",
        "fenced-counter",
        "--concurrency",
        "2",
        "--time-limit",
        "1.5",
        "--tap-wire",
    ];
    let r = run_local(name, tmp, 43500, &args);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let l = learn(std::slice::from_ref(&r.dir)).unwrap();
    assert!(l.anomalies.is_empty(), "{:?}", l.anomalies);
    assert!(
        l.rtt_ms.0 > 0.0 && l.rtt_ms.1 >= l.rtt_ms.0,
        "{:?}",
        l.rtt_ms
    );
    assert_eq!(l.lease_ms, 2000);
    let storage: Vec<_> = l.opaque.iter().map(|o| (o.link, o.why.as_str())).collect();
    assert_eq!(
        storage,
        [(LinkKind::Storage, "JSON lines (lockjaw's storage)")],
        "{:?}",
        l.kinds
    );
    (r, l)
}

/// The lock-link kinds named `command` sent only in `phase`.
fn only_in<'a>(l: &'a Learned, command: &str, phase: Phase) -> Vec<&'a RequestKind> {
    let want: BTreeSet<Phase> = [phase].into();
    l.kinds
        .iter()
        .filter(|k| k.link == LinkKind::Lock && k.command == command && k.phases == want)
        .collect()
}

/// Some request of the kind with `sha1` carried its worker's token.
fn token_carried(r: &Run, sha1: Option<&str>) -> bool {
    let wire = tap::read(&r.dir.join(tap::FILE)).unwrap();
    wire.iter()
        .any(|w| w.dir == Dir::Request && w.sha1.as_deref() == sha1 && w.token)
}

#[test]
fn the_builtin_client_is_seen_acquiring_and_releasing_with_its_scripts() {
    let tmp = tempfile::tempdir().unwrap();
    let (r, l) = tapped("tap-builtin", tmp.path(), "builtin");
    let acquire = only_in(&l, "EVALSHA", Phase::Acquire);
    assert!(
        acquire
            .iter()
            .any(|k| k.words.as_deref().is_some_and(|w| w.contains("'SET'"))),
        "{:?}",
        l.kinds
    );
    let release = only_in(&l, "EVALSHA", Phase::Release);
    assert_eq!(release.len(), 1, "{:?}", l.kinds);
    assert!(
        token_carried(&r, release[0].sha1.as_deref()),
        "{:?}",
        release
    );
}

#[test]
fn redis_py_is_seen_acquiring_with_set_and_releasing_with_its_script() {
    let tmp = tempfile::tempdir().unwrap();
    let (r, l) = tapped("tap-redis-py", tmp.path(), "python-redis-py@3.0.0");
    let set = only_in(&l, "SET", Phase::Acquire);
    assert_eq!(set.len(), 1, "{:?}", l.kinds);
    let release = only_in(&l, "EVALSHA", Phase::Release);
    assert_eq!(release.len(), 1, "{:?}", l.kinds);
    assert!(
        release[0]
            .words
            .as_deref()
            .is_some_and(|w| w.contains("redis.call('get', KEYS[1])")),
        "{:?}",
        release
    );
    assert!(
        token_carried(&r, release[0].sha1.as_deref()),
        "{:?}",
        release
    );
    assert_eq!(
        l.adapter_renewals, 0,
        "redis-py 3.0.0 renews nothing by itself"
    );
}

#[test]
fn tapping_an_external_toxiproxy_is_refused_before_anything_starts() {
    let e = refused(&[
        "--system",
        "redis",
        "--tap-wire",
        "--toxiproxy",
        "http://127.0.0.1:1",
    ]);
    assert!(
        e.contains("--tap-wire with --toxiproxy http://127.0.0.1:1")
            && e.contains("hint: leave out --toxiproxy"),
        "{e}"
    );
}
