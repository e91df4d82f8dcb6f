//! The test bed (`lockjaw testbed up|down`, `lockjaw heal` of a bed): real
//! network namespaces, a bridge, time namespaces and one real sshd per
//! host, reached with the system's `ssh`. The hosts live on 10.213.K.0/24
//! (K the first free bed), inside this machine only; no loopback port is
//! bound. Each test checks that what it made is gone afterwards: the
//! namespaces, links, every process in the namespaces, the sshd.

use crate::run_util::lockjaw;
use lockjaw::testbed::{self, Bed};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Output;

/// The identity (device, inode) of each host's network namespace, taken
/// while the bed is up, to find its processes afterwards.
pub(crate) fn namespaces(bed: &Bed) -> Vec<(String, u64, u64)> {
    bed.hosts
        .iter()
        .map(|h| {
            let m = std::fs::metadata(format!("/run/netns/{}", h.netns)).unwrap();
            (h.netns.clone(), m.dev(), m.ino())
        })
        .collect()
}

/// Live (not zombie) processes whose network namespace is `(dev, ino)`.
fn processes_in(dev: u64, ino: u64) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::metadata(format!("/proc/{pid}/ns/net"))
                .is_ok_and(|m| m.dev() == dev && m.ino() == ino)
        })
        .filter(|pid| lockjaw::process::proc_stat(*pid).is_some_and(|s| s.state != 'Z'))
        .collect()
}

