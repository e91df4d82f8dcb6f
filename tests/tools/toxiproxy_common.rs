//! Helpers shared by the toxiproxy integration tests: a real redis-server
//! owned by a guard (killed by its own child handle on drop, also when a
//! test panics), raw RESP over TCP, raw HTTP to the API, and small polling
//! helpers.
//!
//! Fixed ports come from 30000–32767 (below Linux's ephemeral range, inside
//! the range this module's tests may use); everything else uses port 0.

#![allow(dead_code)]

use std::io;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A redis-server on 127.0.0.1:`port`, stopped when dropped.
pub struct Redis {
    pub port: u16,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Redis {
    /// Start redis-server and wait (polling, generous deadline) until it
    /// answers PING.
    pub fn start(port: u16) -> Redis {
        let dir = tempfile::tempdir().expect("temp dir");
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .args(["--loglevel", "warning", "--daemonize", "no"])
            .arg("--dir")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect(
                "redis-server must be installed (make test installs it: scripts/install-deps.sh)",
            );
        let mut redis = Redis {
            port,
            child,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Ok(Some(status)) = redis.child.try_wait() {
                panic!(
                    "redis-server on port {port} exited at start ({status}); is the port taken?"
                );
            }
            if ping_blocking(port) {
                return redis;
            }
            assert!(
                Instant::now() < deadline,
                "redis-server on port {port} did not answer PING in 15 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        // Our own child, signalled through its handle (never by name).
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ping_blocking(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    let mut buf = [0u8; 7];
    s.write_all(b"PING\r\n").is_ok() && s.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

/// Encode a command as a RESP array of bulk strings.
pub fn resp(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// The RESP reply of GET for `value`.
pub fn bulk(value: &[u8]) -> Vec<u8> {
    let mut out = format!("${}\r\n", value.len()).into_bytes();
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
    out
}

pub async fn connect(addr: &str) -> TcpStream {
    let s = TcpStream::connect(addr)
        .await
        .unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    s.set_nodelay(true).unwrap();
    s
}

/// Send `cmd` and read exactly `expect.len()` bytes, within `within`.
pub async fn roundtrip(
    s: &mut TcpStream,
    cmd: &[u8],
    expect: &[u8],
    within: Duration,
) -> io::Result<Vec<u8>> {
    s.write_all(cmd).await?;
    let mut buf = vec![0u8; expect.len()];
    tokio::time::timeout(within, s.read_exact(&mut buf))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no reply in time"))??;
    Ok(buf)
}

/// PING and check PONG; returns the round-trip time.
pub async fn ping(s: &mut TcpStream) -> Duration {
    let t = Instant::now();
    let got = roundtrip(s, b"PING\r\n", b"+PONG\r\n", Duration::from_secs(20))
        .await
        .expect("PING through the proxy");
    assert_eq!(got, b"+PONG\r\n");
    t.elapsed()
}

/// How a connection ended when we waited for it to end.
#[derive(Debug, PartialEq, Eq)]
pub enum Closed {
    Eof,
    Reset,
    OtherError(io::ErrorKind),
    StillOpen,
}

/// Read until the peer closes (returning any bytes seen), or `within` passes.
pub async fn wait_closed(s: &mut TcpStream, within: Duration) -> (Closed, Vec<u8>) {
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + within;
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Err(_) => return (Closed::StillOpen, seen),
            Ok(Ok(0)) => return (Closed::Eof, seen),
            Ok(Ok(n)) => seen.extend_from_slice(&buf[..n]),
            Ok(Err(e)) if e.kind() == io::ErrorKind::ConnectionReset => {
                return (Closed::Reset, seen)
            }
            Ok(Err(e)) => return (Closed::OtherError(e.kind()), seen),
        }
    }
}

/// Poll `f` until it returns true or `within` passes.
pub async fn eventually<F, Fut>(within: Duration, mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    loop {
        if f().await {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Deterministic pseudo-random bytes (no zero runs, all byte values).
pub fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// One raw HTTP exchange with a Toxiproxy API: status, the response
/// headers, the body as text.
pub struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub text: String,
}

impl Answer {
    /// The body as JSON, or null.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.text).unwrap_or(serde_json::Value::Null)
    }
    /// A header's value, or "".
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

/// Raw HTTP: method, path under `base`, optional body.
pub async fn http(base: &str, method: &str, path: &str, body: Option<&str>) -> Answer {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut req = reqwest::Client::new().request(method, format!("{base}{path}"));
    if let Some(b) = body {
        req = req.body(b.to_string());
    }
    let resp = req
        .send()
        .await
        .expect("HTTP request to the embedded server");
    Answer {
        status: resp.status().as_u16(),
        headers: resp.headers().clone(),
        text: resp.text().await.unwrap(),
    }
}
