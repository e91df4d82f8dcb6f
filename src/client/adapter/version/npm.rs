//! What a version folder's `package.json` and `package-lock.json` may say
//! (docs/adapters.md, "What a version folder may hold"): a lock of version 2
//! or 3 whose every package is a `node_modules/NAME` entry with an exact
//! version and an `integrity` (`sha512-...`), and a `resolved`, if any, that
//! is exactly the public registry's tarball of that name and version; no
//! links, workspaces, `file:`, git or other URLs. `package.json` names only
//! exact versions. `npm ci --ignore-scripts` then installs exactly those
//! tarballs and runs none of their scripts. `clients/lib/build-env` checks
//! the same again.

use serde_json::{Map, Value};
use std::path::Path;

const HINT: &str = "hint: a version folder installs only registry packages pinned in \
     package-lock.json (lockfileVersion 2 or 3) with an `integrity` each, made by \
     `npm install --package-lock-only` from exact versions; docs/adapters.md \"What a version \
     folder may hold\"";

/// The only tarball URL host a lock may name (`resolved`).
const REGISTRY: &str = "https://registry.npmjs.org/";

/// The fields of `package.json` and the lock's root entry that list
/// dependencies.
const DEP_FIELDS: [&str; 4] = [
    "dependencies",
    "devDependencies",
    "optionalDependencies",
    "peerDependencies",
];

/// Check `package-lock.json` (`lock`, its text `text`).
pub fn check_lock(lock: &Path, text: &str) -> Result<(), String> {
    let err = |line: usize, what: String| format!("{}:{line}: {what} ({HINT})", lock.display());
    let v: Value =
        serde_json::from_str(text).map_err(|e| err(e.line().max(1), format!("not JSON: {e}")))?;
    let lfv = v.get("lockfileVersion").and_then(Value::as_u64);
    if !matches!(lfv, Some(2 | 3)) {
        return Err(err(
            line_of(text, "lockfileVersion", 0),
            format!(
                "lockfileVersion {} (only 2 and 3 record every package's integrity)",
                v.get("lockfileVersion").unwrap_or(&Value::Null)
            ),
        ));
    }
    let Some(packages) = v.get("packages").and_then(Value::as_object) else {
        return Err(err(1, "no `packages` object".into()));
    };
    for (key, entry) in packages {
        let at = line_of(text, key, 0);
        let Some(entry) = entry.as_object() else {
            return Err(err(at, format!("`{key}` is not an object")));
        };
        let field_line = |f: &str| line_of(text, f, offset_of(text, key));
        if key.is_empty() {
            deps(entry).map_err(|(f, w)| err(field_line(f), w))?;
            if entry.contains_key("workspaces") {
                return Err(err(
                    field_line("workspaces"),
                    "workspaces are not allowed".into(),
                ));
            }
            continue;
        }
        package(key, entry)
            .map_err(|(f, w)| err(if f.is_empty() { at } else { field_line(f) }, w))?;
    }
    Ok(())
}

/// Check `package.json` (`file`, its text `text`): exact versions only.
pub fn check_manifest(file: &Path, text: &str) -> Result<(), String> {
    let err = |line: usize, what: String| format!("{}:{line}: {what} ({HINT})", file.display());
    let v: Value =
        serde_json::from_str(text).map_err(|e| err(e.line().max(1), format!("not JSON: {e}")))?;
    let Some(m) = v.as_object() else {
        return Err(err(1, "not a JSON object".into()));
    };
    if m.contains_key("workspaces") {
        return Err(err(
            line_of(text, "workspaces", 0),
            "workspaces are not allowed".into(),
        ));
    }
    deps(m).map_err(|(f, w)| err(line_of(text, f, 0), w))
}

