//! Test harness for real brokers. Every test gets its own vhost (random name), created through
//! the management API and deleted when the test ends, so tests run in parallel and leave nothing.
//!
//! Brokers: RabbitMQ on 127.0.0.1:5672/15672 always (override with WARREN_TEST_AMQP_URL /
//! WARREN_TEST_MANAGEMENT_URL); 4.0 and 4.3 when `scripts/test` brought them up and listed them
//! in WARREN_TEST_VERSIONS (e.g. "4.0,4.3").
#![allow(dead_code)]

pub mod amqp;
pub mod drain;
pub mod wait;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[derive(Clone, Debug)]
pub struct TestBroker {
    /// "3.10", "4.0", "4.3" — the label the version was brought up as.
    pub label: String,
    pub amqp_port: u16,
    pub mgmt_port: u16,
    pub host: String,
}

impl TestBroker {
    pub fn default_broker() -> TestBroker {
        let amqp = std::env::var("WARREN_TEST_AMQP_URL").ok();
        let mgmt = std::env::var("WARREN_TEST_MANAGEMENT_URL").ok();
        let port_of = |url: Option<String>, default: u16| {
            url.and_then(|u| {
                u.rsplit(':')
                    .next()
                    .and_then(|p| p.split('/').next().map(str::to_string))
            })
            .and_then(|p| p.parse().ok())
            .unwrap_or(default)
        };
        TestBroker {
            label: "3.10".into(),
            amqp_port: port_of(amqp, 5672),
            mgmt_port: port_of(mgmt, 15672),
            host: "127.0.0.1".into(),
        }
    }

    /// The default broker plus every extra version scripts/test brought up.
    pub fn all() -> Vec<TestBroker> {
        let mut out = vec![TestBroker::default_broker()];
        if let Ok(list) = std::env::var("WARREN_TEST_VERSIONS") {
            for v in list.split(',').map(str::trim).filter(|v| !v.is_empty()) {
                let (a, m) = match v {
                    "4.0" => (5673, 15673),
                    "4.3" => (5674, 15674),
                    other => panic!("WARREN_TEST_VERSIONS names unknown version {other}"),
                };
                out.push(TestBroker {
                    label: v.into(),
                    amqp_port: a,
                    mgmt_port: m,
                    host: "127.0.0.1".into(),
                });
            }
        }
        out
    }

    /// Runs `test` on every broker at once, each in a task of its own, and waits for all of
    /// them. The brokers are independent (each run makes its own vhost, Home and store), so a
    /// test whose time goes on waiting (patience, locks, rates, deadlines) need not wait for
    /// them one after another. A broker's failure fails the test once the others have finished
    /// (and cleaned up), named with its label. A run that blocks its thread (tmux, processes)
    /// wants a multi-threaded runtime with a thread per broker.
    pub async fn each<F, Fut>(test: F)
    where
        F: Fn(TestBroker) -> Fut,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        TestBroker::each_of(TestBroker::all(), test).await
    }

    /// [`TestBroker::each`] over some of the brokers (those a test applies to).
    pub async fn each_of<F, Fut>(brokers: Vec<TestBroker>, test: F)
    where
        F: Fn(TestBroker) -> Fut,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let runs = brokers.into_iter().map(|b| {
            let label = b.label.clone();
            let run = tokio::spawn(test(b));
            async move { (label, run.await) }
        });
        let mut failed: Option<Box<dyn std::any::Any + Send>> = None;
        for (label, result) in futures_util::future::join_all(runs).await {
            if let Err(e) = result {
                eprintln!("RabbitMQ {label}: failed");
                if failed.is_none() {
                    failed = Some(if e.is_panic() {
                        e.into_panic()
                    } else {
                        Box::new(format!("RabbitMQ {label}: {e}"))
                    });
                }
            }
        }
        if let Some(panic) = failed {
            std::panic::resume_unwind(panic);
        }
    }

    pub fn mgmt_base(&self) -> String {
        format!("http://{}:{}", self.host, self.mgmt_port)
    }

    /// AMQP URL for a vhost (percent-encoded).
    pub fn amqp_url(&self, vhost: &str) -> String {
        format!(
            "amqp://guest:guest@{}:{}/{}",
            self.host,
            self.amqp_port,
            enc(vhost)
        )
    }

    /// Management URL with credentials, as a user would pass to `--management-url`.
    pub fn mgmt_url_with_creds(&self) -> String {
        format!("http://guest:guest@{}:{}", self.host, self.mgmt_port)
    }
}

