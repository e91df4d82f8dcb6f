//! One multiplexed SSH connection to a host (the `openssh` crate's
//! process mux: one `ssh` ControlMaster per host per run; every command
//! after the handshake is a channel on it).
//!
//! The master is started with `ControlPersist=no` and ended with
//! `ssh -O exit` by [`Host::close`] (and by the crate when a `Host` is
//! dropped), so a normal exit leaves no `ssh` process. A lockjaw killed
//! with SIGKILL leaves its master: the `SshMaster` undo entry (pushed by
//! whoever connects, with [`Host::control_socket`]) lets `lockjaw heal`
//! end it.

use super::{RemoteError, SshTarget};
use openssh::{ControlPersist, KnownHosts, SessionBuilder, Stdio};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;

/// The directory the ControlMaster sockets live under:
/// `temp_dir()/lockjaw-ssh` (short, so the socket path fits 108 bytes).
pub fn control_root() -> PathBuf {
    std::env::temp_dir().join("lockjaw-ssh")
}

/// How long the handshake may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// `sun_path` of a Unix socket, with its closing NUL.
const SUN_PATH: usize = 108;

/// What the socket path adds to the control directory: openssh's
/// `/.ssh-connectionXXXXXX/master` and the `.XXXXXXXXXXXXXXXX` suffix ssh
/// binds first and renames.
const SOCKET_SUFFIX: usize = "/.ssh-connectionXXXXXX/master".len() + ".XXXXXXXXXXXXXXXX".len();

/// One multiplexed SSH connection.
pub struct Host {
    name: String,
    target: SshTarget,
    session: openssh::Session,
    socket: PathBuf,
    /// The shell kept open for [`Host::quick`], once opened.
    shell: tokio::sync::Mutex<Option<super::shell::Shell>>,
}

/// Create `dir` (and its parents) with mode 0700 and refuse one that
/// others could write.
fn private_dir(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| {
            format!(
                "cannot create the SSH control directory {}: {e}",
                dir.display()
            )
        })?;
    let m = std::fs::symlink_metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if !m.is_dir() || m.uid() != rustix::process::geteuid().as_raw() {
        return Err(format!(
            "the SSH control directory {} is not a directory of this user",
            dir.display()
        ));
    }
    if m.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    Ok(())
}

/// Why a target cannot be handed to ssh (a destination or user that ssh
/// would read as an option; an undo entry is data from a file).
pub(crate) fn check_target(t: &SshTarget) -> Result<(), String> {
    let word = |what: &str, s: &str| {
        if s.is_empty()
            || s.starts_with('-')
            || s.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            Err(format!("{what} {s:?} is not a plain SSH {what}"))
        } else {
            Ok(())
        }
    };
    word("host", &t.host)?;
    if let Some(u) = &t.user {
        word("user", u)?;
    }
    if t.port == Some(0) {
        return Err("port 0".into());
    }
    Ok(())
}

/// The message of an openssh error, with its causes.
fn chain(e: &dyn std::error::Error) -> String {
    let mut m = e.to_string();
    let mut s = e.source();
    while let Some(c) = s {
        let t = c.to_string();
        let t = t.trim();
        if !t.is_empty() {
            m.push_str(": ");
            m.push_str(t);
        }
        s = c.source();
    }
    m
}

