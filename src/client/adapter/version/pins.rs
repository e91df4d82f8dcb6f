//! What a version folder's `requirements.txt` may say (docs/adapters.md,
//! "What a version folder may hold"): only `name==version` lines, each with
//! one or more `--hash=sha256:...`, comments, blank lines and `\`
//! continuations as pip writes them. Nothing pip would fetch from anywhere
//! but its index, run from a path, or take as an option. The grammar is a
//! strict subset of pip's, read the way pip reads it (continuations joined
//! first, then ` #` comments dropped), so a file accepted here means to pip
//! what it means here. `clients/lib/build-env` checks the same again.

use std::collections::HashSet;
use std::path::Path;

/// One pin of a checked file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pin {
    pub name: String,
    pub version: String,
    pub hashes: Vec<String>,
    /// The line the pin starts on (1-based).
    pub line: usize,
}

/// A checked file's largest size: a pin file is a few kilobytes.
pub const MAX_BYTES: u64 = 1 << 20;

const HINT: &str = "hint: a version folder's requirements.txt holds only `name==version \
     --hash=sha256:HEX` lines, every dependency pinned; make one with `pip download --no-deps` \
     and `pip hash`, or `pip-compile --generate-hashes`; docs/adapters.md \"What a version folder \
     may hold\"";

/// Check `text`, the contents of `file` (named in errors): its pins, or an
/// error `FILE:LINE: what is wrong (hint: ...)`.
pub fn check(file: &Path, text: &str) -> Result<Vec<Pin>, String> {
    let err = |line: usize, what: String| format!("{}:{line}: {what} ({HINT})", file.display());
    let mut pins = Vec::new();
    let mut seen = HashSet::new();
    // pip splits lines at more than `\n` (`\r`, `\x0c`, `\u2028`...): any of
    // those could hide a line from this reading, so none is allowed.
    for (i, raw) in text.lines().enumerate() {
        if let Some(c) = raw
            .chars()
            .find(|&c| (c.is_control() && c != '\t') || c == '\u{2028}' || c == '\u{2029}')
        {
            return Err(err(
                i + 1,
                format!("the character {c:?} (only printable text, tabs and line ends)"),
            ));
        }
    }
    for (line, logical) in logical_lines(text) {
        let logical = strip_comment(&logical);
        let mut words = logical.split_ascii_whitespace();
        let Some(first) = words.next() else {
            continue;
        };
        let (name, version) = requirement(first).map_err(|what| err(line, what))?;
        let mut hashes = Vec::new();
        for w in words {
            hashes.push(hash(w).map_err(|what| err(line, what))?);
        }
        if hashes.is_empty() {
            return Err(err(
                line,
                format!(
                    "{name}=={version} has no `--hash=sha256:...` (pip installs it with \
                     --require-hashes)"
                ),
            ));
        }
        if !seen.insert(normalized(&name)) {
            return Err(err(line, format!("{name} is pinned twice")));
        }
        pins.push(Pin {
            name,
            version,
            hashes,
            line,
        });
    }
    Ok(pins)
}

/// pip's joining: a line ending in `\` (and not a comment) continues on the
/// next; a comment line ends a continuation. Each logical line with the
/// number of its first line. Characters outside printable ASCII are refused
/// later, as not part of any allowed word.
fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut open: Option<(usize, String)> = None;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let comment = is_comment(raw);
        if raw.ends_with('\\') && !comment {
            let part = raw.trim_end_matches('\\');
            match &mut open {
                Some((_, s)) => s.push_str(part),
                None => open = Some((n, part.to_string())),
            }
            continue;
        }
        let piece = if comment {
            format!(" {raw}")
        } else {
            raw.to_string()
        };
        match open.take() {
            Some((first, mut s)) => {
                s.push_str(&piece);
                out.push((first, s));
            }
            None => out.push((n, piece)),
        }
    }
    out.extend(open);
    out
}

/// Whether pip's comment pattern (`(^|\s+)#.*$`) matches `line` anywhere.
fn is_comment(line: &str) -> bool {
    comment_at(line).is_some()
}

fn comment_at(line: &str) -> Option<usize> {
    let b = line.as_bytes();
    (0..b.len()).find(|&i| b[i] == b'#' && (i == 0 || b[i - 1].is_ascii_whitespace()))
}

fn strip_comment(line: &str) -> &str {
    match comment_at(line) {
        Some(i) => &line[..i],
        None => line,
    }
}

/// `name==version`: a package name (letters, digits, `.`, `_`, `-`,
/// starting and ending with a letter or digit) and an exact version.
fn requirement(word: &str) -> Result<(String, String), String> {
    if word.starts_with('-') {
        let opt = word.split('=').next().unwrap_or(word);
        return Err(format!(
            "`{opt}` is an option; no option is allowed (only `--hash` after a pin)"
        ));
    }
    if word.contains("://") || word.contains('/') || word.starts_with('.') {
        return Err(format!(
            "`{word}` is a URL or a path; only `name==version` pins from the package index \
             are allowed"
        ));
    }
    let Some((name, version)) = word.split_once("==") else {
        return Err(format!(
            "`{word}` is not an exact pin `name==version` (no `>=`, `~=`, `!=`, ranges or \
             bare names)"
        ));
    };
    let alnum_ends = |s: &str| {
        s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
            && s.chars().last().is_some_and(|c| c.is_ascii_alphanumeric())
    };
    if !alnum_ends(name)
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    {
        return Err(format!(
            "`{name}` is not a package name (letters, digits, `.`, `_`, `-`; no extras `[...]`, \
             markers `;` or URLs `@`)"
        ));
    }
    if !alnum_ends(version)
        || !version
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".!+_-".contains(c))
    {
        return Err(format!(
            "`{word}`: `{version}` is not an exact version (letters, digits, `.`, `!`, `+`, \
             `_`, `-`; no `*`, `===`, `;` markers or `,` ranges)"
        ));
    }
    Ok((name.to_string(), version.to_string()))
}