pub fn enc(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A unique name for this test run: `prefix-<pid>-<nanos>-<n>`.
pub fn unique(prefix: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{prefix}-{}-{nanos}-{n}", std::process::id())
}

/// A throwaway vhost on one broker with full permissions for guest. Call `cleanup().await` at the
/// end; if a test panics first, `Drop` deletes it with a blocking call on another thread.
pub struct TestVhost {
    pub broker: TestBroker,
    pub name: String,
    http: reqwest::Client,
    cleaned: bool,
}

impl TestVhost {
    pub async fn new(broker: &TestBroker, prefix: &str) -> TestVhost {
        let name = unique(&format!("warren-test-{prefix}"));
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .expect("http client");
        let base = broker.mgmt_base();
        let r = http
            .put(format!("{base}/api/vhosts/{}", enc(&name)))
            .basic_auth("guest", Some("guest"))
            .json(&serde_json::json!({}))
            .send()
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "management API of RabbitMQ {} at {base} unreachable: {e}",
                    broker.label
                )
            });
        assert!(r.status().is_success(), "create vhost: {}", r.status());
        let r = http
            .put(format!("{base}/api/permissions/{}/guest", enc(&name)))
            .basic_auth("guest", Some("guest"))
            .json(&serde_json::json!({"configure": ".*", "write": ".*", "read": ".*"}))
            .send()
            .await
            .expect("set permissions");
        assert!(r.status().is_success(), "set permissions: {}", r.status());
        TestVhost {
            broker: broker.clone(),
            name,
            http,
            cleaned: false,
        }
    }

    pub fn amqp_url(&self) -> String {
        self.broker.amqp_url(&self.name)
    }

    /// Raw management API call for test setup (PUT/POST/DELETE with a JSON body).
    pub async fn api(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> reqwest::Response {
        // A pooled keep-alive connection the broker closed at the same moment fails with no
        // reply (hyper's IncompleteMessage, seen on 4.0): idempotent calls are sent again.
        let again_within = if method == reqwest::Method::POST {
            Duration::ZERO
        } else {
            Duration::from_secs(1)
        };
        let sent = wait::poll(again_within, || async {
            let mut req = self
                .http
                .request(method.clone(), format!("{}{path}", self.broker.mgmt_base()))
                .basic_auth("guest", Some("guest"));
            if let Some(b) = &body {
                req = req.json(b);
            }
            match req.send().await {
                Ok(r) => Ok(r),
                Err(e) if e.is_request() || e.is_connect() => Err(e),
                Err(e) => panic!("management API call {method} {path}: {e:?}"),
            }
        })
        .await;
        sent.unwrap_or_else(|e| panic!("management API call {method} {path}: {e:?}"))
    }

    /// `GET` a management API path and parse JSON.
    pub async fn get_json(&self, path: &str) -> serde_json::Value {
        self.api(reqwest::Method::GET, path, None)
            .await
            .json()
            .await
            .expect("json")
    }

    /// Queue depth as the management API reports it, polled until stats settle.
    pub async fn queue_depth(&self, queue: &str) -> i64 {
        let path = format!("/api/queues/{}/{}", enc(&self.name), enc(queue));
        wait::until_ok(
            &format!("a depth for {queue}"),
            Duration::from_secs(5),
            || async {
                let v = self.get_json(&path).await;
                v.get("messages").and_then(|m| m.as_i64()).ok_or(v)
            },
        )
        .await
    }

    /// The management API's view of `queue` once `done` holds for it (`what` says what is
    /// awaited), within 30 s; the test fails with the last view otherwise. Its figures come with
    /// the broker's statistics, every 5 s.
    pub async fn wait_queue(
        &self,
        queue: &str,
        what: &str,
        done: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let path = format!("/api/queues/{}/{}", enc(&self.name), enc(queue));
        wait::until_ok(
            &format!("RabbitMQ {}: {queue}: {what}", self.broker.label),
            Duration::from_secs(30),
            || async {
                let r = self.api(reqwest::Method::GET, &path, None).await;
                let v: serde_json::Value = if r.status().is_success() {
                    r.json().await.unwrap_or_default()
                } else {
                    serde_json::Value::Null
                };
                if done(&v) {
                    Ok(v)
                } else {
                    Err(format!("the management API shows {v}"))
                }
            },
        )
        .await
    }

    /// Waits until the broker applies policy `name` to `queue`: the queue itself reports it
    /// (in the management API, with its next statistics), not only the policy list.
    pub async fn wait_policy(&self, queue: &str, name: &str) -> serde_json::Value {
        self.wait_queue(queue, &format!("policy {name}"), |v| v["policy"] == name)
            .await
    }

    /// Declares a policy in this vhost.
    pub async fn policy(
        &self,
        name: &str,
        pattern: &str,
        apply_to: &str,
        definition: serde_json::Value,
    ) {
        let path = format!("/api/policies/{}/{}", enc(&self.name), enc(name));
        let r = self
            .api(
                reqwest::Method::PUT,
                &path,
                Some(serde_json::json!({"pattern": pattern, "apply-to": apply_to, "definition": definition, "priority": 10})),
            )
            .await;
        assert!(r.status().is_success(), "policy: {}", r.status());
    }

    pub async fn cleanup(mut self) {
        self.delete().await;
    }

    async fn delete(&mut self) {
        if self.cleaned {
            return;
        }
        self.cleaned = true;
        delete_vhost(&self.broker, &self.name).await;
    }
}

