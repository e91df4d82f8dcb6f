//! The names of what a run creates in a SQL database it shares
//! (PostgreSQL, MariaDB): `lockjaw_<run-id>_<what>`, plain identifiers
//! in either dialect, so no quoting is needed.

/// The name of table `what` of run `run_id`: `lockjaw_<run-id>_<what>`,
/// the run id folded to lower-case letters, digits and `_` (a plain SQL
/// identifier, no quoting needed). Every object lockjaw creates in a
/// database starts with [`prefix`].
pub fn table_name(run_id: &str, what: &str) -> String {
    format!("{}{what}", prefix(run_id))
}

/// `lockjaw_<run-id>_`.
pub fn prefix(run_id: &str) -> String {
    let id: String = run_id
        .chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' => c,
            'A'..='Z' => c.to_ascii_lowercase(),
            _ => '_',
        })
        .collect();
    format!("lockjaw_{id}_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_are_plain_identifiers_with_the_run_id() {
        assert_eq!(
            table_name("20240101-120000-AB12", "fence"),
            "lockjaw_20240101_120000_ab12_fence"
        );
        assert_eq!(prefix("x.y"), "lockjaw_x_y_");
    }
}
