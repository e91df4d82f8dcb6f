//! `--storage mariadb`: the protected counter in an InnoDB table of a
//! MariaDB server the run starts (one transaction per request in a
//! procedure, `seq` drawn after the row lock), reached through each
//! worker's proxy. A paused Redis holder's late write bounces off the SQL
//! fence rule with fencing on, as with lockjaw's own storage. Ports: Redis
//! in 44800-44899; the MariaDB server takes a port the run reserves itself.

use crate::run_util::*;
use lockjaw::history::OpType;

#[test]
fn pause_holder_with_fencing_bounces_off_the_mariadb_fence_rule() {
    let tmp = tempfile::tempdir().unwrap();
    let args = [
        "--system",
        "redis",
        "--storage",
        "mariadb",
        "--workload",
        "fenced-counter",
        "--nemesis",
        "pause-holder",
        "--fencing",
        "on",
        "--time-limit",
        "4",
        "--ttl-ms",
        "1000",
        "--seed",
        "11",
    ];
    let r = run_local("my-on", tmp.path(), 44800, &args);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("could not undo"), "{}", r.stderr);
    assert_nothing_left(&r.dir);
    let ops = r.history().1;
    let (acked, info, stale, last) = storage_facts(&ops);
    assert!(acked > 5, "the workers made progress");
    assert_eq!(stale, 0, "no stale write accepted");
    let bounced = ops
        .iter()
        .filter(|o| o.kind == OpType::Fail && o.error.as_deref() == Some("stale-fence"))
        .count();
    assert!(bounced > 0, "the paused holder's write bounced");
    let last = last.expect("a final read");
    assert!(last >= acked as i64 && last <= (acked + info) as i64);
    assert_eq!(r.lock()["resource"]["valid"], true, "{}", r.lock());
    let run_id = r.run_json()["run_id"].as_str().unwrap().to_string();
    let group = lockjaw::cluster::mariadb::storage_group(&run_id);
    let data = lockjaw::cluster::tmpdata::dir_for(&group, "my1");
    assert!(!data.exists(), "{} is left", data.display());
}
