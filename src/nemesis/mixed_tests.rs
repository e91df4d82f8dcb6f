//! `mixed` with `order = "sequence"` on the fake worker pool and the
//! embedded Toxiproxy: the listed files in order, each injection naming
//! its point.

use super::*;

#[tokio::test]
async fn a_sequence_injects_the_listed_points_in_order_and_names_each() {
    let mut links = Links::default();
    links
        .node
        .entry(0)
        .or_default()
        .insert("n1".into(), "w0-n1".into());
    let mut f = fixture("mixed", links).await;
    let mut files = vec![];
    for name in ["lat-a", "lat-b"] {
        let path = f._dir.path().join(format!("{name}.toml"));
        let text =
            format!("name = \"{name}\"\nfault = \"latency\"\nlatency_ms = 5\nduration_ms = 20\n");
        std::fs::write(&path, text).unwrap();
        files.push(path.display().to_string());
    }
    f.ctx.spec.faults = files;
    f.ctx.spec.order = spec::Order::Sequence;
    f.ctx.spec.interval_ms = 10;
    let (stop, mut ctx) = (f.stop, f.ctx);
    let count = Arc::new(AtomicU64::new(0));
    let seen = count.clone();
    let task = tokio::spawn(async move {
        let sum = schedule::run(Box::<mixed::Mixed>::default(), &mut ctx, &seen).await;
        (sum, ctx)
    });
    until("five injections", || {
        count.load(std::sync::atomic::Ordering::Relaxed) >= 5
    })
    .await;
    stop.send(true).unwrap();
    let (sum, _ctx) = task.await.unwrap();
    let points: Vec<&str> = sum
        .injections
        .iter()
        .map(|i| i.target["point"].as_str().unwrap())
        .collect();
    let want = ["lat-a", "lat-b"].iter().cycle().take(points.len());
    assert!(points.len() >= 5);
    assert!(points.iter().zip(want).all(|(a, b)| a == b), "{points:?}");
    assert!(sum.injections.iter().all(|i| i.target["mixed"] == true));
    let ops = f.history.0.lock().unwrap();
    let named = ops
        .iter()
        .filter(|o| o.value.get("point").and_then(|p| p.as_str()) == Some("lat-b"))
        .count();
    assert!(
        named >= 4,
        "the history's start and stop ops name the point"
    );
    assert!(f.undo.pending().is_empty());
    f.pool.child.kill().unwrap();
}
