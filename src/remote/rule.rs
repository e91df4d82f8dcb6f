//! Whole-host network cuts as iptables rules on a host (the rule itself,
//! [`RemoteRule`], is undo-log data), and libfaketime control files there.

use super::host::{quote, SBIN_PATH};
use super::{Host, RemoteError};
use crate::undo::remote::{RemoteChain, RemoteRule};

/// The command after `iptables -w` that inserts (`-I`) or deletes (`-D`)
/// the rule.
fn command(r: &RemoteRule, op: &str) -> String {
    let (tool, chain, dir) = match (r.peer.is_ipv6(), r.chain) {
        (false, RemoteChain::Input) => ("iptables", "INPUT", "-s"),
        (false, RemoteChain::Output) => ("iptables", "OUTPUT", "-d"),
        (true, RemoteChain::Input) => ("ip6tables", "INPUT", "-s"),
        (true, RemoteChain::Output) => ("ip6tables", "OUTPUT", "-d"),
    };
    format!(
        "{SBIN_PATH} {tool} -w {op} {chain} {dir} {} -m comment --comment {} -j DROP",
        r.peer,
        quote(&r.comment)
    )
}

/// The shell line that inserts (`insert`) or deletes the rule, as the
/// host gets it (what `--attach --plan` prints).
pub fn rule_script(r: &RemoteRule, insert: bool) -> String {
    command(r, if insert { "-I" } else { "-D" })
}

/// The comment's own check (the run id is the lead's to prove at undo
/// time); here only the shape, so nothing odd reaches the remote shell.
fn shape(host: &Host, r: &RemoteRule) -> Result<(), RemoteError> {
    let id = r
        .comment
        .strip_prefix("lockjaw:")
        .and_then(|c| c.split(' ').next());
    r.check(id)
        .map_err(|e| RemoteError::on(host, format!("rule refused: {e}")))
}

/// Insert the rule on the host.
pub async fn insert_rule(host: &Host, r: &RemoteRule) -> Result<(), RemoteError> {
    shape(host, r)?;
    host.sh(&command(r, "-I")).await.map(drop)
}

/// Delete the rule on the host; a rule that is not there counts as deleted.
pub async fn delete_rule(host: &Host, r: &RemoteRule) -> Result<(), RemoteError> {
    shape(host, r)?;
    match host.sh(&command(r, "-D")).await {
        Ok(_) => Ok(()),
        // iptables says "does a matching rule exist" when there is none left.
        Err(e) if e.msg.contains("does a matching rule exist") => Ok(()),
        Err(e) => Err(e),
    }
}

/// The script that writes `previous` back to the libfaketime control
/// file `file` (the undo of [`set_clock`]); a file that is gone needs
/// nothing.
pub fn clock_back_script(file: &str, previous: &str) -> String {
    let f = quote(file);
    format!(
        "[ -f {f} ] || exit 0; printf '%s\\n' {} > {f}",
        quote(previous)
    )
}

/// The libfaketime control file `file` on the host: read the previous
/// offset (`+0` when there is none), write `offset` (the syntax
/// `Node::set_clock_offset` accepts). Written beside and renamed, so
/// libfaketime never reads half of it.
pub async fn set_clock(host: &Host, file: &str, offset: &str) -> Result<String, RemoteError> {
    crate::process::faketime::check_offset(offset).map_err(|e| RemoteError::on(host, e))?;
    if !file.starts_with('/') {
        return Err(RemoteError::on(
            host,
            format!("clock file {file:?} is not an absolute path"),
        ));
    }
    let (f, tmp) = (quote(file), quote(&format!("{file}.lockjaw-tmp")));
    let script = format!(
        "prev=$(head -n1 {f} 2>/dev/null)\n\
         mkdir -p \"$(dirname {f})\" && printf '%s\\n' {} > {tmp} && chmod 0644 {tmp} && mv -f {tmp} {f} || exit 1\n\
         printf '%s\\n' \"${{prev:-+0}}\"",
        quote(offset)
    );
    Ok(host.sh(&script).await?.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(comment: &str, peer: &str) -> RemoteRule {
        RemoteRule {
            chain: RemoteChain::Input,
            peer: peer.parse().unwrap(),
            comment: comment.into(),
        }
    }

    #[test]
    fn only_this_runs_rules_pass() {
        let r = rule("lockjaw:ab12 partition-node h1", "10.213.0.12");
        r.check(Some("ab12")).unwrap();
        assert!(command(&r, "-I").ends_with(
            "iptables -w -I INPUT -s 10.213.0.12 -m comment --comment 'lockjaw:ab12 partition-node h1' -j DROP"
        ));
        assert!(r
            .check(Some("ffff"))
            .unwrap_err()
            .contains("not this run's"));
        assert!(r.check(None).is_err());
        assert!(rule("lockjaw:ab12 x'; rm -rf /", "10.0.0.1")
            .check(Some("ab12"))
            .is_err());
        assert!(rule("lockjaw:ab12 x", "127.0.0.1")
            .check(Some("ab12"))
            .is_err());
        let v6 = RemoteRule {
            chain: RemoteChain::Output,
            ..rule("lockjaw:ab12 x", "fd00::2")
        };
        assert!(command(&v6, "-D").contains("ip6tables -w -D OUTPUT -d fd00::2 "));
    }
}
