//! docs/contributing.md against the code: its worked system example names
//! every method of the registry's traits and every field of `Facts`, read
//! from the source with a Rust parser, so a new method or fact that the
//! page does not mention fails here.

use std::path::Path;

const PAGE: &str = include_str!("../../docs/contributing.md");
/// The section of the page a new system's author reads.
const SECTION: &str = "## Adding a lock service";

/// The traits a registry entry implements, as (file, trait). A pair whose
/// file does not exist yet is skipped (the `Servers` trait is being split
/// out of `Service`), but at least one pair must be found.
const TRAITS: &[(&str, &str)] = &[
    ("src/service/mod.rs", "Service"),
    ("src/cluster/servers.rs", "Servers"),
];
/// The struct of facts every entry builds in full.
const FACTS: (&str, &str) = ("src/service/mod.rs", "Facts");

fn parse(file: &str) -> Option<syn::File> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    let text = std::fs::read_to_string(path).ok()?;
    Some(syn::parse_file(&text).unwrap_or_else(|e| panic!("{file}: {e}")))
}

/// The method names of trait `name` in `file`, `None` if the trait is not
/// there.
fn trait_methods(file: &syn::File, name: &str) -> Option<Vec<String>> {
    file.items.iter().find_map(|item| match item {
        syn::Item::Trait(t) if t.ident == name => Some(
            t.items
                .iter()
                .filter_map(|i| match i {
                    syn::TraitItem::Fn(f) => Some(f.sig.ident.to_string()),
                    _ => None,
                })
                .collect(),
        ),
        _ => None,
    })
}

/// The field names of struct `name` in `file`.
fn struct_fields(file: &syn::File, name: &str) -> Option<Vec<String>> {
    file.items.iter().find_map(|item| match item {
        syn::Item::Struct(s) if s.ident == name => Some(
            s.fields
                .iter()
                .filter_map(|f| f.ident.as_ref().map(|i| i.to_string()))
                .collect(),
        ),
        _ => None,
    })
}

/// The section of the page on adding a lock service, up to the next one.
fn system_section() -> &'static str {
    let start = PAGE
        .find(SECTION)
        .unwrap_or_else(|| panic!("docs/contributing.md has no {SECTION:?}"));
    let rest = &PAGE[start + SECTION.len()..];
    &rest[..rest.find("\n## ").unwrap_or(rest.len())]
}

/// The names that `page` never mentions as code (`` `name` `` or
/// `` `name(`` ...).
fn missing<'a>(page: &str, names: &'a [String]) -> Vec<&'a str> {
    names
        .iter()
        .map(String::as_str)
        .filter(|n| !page.contains(&format!("`{n}`")) && !page.contains(&format!("`{n}(")))
        .collect()
}

#[test]
fn the_worked_system_example_names_every_trait_method() {
    let mut found = 0;
    for (file, name) in TRAITS {
        let Some(src) = parse(file) else { continue };
        let methods = trait_methods(&src, name)
            .unwrap_or_else(|| panic!("{file} defines no trait {name} (hint: fix TRAITS)"));
        found += 1;
        assert!(!methods.is_empty(), "trait {name} in {file} has no methods");
        let gone = missing(system_section(), &methods);
        assert!(
            gone.is_empty(),
            "docs/contributing.md does not name {gone:?} of trait {name} ({file}) (hint: add them to the worked example of adding a lock service)"
        );
    }
    assert!(found >= 1, "none of the traits {TRAITS:?} was found");
}

#[test]
fn the_worked_system_example_names_every_fact() {
    let (file, name) = FACTS;
    let src = parse(file).unwrap_or_else(|| panic!("cannot read {file}"));
    let fields = struct_fields(&src, name).unwrap_or_else(|| panic!("no struct {name} in {file}"));
    assert!(fields.len() >= 10, "{name}: {fields:?}");
    let gone = missing(system_section(), &fields);
    assert!(
        gone.is_empty(),
        "docs/contributing.md does not name the facts {gone:?} of {file} (hint: add them to the facts of the worked example)"
    );
}

#[test]
fn the_checks_can_fail() {
    let src: syn::File = syn::parse_str(
        "#[async_trait] pub trait T: Sync { fn a(&self); async fn b(&self) -> u8 { 1 } const C: u8; }
         pub struct F { pub x: bool, pub y: Option<&'static str> }",
    )
    .unwrap();
    assert_eq!(trait_methods(&src, "T").unwrap(), ["a", "b"]);
    assert_eq!(trait_methods(&src, "U"), None);
    assert_eq!(struct_fields(&src, "F").unwrap(), ["x", "y"]);
    let names = ["a", "b", "x"].map(String::from);
    assert_eq!(missing("`a` and `b(&self)` and x", &names), ["x"]);
}
