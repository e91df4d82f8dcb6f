//! One `sh` kept open on a host through its ControlMaster, for the
//! commands on a fault's path (a pause, a resume): a command through it is
//! one round trip on an open channel, where `Host::sh` starts an `ssh`
//! client and a new session each time (~20 ms each on a loaded 2-core
//! machine). Each script runs in a subshell, its output (stdout and stderr)
//! followed by a marker line with its exit status.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// How long one command may take before the shell is given up.
const LIMIT: Duration = Duration::from_secs(15);

pub(crate) struct Shell {
    _child: Child,
    stdin: ChildStdin,
    out: BufReader<ChildStdout>,
    n: u64,
}

impl Shell {
    /// `ssh -S SOCKET -T x sh`: a shell on the master's host.
    pub(crate) fn open(socket: &Path) -> std::io::Result<Shell> {
        let mut child = Command::new("ssh")
            .arg("-S")
            .arg(socket)
            .args(["-T", "-o", "BatchMode=yes", "lockjaw-host", "sh"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| std::io::Error::other("no stdin"))?;
        let out = child
            .stdout
            .take()
            .ok_or_else(|| std::io::Error::other("no stdout"))?;
        Ok(Shell {
            _child: child,
            stdin,
            out: BufReader::new(out),
            n: 0,
        })
    }

    /// Run `script`; (exit status, its output).
    pub(crate) async fn run(&mut self, script: &str) -> std::io::Result<(i32, String)> {
        tokio::time::timeout(LIMIT, self.exchange(script))
            .await
            .map_err(|_| std::io::Error::other(format!("no answer within {LIMIT:?}")))?
    }

    async fn exchange(&mut self, script: &str) -> std::io::Result<(i32, String)> {
        self.n += 1;
        let marker = format!("__lockjaw_done_{}__", self.n);
        let text = format!("(\n{script}\n) </dev/null 2>&1; echo \"{marker} $?\"\n");
        self.stdin.write_all(text.as_bytes()).await?;
        self.stdin.flush().await?;
        let mut out = String::new();
        loop {
            let mut line = String::new();
            if self.out.read_line(&mut line).await? == 0 {
                return Err(std::io::Error::other("the shell on the host ended"));
            }
            if let Some(rest) = line.strip_prefix(&marker) {
                let code = rest.trim().parse().unwrap_or(-1);
                return Ok((code, out));
            }
            out.push_str(&line);
        }
    }
}