/// How long deleting a vhost may take: RabbitMQ 4.x takes minutes to delete one holding 10,000
/// queues, and a shorter timeout left such vhosts behind.
const DELETE_TIMEOUT: Duration = Duration::from_secs(600);

/// Deletes a vhost (and everything in it), waiting for the broker to finish. The management
/// API closes a request that runs past its idle timeout, and the deletion stops where it was
/// (measured on 4.0 and 4.3 with 10,000 queues under load), so a failed request is sent again
/// until the vhost is gone.
pub async fn delete_vhost(broker: &TestBroker, name: &str) {
    let url = format!("{}/api/vhosts/{}", broker.mgmt_base(), enc(name));
    let client = reqwest::Client::new();
    let deleted = wait::poll(DELETE_TIMEOUT, || async {
        let result = client
            .delete(&url)
            .basic_auth("guest", Some("guest"))
            .timeout(DELETE_TIMEOUT)
            .send()
            .await;
        match result {
            Ok(r) if r.status().is_success() || r.status() == reqwest::StatusCode::NOT_FOUND => {
                Ok(())
            }
            Ok(r) => Err(format!("HTTP {}", r.status())),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
    if let Err(failure) = deleted {
        eprintln!(
            "could not delete test vhost {name} on RabbitMQ {}: {failure}",
            broker.label
        );
    }
}

/// [`delete_vhost`] from synchronous code, e.g. a `Drop` of a panicking test: a plain thread
/// with its own runtime, so it works inside or outside tokio.
pub fn delete_vhost_blocking(broker: &TestBroker, name: &str) {
    let (broker, name) = (broker.clone(), name.to_string());
    let _ = std::thread::spawn(move || {
        if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            rt.block_on(delete_vhost(&broker, &name));
        }
    })
    .join();
}

impl Drop for TestVhost {
    fn drop(&mut self) {
        if !self.cleaned {
            delete_vhost_blocking(&self.broker, &self.name);
        }
    }
}

/// The TUI's background worker on a broker, as the terminal UI starts it: its command sender,
/// its event receiver and its task.
pub fn spawn_worker(
    overrides: warren::config::Overrides,
) -> (
    tokio::sync::mpsc::Sender<warren::worker::protocol::Command>,
    tokio::sync::mpsc::Receiver<warren::worker::protocol::Report>,
    tokio::task::JoinHandle<Option<warren::worker::protocol::ReplayOutcome>>,
) {
    let (cmd_tx, cmd_rx) = tokio::sync::mpsc::channel(16);
    let (ev_tx, ev_rx) = tokio::sync::mpsc::channel(64);
    let worker = tokio::spawn(warren::worker::run(
        warren::worker::Source::Broker(overrides),
        cmd_rx,
        ev_tx,
    ));
    (cmd_tx, ev_rx, worker)
}

/// The worker's events until `done` says stop, each within 60 s: an error fails the test, every
/// other event on the way goes to `seen`.
pub async fn worker_until(
    rx: &mut tokio::sync::mpsc::Receiver<warren::worker::protocol::Report>,
    label: &str,
    done: impl Fn(&warren::worker::protocol::Report) -> bool,
    mut seen: impl FnMut(warren::worker::protocol::Report),
) -> warren::worker::protocol::Report {
    use warren::worker::protocol::Report;
    loop {
        let e = tokio::time::timeout(Duration::from_secs(60), rx.recv())
            .await
            .unwrap_or_else(|_| panic!("{label}: an event within 60 s"))
            .expect("the worker is alive");
        match e {
            Report::Error(f) => panic!("{label}: {f}"),
            e if done(&e) => return e,
            e => seen(e),
        }
    }
}

/// The worker's command to replay every message of `queue` in `vhost` (at most `expected`),
/// as the TUI sends it once the modal is accepted: no rate limit, attempts reset, for real.
pub fn replay_all(vhost: &str, queue: &str, expected: u64) -> warren::worker::protocol::Command {
    warren::worker::protocol::Command::Replay(warren::worker::protocol::ReplayRequest {
        vhost: vhost.into(),
        queue: queue.into(),
        selection: warren::domain::selection::Selection::All,
        expected,
        typed: true,
        rate: 0,
        keep_attempts: false,
        strip_failure_stamp: false,
        dry_run: false,
        job: Default::default(),
        canary: None,
        max_backlog: None,
        create_audit: None,
        edited: None,
    })
}

/// A broker user of the test's vhost (password `pw`) with these tags and permissions (read
/// `.*`); remove it with [`drop_user`].
pub async fn make_user(vh: &TestVhost, tags: &str, configure: &str, write: &str) -> String {
    let user = unique("warren-user");
    let http = reqwest::Client::new();
    let base = vh.broker.mgmt_base();
    let r = http
        .put(format!("{base}/api/users/{}", enc(&user)))
        .basic_auth("guest", Some("guest"))
        .json(&serde_json::json!({"password": "pw", "tags": tags}))
        .send()
        .await
        .expect("create user");
    assert!(r.status().is_success(), "create user: {}", r.status());
    let r = http
        .put(format!(
            "{base}/api/permissions/{}/{}",
            enc(&vh.name),
            enc(&user)
        ))
        .basic_auth("guest", Some("guest"))
        .json(&serde_json::json!({"configure": configure, "write": write, "read": ".*"}))
        .send()
        .await
        .expect("set permissions");
    assert!(r.status().is_success(), "permissions: {}", r.status());
    user
}

pub async fn drop_user(vh: &TestVhost, user: &str) {
    let _ = reqwest::Client::new()
        .delete(format!("{}/api/users/{}", vh.broker.mgmt_base(), enc(user)))
        .basic_auth("guest", Some("guest"))
        .send()
        .await;
}

/// The AMQP and management URLs of the vhost as `user` (password `pw`).
pub fn urls_as(vh: &TestVhost, user: &str) -> (String, String) {
    let b = &vh.broker;
    (
        format!(
            "amqp://{}:pw@{}:{}/{}",
            enc(user),
            b.host,
            b.amqp_port,
            enc(&vh.name)
        ),
        format!("http://{}:pw@{}:{}", enc(user), b.host, b.mgmt_port),
    )
}

/// A session on `vh` with the config file `config`, as guest or as `user` (see [`urls_as`]):
/// what the CLI and the TUI's worker open, for tests that call `warren::ops` directly.
pub async fn session_as(
    vh: &TestVhost,
    config: std::path::PathBuf,
    user: Option<&str>,
) -> warren::broker::session::Session {
    let (amqp, mgmt) = match user {
        Some(u) => urls_as(vh, u),
        None => (vh.amqp_url(), vh.broker.mgmt_url_with_creds()),
    };
    let o = warren::config::Overrides {
        config_path: Some(config),
        amqp_url: Some(amqp),
        management_url: Some(mgmt),
        vhost: Some(vh.name.clone()),
        ..Default::default()
    };
    let (_, target) = warren::config::load(&o).expect("config");
    warren::broker::session::Session::open(target)
        .await
        .expect("session")
}
