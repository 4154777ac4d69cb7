//! A real headless Chromium driven over WebDriver (Debian's `chromium` and `chromium-driver`,
//! which `.ci/run` installs): chromedriver on a free loopback port, in a process group of its
//! own so that dropping the guard ends it and every browser process it started.

use crate::support::{free_port, wait_for_port};
use fantoccini::{Client, ClientBuilder, Locator};
use proxops_test_support::workspace;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A program on `PATH`.
fn on_path(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |n| dir.join(n)))
        .find(|p| p.is_file())
}

/// chromedriver and the browser, or `None` after a message; a failure where CI (or
/// `PROXOPS_REQUIRE_SHARED=1`) says they must be there.
pub fn tools() -> Option<(PathBuf, PathBuf)> {
    let driver = on_path(&["chromedriver"]);
    let browser = on_path(&["chromium", "chromium-browser", "google-chrome"]);
    if let (Some(d), Some(b)) = (&driver, &browser) {
        return Some((d.clone(), b.clone()));
    }
    let required = std::env::var("CI").as_deref() == Ok("true")
        || std::env::var("PROXOPS_REQUIRE_SHARED").as_deref() == Ok("1");
    let missing = [
        ("chromedriver", driver.is_none()),
        ("chromium", browser.is_none()),
    ]
    .iter()
    .filter(|(_, m)| *m)
    .map(|(n, _)| *n)
    .collect::<Vec<_>>()
    .join(" and ");
    assert!(
        !required,
        "{missing} missing (CI: .ci/run installs Debian's chromium and chromium-driver)"
    );
    eprintln!("skipping: {missing} not on PATH (apt-get install chromium chromium-driver)");
    None
}

/// chromedriver and its browsers; killed, as a process group, when dropped.
pub struct Driver {
    child: Child,
    pub port: u16,
    _profile: tempfile::TempDir,
    pub browser: PathBuf,
}

impl Driver {
    pub fn start(driver: &Path, browser: &Path) -> Driver {
        use std::os::unix::process::CommandExt;
        let port = free_port();
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        let d = Driver {
            child,
            port,
            _profile: tempfile::tempdir().unwrap(),
            browser: browser.to_path_buf(),
        };
        assert!(
            wait_for_port(port, Duration::from_secs(30)),
            "chromedriver did not listen on 127.0.0.1:{port}"
        );
        d
    }

    /// A new headless browser session.
    pub async fn session(&self) -> Client {
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".to_owned(),
            serde_json::json!({
                "binary": self.browser,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--hide-scrollbars", "--force-device-scale-factor=1", "--window-size=1400,2400",
                    "--no-first-run", "--disable-extensions",
                    format!("--user-data-dir={}", self._profile.path().display()),
                ],
            }),
        );
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector)
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{}", self.port))
            .await
            .unwrap();
        client.set_window_size(1280, 900).await.unwrap();
        client
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // The group: chromedriver and the browser processes it started.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `probe` on the page every 100 ms until it answers, for at most `limit`.
pub async fn until<T, F, Fut>(limit: Duration, what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The text of the first element `css` selects, if any. A live update may replace the element
/// between finding and reading it (a stale element): then it is looked up again, for up to 2 s.
pub async fn text(client: &Client, css: &str) -> Option<String> {
    for _ in 0..40 {
        if let Ok(e) = client.find(Locator::Css(css)).await
            && let Ok(t) = e.text().await
        {
            return Some(t);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

/// Writes a screenshot of the page, `width` wide and as tall as its content (at most
/// `max_height`), as `<PROXOPS_SCREENSHOTS>/<name>.png` (relative to the workspace) when that
/// variable is set: normal runs leave the tree alone.
pub async fn screenshot(client: &Client, name: &str, width: u32, max_height: u32) {
    let Some(dir) = std::env::var_os("PROXOPS_SCREENSHOTS") else {
        return;
    };
    client.set_window_size(width, 600).await.unwrap();
    // The window's frame is not page: the browser started with a screen large enough for
    // the tallest page, and the window is made the page's height plus its frame.
    let measure =
        "return [document.documentElement.scrollHeight, window.outerHeight - window.innerHeight]";
    let sizes = client.execute(measure, vec![]).await.unwrap();
    let px = |i: usize| {
        sizes[i]
            .as_u64()
            .and_then(|v| u32::try_from(v).ok())
            .unwrap_or(0)
    };
    let height = px(0).clamp(400, max_height) + px(1);
    client.set_window_size(width, height).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let png = client.screenshot().await.unwrap();
    let dir = workspace().join(dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
    client.set_window_size(1280, 900).await.unwrap();
}

/// Clicks the first element `css` selects, looking it up again if a live update replaced it.
pub async fn click(client: &Client, css: &str) {
    for _ in 0..40 {
        if let Ok(e) = client.find(Locator::Css(css)).await
            && e.click().await.is_ok()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("cannot click {css}");
}

/// An attribute of the first element `css` selects, as [`text`] reads.
pub async fn attr(client: &Client, css: &str, name: &str) -> Option<String> {
    for _ in 0..40 {
        if let Ok(e) = client.find(Locator::Css(css)).await
            && let Ok(a) = e.attr(name).await
        {
            return a;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}
