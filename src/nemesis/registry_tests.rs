//! Tests of the fault registry (src/nemesis/registry.rs).

use super::*;

#[test]
fn names_are_unique_and_every_fault_has_a_builtin_file() {
    let mut names: Vec<&str> = FAULTS.iter().map(|e| e.name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), FAULTS.len());
    for e in FAULTS {
        assert!(
            super::super::spec::BUILTIN
                .iter()
                .any(|(n, _)| *n == e.name),
            "no nemesis/{}.toml",
            e.name
        );
    }
}
