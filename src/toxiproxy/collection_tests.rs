//! Tests of the proxy collection: requests validated in Toxiproxy's
//! order, and one-shot toxics (toxicity 1 only, `fired` shown).

use super::*;

#[tokio::test]
async fn validation_order_matches_toxiproxy() {
    let mut c = Collection::default();
    assert_eq!(c.create(b"{").await.unwrap_err().status, 400);
    assert_eq!(
        c.create(br#"{"upstream":"x:1"}"#)
            .await
            .unwrap_err()
            .message,
        "missing required field: name"
    );
    let body = br#"{"name":"a","upstream":"127.0.0.1:1","listen":"127.0.0.1:0","enabled":false}"#;
    let p = c.create(body).await.unwrap();
    assert!(!p.enabled);
    assert_eq!(c.create(body).await.unwrap_err().status, 409);
    let t = c
        .add_toxic("a", br#"{"type":"latency","attributes":{"latency":5}}"#)
        .unwrap();
    assert_eq!(t.name, "latency_downstream");
    assert_eq!(
        c.add_toxic("a", br#"{"type":"latency"}"#)
            .unwrap_err()
            .status,
        409
    );
    assert_eq!(
        c.add_toxic("a", br#"{"type":"x","stream":"up"}"#)
            .unwrap_err(),
        ApiError::invalid_stream()
    );
    assert_eq!(
        c.add_toxic("a", br#"{"type":"x"}"#).unwrap_err(),
        ApiError::invalid_type()
    );
    assert_eq!(
        c.add_toxic("b", br#"{"type":"x"}"#).unwrap_err().status,
        404
    );
    let u = c
        .update_toxic("a", "latency_downstream", br#"{"attributes":{"jitter":2}}"#)
        .unwrap();
    assert_eq!(
        u.typed().unwrap(),
        ToxicKind::Latency {
            latency: 5,
            jitter: 2
        }
    );
    assert_eq!(c.remove_toxic("a", "nope").unwrap_err().status, 404);
    c.remove_toxic("a", "latency_downstream").unwrap();
    assert!(c.toxics("a").unwrap().is_empty());
    c.shutdown().await;
}

#[tokio::test]
async fn one_shots_take_toxicity_1_only_and_show_fired() {
    let mut c = Collection::default();
    let body = br#"{"name":"a","upstream":"127.0.0.1:1","listen":"127.0.0.1:0","enabled":false}"#;
    c.create(body).await.unwrap();
    let e = c
        .add_toxic("a", br#"{"type":"hold_next","toxicity":0.5}"#)
        .unwrap_err();
    assert_eq!(e.status, 400);
    assert!(
        e.message.starts_with("toxicity must be 1 for hold_next"),
        "{}",
        e.message
    );
    assert!(c.toxics("a").unwrap().is_empty(), "nothing added");
    // `fired` on input is ignored: a new toxic has not fired.
    let t = c
        .add_toxic(
            "a",
            br#"{"type":"hold_next","attributes":{"hold":300,"fired":1}}"#,
        )
        .unwrap();
    assert_eq!(t.typed().unwrap(), ToxicKind::HoldNext { hold: 300 });
    assert_eq!(t.fired(), Some(false));
    let e = c
        .update_toxic("a", "hold_next_downstream", br#"{"toxicity":0}"#)
        .unwrap_err();
    assert_eq!(e.status, 400);
    let t = c
        .update_toxic("a", "hold_next_downstream", br#"{"attributes":{"hold":0}}"#)
        .unwrap();
    assert_eq!(t.toxicity, 1.0);
    assert_eq!(t.fired(), Some(false));
    let r = c
        .add_toxic("a", br#"{"type":"reset_next","stream":"upstream"}"#)
        .unwrap();
    assert_eq!(r.name, "reset_next_upstream");
    assert_eq!(c.toxic("a", &r.name).unwrap().fired(), Some(false));
    assert!(c
        .toxics("a")
        .unwrap()
        .iter()
        .all(|t| t.fired() == Some(false)));
    // Other kinds keep any toxicity and carry no `fired`.
    let n = c
        .add_toxic("a", br#"{"type":"noop","toxicity":0.5}"#)
        .unwrap();
    assert_eq!(n.fired(), None);
    c.shutdown().await;
}
