//! The anomaly vocabulary: the kinds a rate can be asked for (slugs),
//! which check's anomalies are of which kind, and what people call them.

/// Any anomaly kind.
pub const ANY: &str = "any";

/// The anomaly kinds a rate can be asked for, as slugs.
pub const KINDS: [&str; 6] = [
    "two-holders",
    "fence-order",
    "stale-writes",
    "lost-updates",
    "duplicate-effects",
    "not-linearizable",
];

/// The slug of a lock check's (or the linearizability check's) anomalies;
/// `None` for information only.
pub fn kind_of(check: &str) -> Option<&'static str> {
    Some(match check {
        "safety" | "mutex" => "two-holders",
        "fence_order" => "fence-order",
        "stale_writes" => "stale-writes",
        "lost_updates" => "lost-updates",
        "duplicate_effects" => "duplicate-effects",
        "linearizable" => "not-linearizable",
        _ => return None,
    })
}

/// What people call a kind.
pub fn kind_label(slug: &str) -> &str {
    match slug {
        ANY => "any anomaly",
        "two-holders" => "two holders",
        "fence-order" => "fence order",
        "stale-writes" => "stale writes",
        "lost-updates" => "lost updates",
        "duplicate-effects" => "duplicate effects",
        "not-linearizable" => "not linearizable",
        other => other,
    }
}

/// Check a `--anomaly` value: `any` or one of [`KINDS`].
pub fn parse_kind(s: &str) -> Result<&'static str, String> {
    std::iter::once(ANY)
        .chain(KINDS)
        .find(|k| *k == s)
        .ok_or_else(|| {
            format!(
                "unknown anomaly kind `{s}` (hint: one of {ANY}, {})",
                KINDS.join(", ")
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_and_read() {
        assert_eq!(parse_kind("stale-writes"), Ok("stale-writes"));
        assert_eq!(parse_kind("any"), Ok(ANY));
        let e = parse_kind("stale").unwrap_err();
        assert!(e.contains("two-holders"), "{e}");
        assert_eq!(kind_of("safety"), Some("two-holders"));
        assert_eq!(kind_of("stale_holders"), None);
        assert_eq!(kind_label("two-holders"), "two holders");
    }
}
