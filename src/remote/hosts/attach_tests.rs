//! The `attach` table of a hosts file: what each field gives, and every
//! error, naming file, line, node and field.

use super::HostsFile;
use crate::remote::attach::{AttachRole, LogSource};
use crate::remote::Find;
use std::path::Path;

fn parse(text: &str) -> Result<HostsFile, String> {
    HostsFile::parse(Path::new("hosts.toml"), text)
}

const NODE: &str = "[[node]]\nname = \"e1\"\nhost = \"10.0.0.1\"\n";

#[test]
fn each_kind_of_attach_table_is_read() {
    let text = r#"[defaults]
programs = { systemctl = "/opt/stub/systemctl" }

[[node]]
name = "e1"
host = "10.0.0.1"
[node.attach]
unit = "etcd.service"

[[node]]
name = "e2"
host = "10.0.0.2"
base_port = 2379
[node.attach]
pidfile = "/run/e2.pid"
exe = "/usr/bin/etcd"
start = "/etc/init.d/etcd start"
log = "/var/log/etcd.log"

[[node]]
name = "s1"
host = "10.0.0.3"
attach = { exe = "/usr/bin/redis-sentinel", arg = "  --port   26379 ", start = "sh /s1.sh", client = "10.0.0.3:26379", role = "sentinel" }

[[node]]
name = "plain"
host = "10.0.0.4"
"#;
    let f = parse(text).unwrap();
    let a = f.nodes[0].attach.as_ref().unwrap();
    assert_eq!(
        a.find,
        Find::Unit {
            unit: "etcd.service".into()
        }
    );
    assert_eq!(a.start, "/opt/stub/systemctl start etcd.service");
    assert_eq!((a.client.clone(), a.role), (None, AttachRole::Server));
    assert_eq!(
        a.log,
        LogSource::Journal {
            unit: "etcd.service".into()
        }
    );
    assert_eq!(
        (a.systemctl.as_str(), a.journalctl.as_str()),
        ("/opt/stub/systemctl", "journalctl")
    );
    assert_eq!(a.line, 7);
    assert_eq!(a.client_or(f.nodes[0].address, 2379), "10.0.0.1:2379");
    let b = f.nodes[1].attach.as_ref().unwrap();
    assert_eq!(
        b.find,
        Find::Pidfile {
            pidfile: "/run/e2.pid".into(),
            exe: Some("/usr/bin/etcd".into())
        }
    );
    assert_eq!(b.client.as_deref(), Some("10.0.0.2:2379"));
    assert_eq!(
        b.log,
        LogSource::File {
            path: "/var/log/etcd.log".into()
        }
    );
    let c = f.nodes[2].attach.as_ref().unwrap();
    assert_eq!(
        c.find,
        Find::Exe {
            exe: "/usr/bin/redis-sentinel".into(),
            arg: "--port 26379".into()
        }
    );
    assert_eq!(
        (c.client.as_deref(), c.role, &c.log),
        (
            Some("10.0.0.3:26379"),
            AttachRole::Sentinel,
            &LogSource::None
        )
    );
    assert_eq!(c.start, "sh /s1.sh");
    assert!(f.nodes[3].attach.is_none());
}

