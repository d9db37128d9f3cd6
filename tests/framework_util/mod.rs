//! The real frameworks for the framework tests: a Python venv or an npm prefix made once and kept
//! under `~/.cache/warren-tests/frameworks/` (`WARREN_TEST_CACHE` names another place; without a
//! home, `target/tmp/frameworks/`), so reruns and CI on a fresh clone after the first install are
//! fast, and the frameworks' own workers, started in the background and stopped by PID.
//!
//! Outside CI a machine without python3/pip (or npm) skips these tests with a message; under
//! `CI=true` a missing tool or a failed install fails them.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// Where installed frameworks are kept between runs.
fn cache_dir() -> PathBuf {
    // Outside the clone: a fresh clone (CI's) would otherwise install every framework again.
    std::env::var_os("WARREN_TEST_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/warren-tests")))
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")))
        .join("frameworks")
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Skips (outside CI) or fails (under CI) with `why`; returns `None` so callers can `?`-return.
pub fn unavailable<T>(why: &str) -> Option<T> {
    assert!(!in_ci(), "CI=true: the framework tests must run, but {why}");
    eprintln!("SKIPPED: {why} (these tests need it; under CI=true they fail instead)");
    None
}

fn ok(cmd: &mut std::process::Command) -> Result<(), String> {
    match cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "{cmd:?} exited {}: {}{}",
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )),
        Err(e) => Err(format!("{cmd:?}: {e}")),
    }
}

/// Makes `dir` by running `build` in a fresh sibling directory and renaming it into place, so a
/// half-made install is never used and two tests installing at once do not mix. `stamp` names
/// what was installed: a different stamp builds again.
fn cached(
    dir: &Path,
    stamp: &str,
    build: impl FnOnce(&Path) -> Result<(), String>,
) -> Result<(), String> {
    let stamp_file = dir.join(".warren-test-stamp");
    if std::fs::read_to_string(&stamp_file).is_ok_and(|s| s == stamp) {
        return Ok(());
    }
    let parent = dir.parent().ok_or("no parent directory")?;
    std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
    let tmp = parent.join(format!(
        ".{}-{}",
        dir.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("install"),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(|e| e.to_string())?;
    let built = build(&tmp).and_then(|()| {
        std::fs::write(tmp.join(".warren-test-stamp"), stamp).map_err(|e| e.to_string())
    });
    if let Err(e) = built {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    let _ = std::fs::remove_dir_all(dir);
    if std::fs::rename(&tmp, dir).is_err() {
        // Another test put its copy there first: use that one.
        let _ = std::fs::remove_dir_all(&tmp);
    }
    Ok(())
}

/// A venv with `requirements` installed (e.g. `["celery==5.7.0"]`); its `python`. Run the
/// framework as `python -m …`: a venv's scripts name the directory it was made in, its python
/// finds its packages wherever the venv now is (it is made beside its place and moved in).
pub fn python_venv(name: &str, requirements: &[&str]) -> Option<PathBuf> {
    let python = std::env::var("WARREN_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    if ok(std::process::Command::new(&python).arg("--version")).is_err() {
        return unavailable(&format!("{python} is not installed"));
    }
    let dir = cache_dir().join(name);
    let stamp = requirements.join(" ");
    let made = cached(&dir, &stamp, |tmp| {
        ok(std::process::Command::new(&python)
            .args(["-m", "venv"])
            .arg(tmp))?;
        ok(std::process::Command::new(tmp.join("bin/python"))
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(requirements))
    });
    match made {
        Ok(()) => Some(dir.join("bin/python")),
        Err(e) => unavailable(&format!("installing {stamp} into a venv failed: {e}")),
    }
}

/// An npm prefix with `packages` installed (e.g. `["rascal@20.1.1"]`); its `node_modules`.
pub fn npm_prefix(name: &str, packages: &[&str]) -> Option<PathBuf> {
    if ok(std::process::Command::new("node").arg("--version")).is_err()
        || ok(std::process::Command::new("npm").arg("--version")).is_err()
    {
        return unavailable("node and npm are not installed");
    }
    let dir = cache_dir().join(name);
    let stamp = packages.join(" ");
    let made = cached(&dir, &stamp, |tmp| {
        ok(std::process::Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--silent", "--prefix"])
            .arg(tmp)
            .args(packages))
    });
    match made {
        Ok(()) => Some(dir.join("node_modules")),
        Err(e) => unavailable(&format!("npm install {stamp} failed: {e}")),
    }
}

/// A framework's worker running in the background, its output in a log file. Stopped by PID
/// (SIGTERM, then SIGKILL if it does not go); dropping it kills it too.
pub struct Worker {
    child: tokio::process::Child,
    pub log: PathBuf,
    pub name: String,
}

impl Worker {
    pub fn start(name: &str, mut cmd: tokio::process::Command, log: PathBuf) -> Worker {
        let out = std::fs::File::create(&log).expect("worker log");
        let err = out.try_clone().expect("worker log");
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        Worker {
            child,
            log,
            name: name.to_string(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id().unwrap_or(0)
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Panics with the worker's log if it has exited already.
    pub fn assert_running(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!(
                "{} exited early ({status}):\n{}",
                self.name,
                self.log_text()
            );
        }
    }

    /// SIGTERM by PID, then SIGKILL after `grace`; returns once it is gone.
    pub async fn stop(mut self, grace: Duration) {
        // Already reaped: there is no PID any more, and `kill 0` would signal this test's whole
        // process group (its other children, and itself).
        if self.child.id().is_none() {
            return;
        }
        let pid = self.pid().to_string();
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status();
        if tokio::time::timeout(grace, self.child.wait())
            .await
            .is_err()
        {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid])
                .status();
            let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
        }
    }
}

/// Polls `f` until it returns `Some` or `timeout` passes (`common::wait::poll`).
pub async fn wait_for<T, F, Fut>(timeout: Duration, mut f: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    crate::common::wait::poll(timeout, || {
        let v = f();
        async move { v.await.ok_or(()) }
    })
    .await
    .ok()
}

/// Passive declare: (ready messages, consumers), or `None` when the queue does not exist (yet).
pub async fn queue_state(conn: &lapin::Connection, queue: &str) -> Option<(u32, u32)> {
    let ch = conn.create_channel().await.ok()?;
    let q = ch
        .queue_declare(
            queue.into(),
            lapin::options::QueueDeclareOptions {
                passive: true,
                ..Default::default()
            },
            lapin::types::FieldTable::default(),
        )
        .await
        .ok()?;
    let _ = ch.close(200, "checked".into()).await;
    Some((q.message_count(), q.consumer_count()))
}

/// `warren groups --json` as summary → count.
pub fn group_counts(groups: &[serde_json::Value]) -> std::collections::BTreeMap<String, u64> {
    groups
        .iter()
        .map(|g| {
            (
                g["summary"].as_str().unwrap_or_default().to_string(),
                g["count"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

/// A Node worker (`node app.js` in `dir`) with the npm prefix's modules, the broker URL, whether
/// it runs the fixed handler, and the file it writes each processed id to (`done.txt`).
pub fn node_worker(modules: &Path, dir: &Path, broker: &str, fixed: bool, log: &str) -> Worker {
    let mut cmd = tokio::process::Command::new("node");
    cmd.arg("app.js")
        .current_dir(dir)
        .env("NODE_PATH", modules)
        .env("WARREN_TEST_BROKER", broker)
        .env("WARREN_TEST_FIXED", if fixed { "1" } else { "0" })
        .env("WARREN_TEST_DONE", dir.join("done.txt"));
    Worker::start(log, cmd, dir.join(format!("{log}.log")))
}