/// One `node_modules/...` entry; on error the field at fault ("" for the
/// key) and what is wrong.
fn package(key: &str, e: &Map<String, Value>) -> Result<(), (&'static str, String)> {
    let Some(name) = package_name(key) else {
        return Err((
            "",
            format!("`{key}` is not a `node_modules/NAME` path (no links, workspaces or folders)"),
        ));
    };
    if e.get("link").and_then(Value::as_bool) == Some(true) {
        return Err(("link", format!("`{key}` is a link to a folder")));
    }
    let version = e.get("version").and_then(Value::as_str).unwrap_or("");
    if !exact_version(version) {
        return Err((
            "version",
            format!("`{key}`: version {version:?} is not an exact registry version"),
        ));
    }
    let real = match e.get("name").and_then(Value::as_str) {
        Some(n) if valid_name(n) => n,
        Some(n) => return Err(("name", format!("`{key}`: {n:?} is not a package name"))),
        None => name,
    };
    if let Some(r) = e.get("resolved") {
        let base = real.rsplit('/').next().unwrap_or(real);
        let want = format!("{REGISTRY}{real}/-/{base}-{version}.tgz");
        if r.as_str() != Some(want.as_str()) {
            return Err((
                "resolved",
                format!(
                    "`{key}`: resolved {r} is not the registry's tarball of {real}@{version} \
                     ({want}; no file:, git or other URLs)"
                ),
            ));
        }
    }
    let bundled = e.get("inBundle").and_then(Value::as_bool) == Some(true);
    match e.get("integrity").and_then(Value::as_str) {
        Some(i) if i.split(' ').all(sha512) => Ok(()),
        Some(i) => Err((
            "integrity",
            format!("`{key}`: integrity {i:?} is not `sha512-` and a base64 digest"),
        )),
        // A bundled package comes inside its parent's checked tarball.
        None if bundled && !e.contains_key("resolved") => Ok(()),
        None => Err(("", format!("`{key}` has no integrity"))),
    }
}

/// The package name at the end of `node_modules/A/node_modules/B`, each
/// step a valid name.
fn package_name(key: &str) -> Option<&str> {
    let mut rest = key.strip_prefix("node_modules/")?;
    loop {
        let (name, tail) = match rest.find("/node_modules/") {
            Some(i) => (&rest[..i], Some(&rest[i + "/node_modules/".len()..])),
            None => (rest, None),
        };
        if !valid_name(name) {
            return None;
        }
        match tail {
            Some(t) => rest = t,
            None => return Some(name),
        }
    }
}

/// `name` or `@scope/name`: letters, digits, `-`, `.`, `_`, `~`, not
/// starting with `.` or `_`.
fn valid_name(n: &str) -> bool {
    let part = |p: &str| {
        !p.is_empty()
            && !p.starts_with(['.', '_'])
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-._~".contains(c))
    };
    match n.strip_prefix('@') {
        Some(scoped) => scoped
            .split_once('/')
            .is_some_and(|(s, p)| part(s) && part(p)),
        None => part(n),
    }
}

/// A semver without ranges: starts with a digit; digits, letters, `.`,
/// `-`, `+`.
fn exact_version(v: &str) -> bool {
    v.starts_with(|c: char| c.is_ascii_digit())
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-+".contains(c))
}

fn sha512(i: &str) -> bool {
    i.strip_prefix("sha512-").is_some_and(|b| {
        b.len() == 88
            && b.chars()
                .all(|c| c.is_ascii_alphanumeric() || "+/=".contains(c))
    })
}