impl Host {
    /// Connect (ConnectTimeout 5 s, BatchMode, strict known_hosts when
    /// given). The ControlPath lives under `control_dir` and must fit in
    /// 108 bytes.
    pub async fn connect(
        name: &str,
        target: &SshTarget,
        control_dir: &Path,
    ) -> Result<Host, RemoteError> {
        let fail = |msg: String| RemoteError {
            host: format!("{name} ({target})"),
            msg,
        };
        check_target(target).map_err(&fail)?;
        let longest = control_dir.as_os_str().len() + SOCKET_SUFFIX;
        if longest >= SUN_PATH {
            return Err(fail(format!(
                "the SSH control socket under {} would take {longest} bytes, over the {} a Unix socket path holds (hint: set TMPDIR to a short directory such as /tmp)",
                control_dir.display(),
                SUN_PATH - 1
            )));
        }
        private_dir(control_dir).map_err(&fail)?;
        let mut b = SessionBuilder::default();
        b.connect_timeout(CONNECT_TIMEOUT)
            .server_alive_interval(Duration::from_secs(5))
            .control_directory(control_dir)
            .control_persist(ControlPersist::ClosedAfterInitialConnection)
            .known_hosts_check(KnownHosts::Strict);
        if let Some(k) = &target.known_hosts {
            b.user_known_hosts_file(k);
        }
        if let Some(k) = &target.identity_file {
            b.keyfile(k);
        }
        if let Some(u) = &target.user {
            b.user(u.clone());
        }
        if let Some(p) = target.port {
            b.port(p);
        }
        let t0 = Instant::now();
        let session = b.connect(&target.host).await.map_err(|e| {
            let mut m = format!("cannot connect over SSH: {}", chain(&e));
            if t0.elapsed() >= CONNECT_TIMEOUT {
                m.push_str(&format!(
                    " (no answer within {} s)",
                    CONNECT_TIMEOUT.as_secs()
                ));
            }
            if m.contains("Host key verification failed") {
                m.push_str(" (hint: the host's key is not in the known_hosts file, or differs)");
            } else if m.contains("Permission denied") {
                m.push_str(" (hint: check user and identity_file)");
            }
            fail(m)
        })?;
        let socket = session.control_socket().to_path_buf();
        Ok(Host {
            name: name.to_string(),
            target: target.clone(),
            session,
            socket,
            shell: tokio::sync::Mutex::new(None),
        })
    }