/// `--hash=sha256:` and 64 hex digits: the hex, lowercase.
fn hash(word: &str) -> Result<String, String> {
    let Some(h) = word.strip_prefix("--hash=") else {
        let what = if word.starts_with('-') {
            format!(
                "`{}` is an option; only `--hash=sha256:...` may follow a pin",
                word.split('=').next().unwrap_or(word)
            )
        } else {
            format!("`{word}` after the pin: one pin a line, then only `--hash=sha256:...`")
        };
        return Err(what);
    };
    let Some(hex) = h.strip_prefix("sha256:") else {
        return Err(format!(
            "`{word}`: only sha256 hashes are allowed (`--hash=sha256:` and 64 hex digits)"
        ));
    };
    if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!(
            "`{word}`: a sha256 hash is 64 hex digits, this one has {}",
            hex.len()
        ));
    }
    Ok(hex.to_ascii_lowercase())
}

/// A name as the index compares it (PEP 503): `-`, `_`, `.` runs alike.
fn normalized(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        let c = if "._-".contains(c) {
            '-'
        } else {
            c.to_ascii_lowercase()
        };
        if !(c == '-' && out.ends_with('-')) {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: &str =
        "--hash=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn refused(text: &str) -> String {
        check(Path::new("v/requirements.txt"), text).unwrap_err()
    }

    #[test]
    fn pins_with_hashes_comments_and_continuations_pass() {
        let text = format!(
            "# sherlock 0.4.1, every dependency pinned\n\nsherlock==0.4.1 {H}  # the library\n\
             redis==4.6.0 \\\n    {H} \\\n    {H}\n    # via sherlock\nzope.interface==8.7 {H}\n"
        );
        let pins = check(Path::new("r.txt"), &text).unwrap();
        let got: Vec<_> = pins
            .iter()
            .map(|p| (p.name.as_str(), p.version.as_str(), p.hashes.len(), p.line))
            .collect();
        assert_eq!(
            got,
            [
                ("sherlock", "0.4.1", 1, 3),
                ("redis", "4.6.0", 2, 4),
                ("zope.interface", "8.7", 1, 8)
            ]
        );
        assert!(check(Path::new("r.txt"), "# nothing yet\n")
            .unwrap()
            .is_empty());
    }

    #[test]
    fn urls_paths_options_and_loose_pins_are_refused_with_file_and_line() {
        let cases = [
            (
                format!("# a\nhttps://example.com/x.tar.gz {H}\n"),
                2,
                "is a URL or a path",
            ),
            (
                format!("--index-url https://example.com/simple\nredis==3.0.0 {H}\n"),
                1,
                "`--index-url` is an option",
            ),
            (
                format!("redis==3.0.0 {H}\n--extra-index-url=https://e\n"),
                2,
                "`--extra-index-url` is an option",
            ),
            (format!("./evil {H}\n"), 1, "is a URL or a path"),
            (format!("/abs/evil {H}\n"), 1, "is a URL or a path"),
            ("-e .\n".to_string(), 1, "`-e` is an option"),
            ("-r other.txt\n".to_string(), 1, "`-r` is an option"),
            ("-f /tmp/wheels\n".to_string(), 1, "`-f` is an option"),
            (
                "redis==3.0.0\n".to_string(),
                1,
                "has no `--hash=sha256:...`",
            ),
            (format!("\n\nredis>=3.0 {H}\n"), 3, "not an exact pin"),
            (format!("redis~=3.0 {H}\n"), 1, "not an exact pin"),
            (format!("redis==3.* {H}\n"), 1, "not an exact version"),
            (
                format!("redis==3.0;python_version<'4' {H}\n"),
                1,
                "not an exact version",
            ),
            (
                format!("redis[hiredis]==3.0.0 {H}\n"),
                1,
                "not a package name",
            ),
            (
                format!("evil@https://e/x.whl {H}\n"),
                1,
                "is a URL or a path",
            ),
            (
                format!("redis==3.0.0 {H} --global-option=x\n"),
                1,
                "`--global-option` is an option",
            ),
            ("redis==3.0.0 --hash=md5:00\n".to_string(), 1, "only sha256"),
            (
                "redis==3.0.0 --hash=sha256:00\n".to_string(),
                1,
                "64 hex digits",
            ),
            (
                format!("redis==3.0.0 {H}\nRedis==3.0.1 {H}\n"),
                2,
                "pinned twice",
            ),
            (
                format!("redis==3.0.0 \\\n{H} \\\nsix==1 {H}\n"),
                1,
                "one pin a line",
            ),
            (format!("redis==${{V}} {H}\n"), 1, "not an exact version"),
            (
                format!("redis==3.0.0 {H}\n# hidden\r-e .\n"),
                2,
                "the character '\\r'",
            ),
            (
                format!("# hidden\u{2028}-e .\nredis==3.0.0 {H}\n"),
                1,
                "the character '\\u{2028}'",
            ),
        ];
        for (text, line, what) in cases {
            let e = refused(&text);
            assert!(
                e.starts_with(&format!("v/requirements.txt:{line}: ")) && e.contains(what),
                "{text:?}: {e}"
            );
            assert!(e.contains("(hint: "), "{e}");
        }
    }

    #[test]
    fn names_compare_as_the_index_does() {
        assert_eq!(normalized("Zope.Interface"), "zope-interface");
        assert_eq!(normalized("oslo__i18n"), "oslo-i18n");
    }
}