/// Each bad attach table names the file, its line, the node and the field.
#[test]
fn each_attach_error_names_file_line_node_and_field() {
    let cases: &[(&str, &str)] = &[
        ("[node.attach]\nstart = \"x\"\n", "hosts.toml:4: node e1: field attach: says neither unit, pidfile nor exe"),
        ("[node.attach]\nunit = \"a.service\"\npidfile = \"/p\"\n", "hosts.toml:6: node e1: field attach.pidfile: given with unit"),
        ("[node.attach]\nunit = \"a.service\"\nexe = \"/x\"\n", "hosts.toml:6: node e1: field attach.exe: given with unit"),
        ("[node.attach]\nunit = \"a.service\"\narg = \"x\"\n", "hosts.toml:6: node e1: field attach.arg: only goes with exe"),
        ("[node.attach]\npidfile = \"/p\"\narg = \"x\"\nstart = \"s\"\n", "hosts.toml:6: node e1: field attach.arg: only goes with exe without pidfile"),
        ("[node.attach]\nexe = \"/x\"\nstart = \"s\"\n", "hosts.toml:5: node e1: field attach.arg: missing: exe needs arg"),
        ("[node.attach]\narg = \"x\"\nstart = \"s\"\n", "hosts.toml:5: node e1: field attach.arg: only goes with exe"),
        ("[node.attach]\npidfile = \"/p\"\n", "hosts.toml:4: node e1: field attach.start: missing"),
        ("[node.attach]\nexe = \"/x\"\narg = \"a\"\n", "hosts.toml:4: node e1: field attach.start: missing"),
        ("[node.attach]\nunit = \"-a\"\n", "hosts.toml:5: node e1: field attach.unit: \"-a\" is not a unit name"),
        ("[node.attach]\nunit = \"a b\"\n", "hosts.toml:5: node e1: field attach.unit: \"a b\" is not a unit name"),
        ("[node.attach]\npidfile = \"run/p\"\nstart = \"s\"\n", "hosts.toml:5: node e1: field attach.pidfile: \"run/p\" is not an absolute path"),
        ("[node.attach]\npidfile = \"/p\"\nexe = \"etcd\"\nstart = \"s\"\n", "hosts.toml:6: node e1: field attach.exe: \"etcd\" is not an absolute path"),
        ("[node.attach]\nexe = \"/x/../y\"\narg = \"a\"\nstart = \"s\"\n", "hosts.toml:5: node e1: field attach.exe: \"/x/../y\" contains .."),
        ("[node.attach]\nexe = \"/x\"\narg = \" \"\nstart = \"s\"\n", "hosts.toml:6: node e1: field attach.arg: is empty"),
        ("[node.attach]\npidfile = \"/p\"\nstart = \"a\\nrm -rf /\"\n", "hosts.toml:6: node e1: field attach.start: \"a\\nrm -rf /\" contains a control character"),
        ("[node.attach]\npidfile = \"/p\"\nstart = \"\"\n", "hosts.toml:6: node e1: field attach.start: is empty"),
        ("[node.attach]\nunit = \"a\"\nclient = \"10.0.0.1\"\n", "hosts.toml:6: node e1: field attach.client: \"10.0.0.1\" is not HOST:PORT"),
        ("[node.attach]\nunit = \"a\"\nclient = \"h:0\"\n", "hosts.toml:6: node e1: field attach.client: \"h:0\" is not HOST:PORT"),
        ("[node.attach]\nunit = \"a\"\nclient = \"a b:1\"\n", "hosts.toml:6: node e1: field attach.client:"),
        ("[node.attach]\nunit = \"a\"\nrole = \"leader\"\n", "hosts.toml:6: node e1: field attach.role: \"leader\" is not server or sentinel"),
        ("[node.attach]\npidfile = \"/p\"\nstart = \"s\"\nlog = \"journal\"\n", "hosts.toml:7: node e1: field attach.log: journal needs unit"),
        ("[node.attach]\nunit = \"a\"\nlog = \"etcd.log\"\n", "hosts.toml:6: node e1: field attach.log: \"etcd.log\" is not an absolute path"),
        // Unknown fields and wrong types go through toml_file.
        ("[node.attach]\nunit = \"a\"\nunti = \"a\"\n", "hosts.toml:6: node e1: field attach.unti: unknown field `unti`, expected one of `unit`"),
        ("[node.attach]\nunit = 3\n", "hosts.toml:5: node e1: field attach.unit: invalid type"),
        ("attach = { unit = \"a\", Unit = \"b\" }\n", "hosts.toml:4: node e1: field attach.Unit: unknown field"),
    ];
    for (tail, want) in cases {
        let text = format!("{NODE}{tail}");
        let e = parse(&text).unwrap_err();
        assert!(e.starts_with(want), "{text:?}:\n got  {e}\n want {want}");
    }
    let e = parse(&format!(
        "{NODE}[[node]]\nhost = \"10.0.0.2\"\n[node.attach]\nunit = \"a\"\nexe = 3\n"
    ))
    .unwrap_err();
    assert!(
        e.starts_with("hosts.toml:8: node host2: field attach.exe: invalid type"),
        "{e}"
    );
    let e = parse(&format!("[defaults]\nattach = {{ unit = \"a\" }}\n{NODE}")).unwrap_err();
    assert!(
        e.starts_with("hosts.toml:2: [defaults]: field attach: is not allowed in [defaults]"),
        "{e}"
    );
}

#[test]
fn a_copy_needs_no_key_files_beside_it() {
    let text =
        format!("[defaults]\nidentity_file = \"gone/id\"\n{NODE}[node.attach]\nunit = \"a\"\n");
    assert!(parse(&text).unwrap_err().contains("field identity_file"));
    let f = HostsFile::parse_copy(Path::new("/run/x/hosts.toml"), &text).unwrap();
    assert_eq!(
        f.nodes[0].target.identity_file.as_deref(),
        Some(Path::new("/run/x/gone/id"))
    );
}