fn links() -> Vec<String> {
    let out = std::process::Command::new("ip")
        .args(["-o", "link", "show"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| Some(l.split(": ").nth(1)?.split('@').next()?.to_string()))
        .collect()
}

/// Nothing of `bed` is left on this machine: no namespace, no link, no
/// process in its namespaces (counted while it was up: `ns`), no sshd.
/// Told apart by identity, not name: another test's bed may take the
/// freed number (the same names) at once, so a link is this bed's when
/// it carries its nonce as alias, a namespace when it is the same inode.
pub(crate) fn assert_gone(bed: &Bed, ns: &[(String, u64, u64)]) {
    let ours = |link: &str| {
        std::fs::read_to_string(format!("/sys/class/net/{link}/ifalias"))
            .is_ok_and(|a| a.trim() == bed.nonce)
    };
    assert!(!ours(&bed.bridge), "bridge {} left", bed.bridge);
    for (h, (_, dev, ino)) in bed.hosts.iter().zip(ns) {
        assert!(!ours(&h.veth), "veth {} left", h.veth);
        let same = std::fs::metadata(Path::new("/run/netns").join(&h.netns))
            .is_ok_and(|m| m.dev() == *dev && m.ino() == *ino);
        assert!(!same, "namespace {} left", h.netns);
        assert!(
            !h.sshd.is_alive(),
            "sshd of {} (pid {}) left",
            h.name,
            h.sshd.pid
        );
    }
    for (name, dev, ino) in ns {
        let left = processes_in(*dev, *ino);
        assert!(left.is_empty(), "processes {left:?} left in {name}");
    }
}

/// Takes the bed of a hosts file down when a test ends early (a failed
/// assertion), before its temporary directory goes.
struct DownOnDrop(PathBuf);

impl Drop for DownOnDrop {
    fn drop(&mut self) {
        if testbed::bed_dir(&self.0).exists() {
            let _ = lockjaw()
                .args(["testbed", "down", "--out"])
                .arg(&self.0)
                .output();
        }
    }
}

fn uptime(text: &str) -> f64 {
    text.split_whitespace().next().unwrap().parse().unwrap()
}

fn ssh(bed: &Bed, i: usize, cmd: &str) -> String {
    let out = bed.ssh(&bed.hosts[i]).arg(cmd).output().unwrap();
    assert!(
        out.status.success(),
        "ssh {} {cmd}: {}",
        bed.hosts[i].name,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test]
async fn a_bed_of_two_hosts_has_its_own_clocks_and_network_and_down_leaves_nothing() {
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("hosts.toml");
    let _down = DownOnDrop(out.clone());
    let bed = testbed::up(2, &out, lockjaw::runner::heal::executor())
        .await
        .unwrap();
    let ns = namespaces(&bed);
    let dir = t.path().join("hosts.bed");
    assert_eq!(bed.dir, dir);
    // Over ssh (the system's client, the bed's key, strict known_hosts),
    // one session per host: its monotonic clock (~I × 10⁶ s ahead of this
    // machine's), its address, its routes (none leads out of the bed).
    let said: Vec<Vec<String>> = (0..2)
        .map(|i| {
            let out = ssh(
                &bed,
                i,
                "cat /proc/uptime; echo; hostname -I; echo; ip route",
            );
            out.split("\n\n").map(str::to_string).collect()
        })
        .collect();
    let here = uptime(&std::fs::read_to_string("/proc/uptime").unwrap());
    let remote: Vec<f64> = said.iter().map(|s| uptime(&s[0])).collect();
    assert!(
        remote[0] - here >= 900_000.0,
        "h1 {} vs here {here}",
        remote[0]
    );
    assert!(
        remote[1] - here >= 900_000.0,
        "h2 {} vs here {here}",
        remote[1]
    );
    assert!(
        remote[1] - remote[0] >= 900_000.0,
        "h1 {} vs h2 {}",
        remote[0],
        remote[1]
    );
    for (s, h) in said.iter().zip(&bed.hosts) {
        assert_eq!(s[1].trim(), h.address.to_string());
        assert!(
            !s[2].contains("default") && s[2].contains("10.213."),
            "{}",
            s[2]
        );
    }
    // Host 1 reaches host 2's sshd.
    let reach = std::process::Command::new("ip")
        .args(["netns", "exec", &bed.hosts[0].netns, "bash", "-c"])
        .arg(format!(
            "exec 3<>/dev/tcp/{}/22 && head -c 7 <&3",
            bed.hosts[1].address
        ))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&reach.stdout),
        "SSH-2.0",
        "{reach:?}"
    );
    // The hosts file: the contract's fields, paths relative to it.
    let hosts: toml::Value = toml::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(hosts["defaults"]["user"].as_str(), Some("root"));
    assert_eq!(
        hosts["defaults"]["identity_file"].as_str(),
        Some("hosts.bed/id_ed25519")
    );
    assert_eq!(
        hosts["defaults"]["known_hosts"].as_str(),
        Some("hosts.bed/known_hosts")
    );
    let nodes = hosts["node"].as_array().unwrap();
    assert_eq!(nodes.len(), 2);
    for (n, h) in nodes.iter().zip(&bed.hosts) {
        assert_eq!(n["name"].as_str(), Some(h.name.as_str()));
        assert_eq!(n["host"].as_str(), Some(h.address.to_string().as_str()));
        let data = dir.join(&h.name).join("data");
        assert_eq!(n["data_dir"].as_str(), Some(data.to_str().unwrap()));
        assert!(data.is_dir());
    }
    assert_eq!(Bed::read(&dir).unwrap(), bed);

    testbed::down(&out, lockjaw::runner::heal::executor())
        .await
        .unwrap();
    assert_gone(&bed, &ns);
    assert!(!dir.exists() && !out.exists());
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\n{}{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn heal_of_a_bed_directory_takes_the_whole_bed_back() {
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("bed.toml");
    let _down = DownOnDrop(out.clone());
    let up = lockjaw()
        .args(["testbed", "up", "--count", "1", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(up.status.code(), Some(0), "{}", text(&up));
    let dir = t.path().join("bed.bed");
    let bed = Bed::read(&dir).unwrap();
    assert!(String::from_utf8_lossy(&up.stdout).starts_with(out.to_str().unwrap()));
    let ns = namespaces(&bed);
    // Something a run would have started on the host, beside its sshd.
    let pid: i32 = ssh(&bed, 0, "sleep 600 </dev/null >/dev/null 2>&1 & echo $!")
        .trim()
        .parse()
        .unwrap();
    let inside = processes_in(ns[0].1, ns[0].2);
    assert!(inside.contains(&pid), "{pid} not among {inside:?}");
    let sleeper = lockjaw::process::ProcId::of(pid).unwrap();
    // And one that entered the namespace outside the bed's cgroup.
    let mut stray = std::process::Command::new("ip")
        .args(["netns", "exec", &bed.hosts[0].netns, "sleep", "600"])
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !processes_in(ns[0].1, ns[0].2).contains(&(stray.id() as i32)) {
        assert!(
            std::time::Instant::now() < deadline,
            "ip netns exec did not enter"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }

    let heal = lockjaw().arg("heal").arg(&dir).output().unwrap();
    assert_eq!(heal.status.code(), Some(0), "{}", text(&heal));
    assert!(text(&heal).contains("healed 5 effects"), "{}", text(&heal));
    assert_gone(&bed, &ns);
    assert!(!sleeper.is_alive());
    let status = stray
        .try_wait()
        .unwrap()
        .expect("killed with its namespace");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    // The files stay for `down`, which then has nothing left to undo.
    assert!(out.is_file());
    let down = lockjaw()
        .args(["testbed", "down", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(down.status.code(), Some(0), "{}", text(&down));
    assert!(!dir.exists() && !out.exists());
}

#[test]
fn up_refuses_no_hosts_and_a_missing_directory_and_down_a_missing_bed() {
    let t = tempfile::tempdir().unwrap();
    let cases = [
        (
            vec!["up", "--count", "0"],
            t.path().join("h.toml"),
            "--count 0",
        ),
        (
            vec!["up", "--count", "2"],
            t.path().join("missing/h.toml"),
            "does not exist",
        ),
        (vec!["down"], t.path().join("h.toml"), "no test bed there"),
    ];
    for (args, out, why) in cases {
        let o = lockjaw()
            .arg("testbed")
            .args(&args)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(3), "{args:?}: {}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(why),
            "{args:?}: {}",
            text(&o)
        );
    }
    assert_eq!(
        std::fs::read_dir(t.path()).unwrap().count(),
        0,
        "nothing made"
    );
}

/// `testbed up --count 1 --out OUT`, which must succeed; its bed.
fn bed_up(out: &Path) -> Bed {
    let up = lockjaw()
        .args(["testbed", "up", "--count", "1", "--out"])
        .arg(out)
        .output()
        .unwrap();
    assert_eq!(up.status.code(), Some(0), "{}", text(&up));
    Bed::read(&testbed::bed_dir(out)).unwrap()
}

/// Issue 29, defect 4: heal of a stale copy of bed A's directory, after
/// A went down and bed B came up with the same index (so the same names
/// of namespace, bridge and veth), touches nothing of B: each namespace
/// and link must carry the nonce of the bed that recorded it. Heal exits
/// 3 naming what it left; B stays reachable.
#[test]
fn heal_of_a_stale_bed_directory_leaves_the_bed_now_using_its_names() {
    use std::os::unix::fs::DirBuilderExt;
    let t = tempfile::tempdir().unwrap();
    let (a_out, b_out) = (t.path().join("a.toml"), t.path().join("b.toml"));
    let _down_a = DownOnDrop(a_out.clone());
    let a = bed_up(&a_out);
    let stale = t.path().join("stale.bed");
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&stale)
        .unwrap();
    for f in ["bed.json", "undo.jsonl"] {
        std::fs::copy(a.dir.join(f), stale.join(f)).unwrap();
    }
    let down = lockjaw()
        .args(["testbed", "down", "--out"])
        .arg(&a_out)
        .output()
        .unwrap();
    assert_eq!(down.status.code(), Some(0), "{}", text(&down));
    // B takes the first free index, A's, unless a bed of a test beside
    // holds it now (then again, after that one went), or one below A's
    // was freed after A came up: then B stays up there, so the next bed
    // skips it, and the next try goes under another name.
    let mut held = vec![DownOnDrop(b_out.clone())];
    let mut b_out = b_out;
    let mut b = bed_up(&b_out);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while b.index != a.index {
        assert!(
            std::time::Instant::now() < deadline,
            "A's index {} stayed taken (B has {})",
            a.index,
            b.index
        );
        if b.index < a.index {
            b_out = t.path().join(format!("b{}.toml", held.len()));
            held.push(DownOnDrop(b_out.clone()));
        } else {
            let down = lockjaw()
                .args(["testbed", "down", "--out"])
                .arg(&b_out)
                .output();
            assert_eq!(down.unwrap().status.code(), Some(0));
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        b = bed_up(&b_out);
    }
    let heal = lockjaw().arg("heal").arg(&stale).output().unwrap();
    let said = text(&heal);
    // B is whole (before: heal deleted its namespace and links): its
    // links and sshd, reached over ssh.
    assert!(links().contains(&b.bridge) && links().contains(&b.hosts[0].veth));
    assert!(b.hosts[0].sshd.is_alive());
    assert_eq!(
        ssh(&b, 0, "hostname -I").trim(),
        b.hosts[0].address.to_string()
    );
    assert_eq!(heal.status.code(), Some(3), "{said}");
    for name in [&b.bridge, &b.hosts[0].veth, &b.hosts[0].netns] {
        assert!(
            said.contains(&format!("{name} carries the alias")),
            "{said}"
        );
    }
    assert!(said.contains("left alone"), "{said}");
    assert_ne!(b.nonce, a.nonce);
    let ns = namespaces(&b);
    let down = lockjaw()
        .args(["testbed", "down", "--out"])
        .arg(&b_out)
        .output()
        .unwrap();
    assert_eq!(down.status.code(), Some(0), "{}", text(&down));
    assert_gone(&b, &ns);
}
