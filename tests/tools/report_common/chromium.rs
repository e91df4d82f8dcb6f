//! Headless Chromium for the report tests: load a page, let its scripts
//! run, dump the DOM, and collect console errors from Chromium's log.

use std::path::Path;

/// A page as headless Chromium leaves it after its scripts ran, and
/// Chromium's log (console messages included).
pub struct Dom {
    pub html: String,
    pub log: String,
}

pub const CHROMIUM: &str = "/usr/bin/chromium";

/// Load `page` (with `fragment`, e.g. `#anom-0`) in headless Chromium and
/// dump its DOM. Panics with a hint when Chromium is missing.
pub fn chromium_dom(page: &Path, fragment: &str) -> Dom {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing (hint: apt-get install chromium, or LOCKJAW_WITH_CHROMIUM=1 make deps)"
    );
    let profile = tempfile::tempdir().unwrap();
    let url = format!(
        "file://{}{fragment}",
        page.canonicalize().unwrap().display()
    );
    let mut child = std::process::Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
        ])
        .args([
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .args(["--enable-logging=stderr", "--v=0", "--window-size=1280,900"])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(["--dump-dom", &url])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("chromium starts");
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let errs = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut err, &mut s).ok();
        s
    });
    let outs = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut out, &mut s).ok();
        s
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if std::time::Instant::now() > deadline {
            child.kill().ok();
            child.wait().ok();
            panic!("chromium did not finish loading {url} within 120 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Dom {
        html: outs.join().unwrap(),
        log: errs.join().unwrap(),
    }
}

/// Console errors in Chromium's log (uncaught exceptions, console.error).
pub fn console_errors(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| {
            l.contains("CONSOLE")
                && (l.contains("Uncaught") || l.contains("Error") || l.contains(":ERROR:"))
        })
        .collect()
}
