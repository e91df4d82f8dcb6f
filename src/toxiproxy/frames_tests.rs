//! Tests of the message framing: whole messages out of any split of the
//! bytes, replies paired with requests, pings marked, opaque protocols
//! passed as they are.

use super::*;
use proptest::prelude::*;

fn pair() -> (Framer, Framer) {
    let conn = ConnFrames::new();
    let scripts: Scripts = Arc::default();
    (
        Framer::new(Stream::Upstream, conn.clone(), scripts.clone()),
        Framer::new(Stream::Downstream, conn, scripts),
    )
}

fn names(out: &[(Bytes, Option<Msg>)]) -> Vec<String> {
    out.iter()
        .map(|(_, m)| m.as_ref().map_or("-".into(), |m| m.name.to_string()))
        .collect()
}

const PIPELINE: &[u8] = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*1\r\n$4\r\nPING\r\n\
*3\r\n$4\r\nEVAL\r\n$8\r\nreturn 1\r\n$1\r\n0\r\nGET k\r\n";
const REPLIES: &[u8] = b"+OK\r\n+PONG\r\n:1\r\n$1\r\nv\r\n";

#[test]
fn a_pipeline_is_cut_into_its_requests_and_replies_pair_in_order() {
    let (mut up, mut down) = pair();
    let out = up.push_slice(PIPELINE);
    assert_eq!(names(&out), ["SET", "PING", "EVAL", "GET"]);
    let joined: Vec<u8> = out.iter().flat_map(|(b, _)| b.to_vec()).collect();
    assert_eq!(joined, PIPELINE, "no byte changed or lost");
    assert!(out[1].1.as_ref().unwrap().keepalive);
    let eval = out[2].1.clone().unwrap();
    assert_eq!(eval.script.as_deref(), Some(&b"return 1"[..]));
    assert_eq!(
        eval.sha1.as_deref(),
        Some("e0e1f9fabfc9d4800c877a703b823ac0578ff8db")
    );
    let replies = down.push_slice(REPLIES);
    assert_eq!(names(&replies), ["SET", "PING", "EVAL", "GET"]);
    let seqs: Vec<u64> = replies
        .iter()
        .map(|(_, m)| m.as_ref().unwrap().seq)
        .collect();
    let req_seqs: Vec<u64> = out.iter().map(|(_, m)| m.as_ref().unwrap().seq).collect();
    assert_eq!(seqs, req_seqs);
}

#[test]
fn evalsha_finds_the_script_loaded_earlier_on_another_connection() {
    let scripts: Scripts = Arc::default();
    let mut a = Framer::new(Stream::Upstream, ConnFrames::new(), scripts.clone());
    let mut b = Framer::new(Stream::Upstream, ConnFrames::new(), scripts);
    a.push_slice(b"*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n$8\r\nreturn 1\r\n");
    let out = b.push_slice(
        b"*3\r\n$7\r\nEVALSHA\r\n$40\r\nE0E1F9FABFC9D4800C877A703B823AC0578FF8DB\r\n$1\r\n0\r\n",
    );
    let m = out[0].1.clone().unwrap();
    assert_eq!(&*m.name, "EVALSHA");
    assert_eq!(m.script.as_deref(), Some(&b"return 1"[..]));
}

#[test]
fn resp3_replies_and_pushes() {
    let (mut up, mut down) = pair();
    up.push_slice(b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
    let out =
        down.push_slice(b"%1\r\n+server\r\n+redis\r\n>2\r\n+invalidate\r\n*1\r\n$1\r\nk\r\n_\r\n");
    assert_eq!(names(&out), ["HELLO", "push", "GET"]);
    assert!(!out[1].1.as_ref().unwrap().paired);
    let bits = down.push_slice(b",1.5\r\n#t\r\n!3\r\nerr\r\n=7\r\ntxt:abc\r\n(12\r\n~0\r\n");
    assert_eq!(names(&bits), ["unpaired"; 6], "no request left: unpaired");
}

#[test]
fn subscribe_stops_the_pairing() {
    let (mut up, mut down) = pair();
    up.push_slice(b"*2\r\n$9\r\nSUBSCRIBE\r\n$1\r\nc\r\n");
    let out = down.push_slice(b"*3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:1\r\n");
    assert_eq!(names(&out), ["unpaired"]);
}

#[test]
fn zookeeper_ops_pair_by_xid_and_pings_are_keepalives() {
    let (mut up, mut down) = pair();
    let frame = |body: &[u8]| {
        let mut v = (body.len() as i32).to_be_bytes().to_vec();
        v.extend_from_slice(body);
        v
    };
    let mut connect = vec![0u8; 4 + 8 + 4 + 8 + 4 + 16];
    connect[27] = 16;
    let req = |xid: i32, op: i32| frame(&[xid.to_be_bytes(), op.to_be_bytes()].concat());
    let mut bytes = frame(&connect);
    bytes.extend(req(1, 2));
    bytes.extend(req(-2, 11));
    let out = up.push_slice(&bytes);
    assert_eq!(names(&out), ["connect", "delete", "ping"]);
    assert!(out[2].1.as_ref().unwrap().keepalive);
    assert!(
        out[0].1.as_ref().unwrap().keepalive,
        "the session handshake"
    );
    let reply = |xid: i32| frame(&[xid.to_be_bytes().as_slice(), &[0; 12]].concat());
    let mut back = frame(&[0u8; 36]);
    back.extend(reply(-2));
    back.extend(reply(-1));
    back.extend(reply(1));
    assert_eq!(
        names(&down.push_slice(&back)),
        ["connect", "ping", "watch-event", "delete"]
    );
}

#[test]
fn other_protocols_pass_as_read() {
    for first in [
        &b"\x16\x03\x01\x02\x00"[..],
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        b"\x00\x00\x00\x08\x04\xd2\x16\x2f",
    ] {
        let (mut up, _) = pair();
        let out = up.push_slice(first);
        assert_eq!(names(&out), ["-"], "{first:?}");
        assert_eq!(&out[0].0[..], first);
    }
    // A server that speaks first is not framed either.
    let (_, mut down) = pair();
    assert_eq!(names(&down.push_slice(b"J\0\0\0\n8.0")), ["-"]);
}

#[test]
fn bad_resp_turns_the_connection_opaque_without_losing_bytes() {
    let (mut up, _) = pair();
    let out = up.push_slice(b"*2\r\n$3\r\nGET\r\nX");
    assert_eq!(names(&out), ["-"]);
    assert_eq!(&out[0].0[..], b"*2\r\n$3\r\nGET\r\nX");
    assert_eq!(names(&up.push_slice(b"*1\r\n$4\r\nPING\r\n")), ["-"]);
}

proptest! {
    /// However the bytes are cut into reads, the same messages come out,
    /// with every byte in order.
    #[test]
    fn any_split_gives_the_same_messages(cuts in proptest::collection::vec(0usize..PIPELINE.len(), 0..8)) {
        let (mut up, _) = pair();
        let mut cuts = cuts;
        cuts.sort();
        let mut out = Vec::new();
        let mut last = 0;
        for c in cuts.into_iter().chain([PIPELINE.len()]) {
            out.extend(up.push_slice(&PIPELINE[last..c]));
            last = c;
        }
        prop_assert_eq!(names(&out), ["SET", "PING", "EVAL", "GET"]);
        let joined: Vec<u8> = out.iter().flat_map(|(b, _)| b.to_vec()).collect();
        prop_assert_eq!(joined, PIPELINE);
        prop_assert!(up.rest().is_none());
    }
}