/// Every dependency field of `m` names registry packages at exact versions.
fn deps(m: &Map<String, Value>) -> Result<(), (&'static str, String)> {
    for f in DEP_FIELDS {
        let Some(d) = m.get(f) else { continue };
        let Some(d) = d.as_object() else {
            return Err((f, format!("`{f}` is not an object")));
        };
        for (name, spec) in d {
            let spec = spec.as_str().unwrap_or("");
            if !valid_name(name) || !exact_version(spec) {
                return Err((
                    f,
                    format!(
                        "{f}: {name:?}: {spec:?} is not an exact version (no ranges, tags, \
                         file:, link:, git or URLs)"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The byte offset of `"key"` in `text` (0 when absent).
fn offset_of(text: &str, key: &str) -> usize {
    text.find(&format!("\"{key}\"")).unwrap_or(0)
}

/// The line of `"key"`'s first occurrence at or after byte `from` (1 when
/// absent).
fn line_of(text: &str, key: &str, from: usize) -> usize {
    let at = text[from..]
        .find(&format!("\"{key}\""))
        .map_or(0, |i| from + i);
    text[..at].matches('\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    const I: &str = "sha512-tuMmOu6dtyGFv/fzCjtapCJj/zgoHaFsqs3wKsroJSRXtlLmyL/t+B7uaQiavGk1F3WWFQcUqZwk92bpp9jKcA==";

    fn lock(entry: &str) -> String {
        format!(
            "{{\n  \"lockfileVersion\": 3,\n  \"packages\": {{\n    \"\": {{\"dependencies\": \
             {{\"ms\": \"2.1.3\"}}}},\n    \"node_modules/ms\": {{\n{entry}\n    }}\n  }}\n}}\n"
        )
    }

    fn refused(text: &str) -> String {
        check_lock(Path::new("v/package-lock.json"), text).unwrap_err()
    }

    #[test]
    fn registry_packages_with_integrity_pass() {
        let ok = lock(&format!("\"version\": \"2.1.3\",\n\"integrity\": \"{I}\""));
        check_lock(Path::new("l"), &ok).unwrap();
        let resolved = lock(&format!(
            "\"version\": \"2.1.3\",\n\"resolved\": \"{REGISTRY}ms/-/ms-2.1.3.tgz\",\n\"integrity\": \"{I}\""
        ));
        check_lock(Path::new("l"), &resolved).unwrap();
        for shipped in [
            include_str!(
                "../../../../clients/node-redis-semaphore/versions/5.3.1/package-lock.json"
            ),
            include_str!(
                "../../../../clients/node-sesamecare-redlock/versions/1.4.0/package-lock.json"
            ),
        ] {
            check_lock(Path::new("l"), shipped).unwrap();
        }
    }

    #[test]
    fn links_urls_and_missing_integrity_are_refused_with_the_line() {
        let v = "\"version\": \"2.1.3\"";
        let i = format!("\"integrity\": \"{I}\"");
        let r = |url: &str| format!("\"resolved\": \"{url}\"");
        let tgz = format!("{REGISTRY}ms/-/ms-9.9.9.tgz");
        let cases = [
            (v.to_string(), 5, "has no integrity"),
            (
                format!("{v},\n\"integrity\": \"sha1-abc\""),
                7,
                "is not `sha512-`",
            ),
            (
                format!("{v},\n{},\n{i}", r("file:../ms")),
                7,
                "no file:, git",
            ),
            (
                format!("{v},\n{},\n{i}", r("https://evil.example/ms-2.1.3.tgz")),
                7,
                "not the registry's tarball",
            ),
            (
                format!("{v},\n{},\n{i}", r(&tgz)),
                7,
                "not the registry's tarball",
            ),
            (
                format!("\"version\": \"git+ssh://git@e/x.git\",\n{i}"),
                6,
                "not an exact registry version",
            ),
            (format!("\"link\": true,\n{}", r("../ms")), 6, "is a link"),
        ];
        for (entry, line, what) in cases {
            let e = refused(&lock(&entry));
            assert!(
                e.starts_with(&format!("v/package-lock.json:{line}: ")) && e.contains(what),
                "{entry}: {e}"
            );
            assert!(e.contains("(hint: "), "{e}");
        }
        let e = refused(
            &lock("\"version\": \"2.1.3\"")
                .replace("\"lockfileVersion\": 3", "\"lockfileVersion\": 1"),
        );
        assert!(
            e.starts_with("v/package-lock.json:2: lockfileVersion 1"),
            "{e}"
        );
        let e = refused(&lock("").replace("node_modules/ms\"", "../outside\""));
        assert!(
            e.contains(":5: `../outside` is not a `node_modules/NAME` path"),
            "{e}"
        );
        let e = refused(
            &lock(&format!("\"version\": \"2.1.3\", \"integrity\": \"{I}\""))
                .replace("\"2.1.3\"}", "\"file:../ms\"}"),
        );
        assert!(
            e.contains(":4: dependencies: \"ms\": \"file:../ms\" is not an exact version"),
            "{e}"
        );
    }

    #[test]
    fn manifests_name_exact_versions_only() {
        let p = Path::new("v/package.json");
        check_manifest(
            p,
            r#"{"dependencies": {"@sesamecare-oss/redlock": "1.4.0"}}"#,
        )
        .unwrap();
        for bad in [
            r#"{"dependencies": {"x": "^1.0.0"}}"#,
            r#"{"dependencies": {"x": "github:e/x"}}"#,
            "{\n\"devDependencies\": {\"x\": \"link:../x\"}}",
        ] {
            let e = check_manifest(p, bad).unwrap_err();
            assert!(
                e.starts_with("v/package.json:") && e.contains("is not an exact version"),
                "{e}"
            );
        }
        assert!(check_manifest(p, "{\"workspaces\": [\"a\"]}")
            .unwrap_err()
            .contains("workspaces"));
    }
}