    /// Run `sh` SCRIPT through the shell this connection keeps open (one
    /// round trip; opened on first use); Ok(output) on exit 0, Err with
    /// the output otherwise. Falls back to [`Host::sh`] when that shell
    /// cannot be opened or has ended.
    pub async fn quick(&self, script: &str) -> Result<String, RemoteError> {
        let mut g = self.shell.lock().await;
        if g.is_none() {
            *g = super::shell::Shell::open(&self.socket).ok();
        }
        let r = match g.as_mut() {
            Some(sh) => sh.run(script).await,
            None => return self.sh(script).await,
        };
        match r {
            Ok((0, out)) => Ok(out),
            Ok((code, out)) => Err(RemoteError::on(
                self,
                format!(
                    "`{}` exited with {code}: {}",
                    first_line(script),
                    out.trim()
                ),
            )),
            Err(_) => {
                *g = None;
                drop(g);
                self.sh(script).await
            }
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn target(&self) -> &SshTarget {
        &self.target
    }

    /// `NAME (TARGET)`, for messages.
    pub(crate) fn label(&self) -> String {
        format!("{} ({})", self.name, self.target)
    }

    /// The ControlMaster's socket (for the SshMaster undo entry).
    pub fn control_socket(&self) -> PathBuf {
        self.socket.clone()
    }

    /// Run `sh -c SCRIPT` on the host, feeding it `input`; the output.
    async fn run(
        &self,
        script: &str,
        input: Option<&str>,
    ) -> Result<std::process::Output, RemoteError> {
        let mut cmd = self.session.command("sh");
        cmd.arg("-c")
            .arg(script)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let ssh = |e: openssh::Error| RemoteError::on(self, chain(&e));
        let out = match input {
            None => cmd.stdin(Stdio::null()).output().await.map_err(ssh)?,
            Some(text) => {
                let mut child = cmd.stdin(Stdio::piped()).spawn().await.map_err(ssh)?;
                if let Some(mut stdin) = child.stdin().take() {
                    stdin
                        .write_all(text.as_bytes())
                        .await
                        .map_err(|e| RemoteError::on(self, format!("cannot send the file: {e}")))?;
                    drop(stdin);
                }
                child.wait_with_output().await.map_err(ssh)?
            }
        };
        if out.status.success() {
            return Ok(out);
        }
        let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
        let code = out
            .status
            .code()
            .map_or("a signal".to_string(), |c| c.to_string());
        Err(RemoteError::on(
            self,
            format!("`{}` exited with {code}: {err}", first_line(script)),
        ))
    }

    /// Run `sh -c SCRIPT` on the host; Ok(stdout) on exit 0, Err with
    /// stderr otherwise.
    pub async fn sh(&self, script: &str) -> Result<String, RemoteError> {
        let out = self.run(script, None).await?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Write a file (mkdir -p its parent), mode 0644: into a temporary
    /// file beside it, then renamed, so a reader never sees half of it.
    pub async fn write_file(&self, path: &str, text: &str) -> Result<(), RemoteError> {
        let p = quote(path);
        let tmp = quote(&format!("{path}.lockjaw-tmp"));
        let script = format!(
            "umask 022 && mkdir -p \"$(dirname {p})\" && cat > {tmp} && chmod 0644 {tmp} && mv -f {tmp} {p}"
        );
        self.run(&script, Some(text)).await.map(drop)
    }

    pub async fn read_file(&self, path: &str) -> Result<String, RemoteError> {
        self.sh(&format!("cat -- {}", quote(path))).await
    }

    /// What is missing on the host: each program (resolved via PATH unless
    /// absolute), `iptables` if asked, the faketime preload libraries if
    /// asked. Err names every missing tool.
    pub async fn check_tools(
        &self,
        programs: &[String],
        iptables: bool,
        faketime: Option<&str>,
    ) -> Result<(), RemoteError> {
        let mut script = String::from(SBIN_PATH);
        for p in programs {
            let q = quote(p);
            if p.starts_with('/') {
                script.push_str(&format!(
                    "; [ -f {q} ] && [ -x {q} ] || echo {}",
                    quote(&format!("{p} (no such executable)"))
                ));
            } else {
                script.push_str(&format!(
                    "; command -v {q} >/dev/null 2>&1 || echo {}",
                    quote(&format!("{p} (not found in PATH)"))
                ));
            }
        }
        if iptables {
            script.push_str(
                "; command -v iptables >/dev/null 2>&1 || echo 'iptables (not found in PATH, /usr/sbin or /sbin)'",
            );
        }
        for lib in faketime.unwrap_or("").split_whitespace() {
            script.push_str(&format!(
                "; [ -r {} ] || echo {}",
                quote(lib),
                quote(&format!("{lib} (no such library)"))
            ));
        }
        let out = self.sh(&script).await?;
        let missing: Vec<&str> = out.lines().filter(|l| !l.is_empty()).collect();
        if missing.is_empty() {
            return Ok(());
        }
        Err(RemoteError::on(
            self,
            format!(
                "missing: {} (hint: install them there, or name their paths in the hosts file's programs)",
                missing.join(", ")
            ),
        ))
    }

    /// Close the master (`ssh -O exit`).
    pub async fn close(self) {
        let _ = self.session.close().await;
    }
}

/// The connections this process holds open, by target: an undo entry
/// taken back while the run still runs uses its host's connection instead
/// of a new handshake.
static LIVE: std::sync::Mutex<Vec<(SshTarget, std::sync::Weak<Host>)>> =
    std::sync::Mutex::new(Vec::new());

impl Host {
    /// Share this connection, and let [`live`] find it.
    pub fn shared(self) -> std::sync::Arc<Host> {
        let a = std::sync::Arc::new(self);
        let mut l = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        l.retain(|(_, w)| w.strong_count() > 0);
        l.push((a.target.clone(), std::sync::Arc::downgrade(&a)));
        a
    }
}

/// A connection to `target` this process holds open, if any.
pub fn live(target: &SshTarget) -> Option<std::sync::Arc<Host>> {
    let l = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    l.iter()
        .filter(|(t, _)| t == target)
        .find_map(|(_, w)| w.upgrade())
}

/// Prefixed to scripts that run system tools: a non-root login shell's
/// PATH may lack the sbin directories.
pub(crate) const SBIN_PATH: &str = "PATH=\"$PATH:/usr/sbin:/sbin\"";

/// One word for the remote shell.
pub fn quote(s: &str) -> String {
    // try_quote fails only on a NUL byte, which no remote path or argument
    // can hold; such a word is passed as an empty one.
    shlex::try_quote(s).map_or_else(|_| "''".to_string(), |q| q.into_owned())
}

fn first_line(script: &str) -> String {
    let l = script.lines().next().unwrap_or("");
    if l.len() > 80 || script.contains('\n') {
        format!("{}…", l.chars().take(80).collect::<String>())
    } else {
        l.to_string()
    }
}
