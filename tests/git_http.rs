//! A git server over smart HTTP on loopback for the tests: `git http-backend` (git's own CGI
//! program) behind a minimal HTTP/1.1 front that demands Basic authentication with one token
//! as the password, the way a forge demands a personal access token.

// Test support: a panic is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One request: its path, its Authorization header, the status answered.
pub type Request = (String, Option<String>, u16);

/// The server; it stops when dropped.
pub struct GitHttp {
    pub port: u16,
    stop: Arc<AtomicBool>,
    /// What each request presented: (path, the Authorization header, the status answered).
    log: Arc<Mutex<Vec<Request>>>,
}

impl GitHttp {
    /// Serves the bare repositories under `root`; a request is answered only when its Basic
    /// credentials carry `token` as the password (any user name).
    pub fn start(root: &Path, token: &str) -> GitHttp {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let log = Arc::new(Mutex::new(Vec::new()));
        let (root, token) = (root.to_path_buf(), token.to_owned());
        let (stop2, log2) = (Arc::clone(&stop), Arc::clone(&log));
        std::thread::spawn(move || {
            // Bounded: at most ten minutes, whatever the test does.
            for _ in 0..60_000 {
                if stop2.load(Ordering::Relaxed) {
                    return;
                }
                match listener.accept() {
                    Ok((stream, _)) => {
                        let (root, token, log) = (root.clone(), token.clone(), Arc::clone(&log2));
                        std::thread::spawn(move || serve(stream, &root, &token, &log));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        GitHttp { port, stop, log }
    }

    /// `http://127.0.0.1:<port>/<name>`, with `userinfo@` when given.
    pub fn url(&self, userinfo: Option<&str>, name: &str) -> String {
        let at = userinfo.map(|u| format!("{u}@")).unwrap_or_default();
        format!("http://{at}127.0.0.1:{}/{name}", self.port)
    }

    /// The requests answered so far.
    pub fn requests(&self) -> Vec<Request> {
        self.log.lock().unwrap().clone()
    }
}

impl Drop for GitHttp {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A bare copy of `work` at `<root>/<name>`, accepting pushes from authenticated users.
pub fn bare_copy(work: &Path, root: &Path, name: &str) -> PathBuf {
    let bare = root.join(name);
    let out = Command::new("git")
        .args(["clone", "--quiet", "--bare"])
        .arg(work)
        .arg(&bare)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    bare
}

fn serve(stream: TcpStream, root: &Path, token: &str, log: &Mutex<Vec<Request>>) {
    stream.set_nonblocking(false).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let mut parts = line.split_whitespace();
    let (method, target) = (
        parts.next().unwrap_or_default().to_owned(),
        parts.next().unwrap_or_default().to_owned(),
    );
    let mut headers: Vec<(String, String)> = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let body = read_body(
        &mut reader,
        header("content-length"),
        header("transfer-encoding"),
    );
    let auth = header("authorization");
    let (path, query) = target.split_once('?').unwrap_or((target.as_str(), ""));
    let user = auth.as_deref().and_then(|a| user_with_token(a, token));
    let mut out = stream;
    let Some(user) = user else {
        log.lock().unwrap().push((path.to_owned(), auth, 401));
        let _ = out.write_all(
            b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"git\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
        return;
    };
    let mut cgi = Command::new("git");
    cgi.arg("http-backend")
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REQUEST_METHOD", &method)
        .env("PATH_INFO", path)
        .env("QUERY_STRING", query)
        .env("REMOTE_USER", &user)
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("CONTENT_LENGTH", body.len().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (name, var) in [
        ("content-type", "CONTENT_TYPE"),
        ("content-encoding", "HTTP_CONTENT_ENCODING"),
        ("git-protocol", "HTTP_GIT_PROTOCOL"),
    ] {
        if let Some(v) = header(name) {
            cgi.env(var, v);
        }
    }
    let mut child = cgi.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feed = std::thread::spawn(move || {
        let _ = stdin.write_all(&body);
    });
    let output = child.wait_with_output().unwrap();
    let _ = feed.join();
    let raw = output.stdout;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4))
        .or_else(|| raw.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2)));
    let (head, rest) = match split {
        Some((i, n)) => (
            String::from_utf8_lossy(&raw[..i]).into_owned(),
            &raw[i + n..],
        ),
        None => (String::new(), &raw[..]),
    };
    let mut status = "200 OK".to_owned();
    let mut response = String::new();
    for h in head.lines().map(str::trim_end).filter(|h| !h.is_empty()) {
        match h.strip_prefix("Status:") {
            Some(s) => status = s.trim().to_owned(),
            None => response.push_str(&format!("{h}\r\n")),
        }
    }
    let code = status
        .split_whitespace()
        .next()
        .and_then(|c| c.parse().ok())
        .unwrap_or(500);
    log.lock().unwrap().push((path.to_owned(), auth, code));
    let _ = out.write_all(
        format!(
            "HTTP/1.1 {status}\r\n{response}Content-Length: {}\r\nConnection: close\r\n\r\n",
            rest.len()
        )
        .as_bytes(),
    );
    let _ = out.write_all(rest);
}

fn read_body(
    reader: &mut impl BufRead,
    length: Option<String>,
    encoding: Option<String>,
) -> Vec<u8> {
    let mut body = Vec::new();
    if encoding.is_some_and(|e| e.eq_ignore_ascii_case("chunked")) {
        loop {
            let mut size = String::new();
            if reader.read_line(&mut size).unwrap_or(0) == 0 {
                break;
            }
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if n == 0 {
                let mut end = String::new();
                let _ = reader.read_line(&mut end);
                break;
            }
            let mut chunk = vec![0; n + 2];
            reader.read_exact(&mut chunk).unwrap();
            body.extend_from_slice(&chunk[..n]);
        }
    } else if let Some(n) = length.and_then(|l| l.parse::<usize>().ok()) {
        body.resize(n, 0);
        reader.read_exact(&mut body).unwrap();
    }
    body
}

/// The user of Basic credentials `header` whose password is `token`.
fn user_with_token(header: &str, token: &str) -> Option<String> {
    let encoded = header.strip_prefix("Basic ")?;
    let decoded = String::from_utf8(decode_base64(encoded.trim())?).ok()?;
    let (user, password) = decoded.split_once(':')?;
    (password == token).then(|| user.to_owned())
}

fn decode_base64(text: &str) -> Option<Vec<u8>> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bits = 0u32;
    let mut count = 0;
    let mut out = Vec::new();
    for c in text.bytes().filter(|c| *c != b'=') {
        bits = (bits << 6) | ALPHABET.iter().position(|a| *a == c)? as u32;
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
            bits &= (1 << count) - 1;
        }
    }
    Some(out)
}
