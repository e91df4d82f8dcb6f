//! The wire as the lease source of a library that renews by itself
//! (`runner::wire_lease`), with `tests/adapters/renewing-redis/`: an
//! adapter (`renewals = "all"`) whose background thread renews each grant
//! with a token-checked script and reports each renewal as a `renewed`
//! event. In a tapped run lockjaw sends no renewal of its own, records the
//! events as reports, and extends the leases by the renewals the wire
//! carried. The same adapter lying (`RENEWING_REDIS_LIE=1`: events for
//! renewals it never sent) is not believed: the run stays valid, with the
//! disagreement reported, while the same history with the events credited
//! blames Redis for two holders. Two 3 s runs of two workers. Ports:
//! 41300..41499 (a free base found first).

use crate::run_util::*;
use lockjaw::history::{OpType, Process};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn adapter() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/adapters/renewing-redis/adapter")
}

/// A tapped `lock-renewing` run of `client` (400 ms leases held 1.2 s).
fn renewing_run(name: &str, tmp: &Path, block: u16, client: &Path) -> Run {
    let args = [
        "--system",
        "redis",
        "--client",
        client.to_str().unwrap(),
        "--workload",
        "lock-renewing",
        "--ttl-ms",
        "400",
        "--hold-ms",
        "1200",
        "--concurrency",
        "2",
        "--time-limit",
        "3",
        "--tap-wire",
    ];
    run_local(name, tmp, block, &args)
}

fn renewals(r: &Run) -> Value {
    json_file(&r.dir.join("renewals.json"))
}

/// The ok `renew` ops of processes whose name ends in `suffix`.
fn renews(r: &Run, suffix: &str) -> usize {
    r.history()
        .1
        .iter()
        .filter(|o| o.kind == OpType::Ok && o.f == "renew")
        .filter(|o| matches!(&o.process, Process::Named(n) if n.ends_with(suffix)))
        .count()
}

#[test]
fn the_wire_extends_the_lease_of_a_library_that_renews_itself() {
    let tmp = tempfile::tempdir().unwrap();
    let r = renewing_run("wire-lease", tmp.path(), 41300, &adapter());
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let w = renewals(&r);
    assert_eq!(w["source"], "wire", "{w}");
    let seen = w["check"]["wire"].as_u64().unwrap();
    assert!(seen >= 1, "the library renewed on the wire: {w}");
    assert_eq!(w["appended"].as_u64(), Some(seen), "{w}");
    // Its renewals are the wire's; the events are reports; lockjaw's own
    // workers renewed nothing.
    assert_eq!(renews(&r, "-wire") as u64, seen);
    assert_eq!(renews(&r, "-adapter"), 0);
    assert_eq!(renews(&r, "-lease"), 0);
    let (meta, ops) = r.history();
    assert!(ops.iter().any(|o| o.f == "renewed"));
    let client = &meta.unwrap().params["client"];
    assert_eq!(client["lease_source"], "wire", "{client}");
    assert_eq!(client["lockjaw_renews"], false, "{client}");
    assert!(r.stdout.contains("renewal(s) on the wire"), "{}", r.stdout);
}

#[test]
fn renewals_an_adapter_reports_but_never_sent_extend_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let liar = tmp.path().join("liar");
    std::fs::write(
        &liar,
        format!(
            "#!/bin/sh\nRENEWING_REDIS_LIE=1 exec {}\n",
            adapter().display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&liar, std::fs::Permissions::from_mode(0o755)).unwrap();
    let r = renewing_run("wire-lease-lie", tmp.path(), 41400, &liar);
    let w = renewals(&r);
    assert_eq!(w["source"], "wire", "{w}");
    assert_eq!(w["check"]["wire"], 0, "{w}");
    let unseen = w["check"]["events_unseen"].as_array().unwrap().len();
    assert!(unseen >= 1, "{w}");
    assert!(
        r.stdout.contains("the adapter and the wire disagree"),
        "{}",
        r.stdout
    );
    // Redis let each lease expire, and the next grant came after it.
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.lock()["service"]["valid"], true);
    // Credited, the same events would blame Redis: the leases they claim
    // overlap the next grants (three 1.2 s holds of 400 ms leases in 3 s).
    let text = std::fs::read_to_string(r.dir.join("history.jsonl")).unwrap();
    let believed = tmp.path().join("believed.jsonl");
    std::fs::write(
        &believed,
        text.replace("\"f\":\"renewed\"", "\"f\":\"renew\""),
    )
    .unwrap();
    let c = lockjaw()
        .args(["check", believed.to_str().unwrap()])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&c.stdout);
    assert_eq!(c.status.code(), Some(1), "{out}");
    assert!(out.contains("two valid leases"), "{out}");
}
