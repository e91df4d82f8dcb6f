//! The proof's judgement on made-up discoveries and answers.

use super::*;
use crate::remote::attach::{Facts, ProcStamp};
use std::net::SocketAddr;

fn found(pids: &[u32]) -> Found {
    Found {
        procs: pids
            .iter()
            .map(|p| ProcStamp {
                pid: *p,
                start: 1000 + u64::from(*p),
                cgroup: "0::/x".into(),
            })
            .collect(),
        unit: None,
        facts: Facts {
            same_pid_ns: true,
            same_time_ns: true,
            boot: Some((1_700_000_000, 100)),
            cmdline: vec![],
            listening: Listening::NotAsked,
        },
    }
}

const AT: &str = "10.0.0.3:6379";

fn held(pid: u32) -> Listening {
    Listening::Held {
        pid,
        at: AT.parse::<SocketAddr>().unwrap(),
    }
}

#[test]
fn redis_names_its_pid_and_a_contradiction_refuses_whatever_the_socket() {
    let f = found(&[4711, 4712]);
    let a = answer(AT, &f, &Ok(Some(ServerSays::Pid(4711))), None);
    let p = judge(AT, &f, a, &held(4711)).unwrap();
    assert_eq!(
        p.to_string(),
        "pid 4711: Redis process_id 4711, listening on 10.0.0.3:6379"
    );
    let a = answer(AT, &f, &Ok(Some(ServerSays::Pid(999))), None);
    let e = judge(AT, &f, a, &held(4711)).unwrap_err();
    assert!(
        e.contains("process_id is 999") && e.contains("refused"),
        "{e}"
    );
    // Another pid namespace: the number means nothing; the socket decides.
    let mut g = found(&[4711]);
    g.facts.same_pid_ns = false;
    let a = answer(AT, &g, &Ok(Some(ServerSays::Pid(1))), None);
    assert!(matches!(a, Answer::Unusable(_)), "{a:?}");
    let p = judge(AT, &g, a, &held(4711)).unwrap();
    assert!(p.answer.is_none() && p.no_answer.is_some(), "{p:?}");
}

#[test]
fn etcd_by_its_start_time_zookeeper_by_its_id_and_data_dir() {
    let f = found(&[50]);
    // Stamp start 1050 ticks at 100 Hz after boot: 1_700_000_010.5.
    let says = |s: f64| {
        Ok(Some(ServerSays::Etcd {
            started: s,
            member: "4bd1".into(),
        }))
    };
    let a = answer(AT, &f, &says(1_700_000_010.52), None);
    assert!(
        matches!(a, Answer::Proves(50, ref s) if s.contains("member 4bd1")),
        "{a:?}"
    );
    let a = answer(AT, &f, &says(1_700_000_011.0), None);
    assert!(matches!(a, Answer::Contradicts(_)), "{a:?}");
    let zk = |id, dir: &str| {
        Ok(Some(ServerSays::Zk {
            id,
            data_dir: dir.into(),
        }))
    };
    let conf = Ok(ZkConf {
        cfg: "/z/zoo.cfg".into(),
        data_dir: "/z/data".into(),
        myid: 2,
    });
    let a = answer(AT, &f, &zk(2, "/z/data/version-2"), Some(&conf));
    assert!(matches!(a, Answer::Proves(50, _)), "{a:?}");
    let a = answer(AT, &f, &zk(1, "/z/data/version-2"), Some(&conf));
    assert!(matches!(a, Answer::Contradicts(_)), "{a:?}");
    let a = answer(AT, &f, &zk(2, "/z/data/version-2"), None);
    assert!(matches!(a, Answer::Unusable(_)), "{a:?}");
}

#[test]
fn without_an_answer_the_socket_decides_and_says_why_not() {
    let f = found(&[7]);
    let none = || answer(AT, &f, &Err("NOAUTH".into()), None);
    assert!(judge(AT, &f, none(), &held(7)).is_ok());
    let other = Listening::Other {
        pid: 9,
        comm: "docker-proxy".into(),
        at: AT.parse().unwrap(),
    };
    let e = judge(AT, &f, none(), &other).unwrap_err();
    assert!(
        e.contains("docker-proxy") && e.contains("port forward"),
        "{e}"
    );
    let e = judge(AT, &f, none(), &Listening::Nothing).unwrap_err();
    assert!(
        e.contains("nothing listens on 10.0.0.3:6379") && e.contains("NOAUTH"),
        "{e}"
    );
}
