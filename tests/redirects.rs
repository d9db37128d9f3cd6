//! Redirects on real brokers, through their one home (`warren::ops::redirect`) from both front
//! ends: `warren redirect add orders orders.v2` changes the target of `replay --dry-run`, of
//! `show` and of the run (a plan that reads the head, and one that reads nothing first), and
//! removing it restores the plain target; the TUI's worker does the same with `:redirect`.
//! Every message id is counted before and after: nothing lost, nothing doubled. A redirect to
//! a missing queue, to a wait queue, in read-only mode, and an entry the broker does not vouch
//! for are refused or not acted on, and change nothing.

use crate::common;
use crate::replay_util;
use crate::tmux_util;

use common::amqp::{self as h, amqp_depth};
use common::{TestBroker, TestVhost};
use lapin::types::{AMQPValue, FieldTable, LongString};
use replay_util::{Home, dead_letter, message_ids, read_all, simple, warren};
use tokio::sync::mpsc;
use warren::config::Overrides;
use warren::domain::features::QueueType;
use warren::domain::selection::Selection;
use warren::worker::protocol::{Command, RedirectChange, Report};

const REASON: &str = "endpoint renamed";

/// A vhost of its own (and a home) holding `orders.dlq` with `n` broker deaths from `orders`
/// (ids `{prefix}-0` …), `orders.v2` (a plain queue) and `orders.wait` (a wait queue: a TTL and
/// a dead-letter exchange).
async fn setup(b: &TestBroker, name: &str, prefix: &str, n: u32) -> (TestVhost, Home) {
    let vh = TestVhost::new(b, name).await;
    let home = Home::new(name);
    let conn = h::connect(&vh).await;
    let ch = h::confirm_channel(&conn).await;
    h::declare(&ch, "orders.dlq", QueueType::Classic, FieldTable::default()).await;
    h::declare(&ch, "orders.v2", QueueType::Classic, FieldTable::default()).await;
    let mut wait = FieldTable::default();
    wait.insert("x-message-ttl".into(), AMQPValue::LongInt(60_000));
    wait.insert(
        "x-dead-letter-exchange".into(),
        AMQPValue::LongString(LongString::from("")),
    );
    h::declare(&ch, "orders.wait", QueueType::Classic, wait).await;
    let msgs: Vec<_> = (0..n).map(|i| simple(prefix, i, &[])).collect();
    dead_letter(&conn, "orders", "orders.dlq", &msgs).await;
    let _ = conn.close(200, "ok".into()).await;
    (vh, home)
}

/// The ids in each queue, sorted.
async fn ids(vh: &TestVhost, queue: &str) -> Vec<String> {
    let conn = h::connect(vh).await;
    let depth = amqp_depth(&conn, queue).await as usize;
    let mut ids = message_ids(&read_all(&conn, queue, depth).await);
    ids.sort();
    let _ = conn.close(200, "ok".into()).await;
    ids
}

fn named(prefix: &str, which: &[u32]) -> Vec<String> {
    which.iter().map(|i| format!("{prefix}-{i}")).collect()
}

/// Each of the `n` ids exactly once across the three queues.
async fn every_id_once(vh: &TestVhost, prefix: &str, n: u32, label: &str) {
    let mut all = Vec::new();
    for q in ["orders.dlq", "orders", "orders.v2"] {
        all.extend(ids(vh, q).await);
    }
    all.sort();
    let want: Vec<u32> = (0..n).collect();
    let mut want = named(prefix, &want);
    want.sort();
    assert_eq!(all, want, "{label}: every id exactly once");
}

#[tokio::test]
async fn a_redirect_changes_the_dry_run_show_and_the_run_from_the_command_line() {
    TestBroker::each(|b| async move {
        let label = b.label.clone();
        let (vh, home) = setup(&b, "redirect-cli", "r", 5).await;
        let add = [
            "redirect",
            "add",
            "orders",
            "orders.v2",
            "--reason",
            REASON,
            "--create-audit-stream",
        ];
        let r = warren(&vh, &home, &add).await;
        assert_eq!(r.code, Some(0), "{label}: add: {r}");
        let r = warren(&vh, &home, &["redirect", "list", "--json"]).await;
        let listed = r.json();
        assert_eq!(listed.len(), 1, "{label}: {r}");
        assert_eq!(listed[0]["from"], "orders", "{label}");
        assert_eq!(listed[0]["to"], "orders.v2", "{label}");
        assert_eq!(listed[0]["reason"], REASON, "{label}");
        assert_eq!(listed[0]["broker_user"], "guest", "{label}");

        // The dry run and show say where the messages go and why; nothing moves.
        let said = format!("→ orders.v2 (redirected from orders: {REASON})");
        let r = warren(&vh, &home, &["replay", "orders.dlq", "--dry-run"]).await;
        assert_eq!(r.code, Some(0), "{label}: dry run: {r}");
        assert!(r.stderr.contains(&said), "{label}: dry run says so: {r}");
        eprintln!(
            "{label}: a dry run reading one redirect took {:?}",
            r.elapsed
        );
        let r = warren(&vh, &home, &["replay", "orders.dlq", "--dry-run", "--json"]).await;
        let plan = r.event("plan");
        assert_eq!(
            plan["targets"]["orders.v2"]["redirected_from"]["queue"], "orders",
            "{label}: the JSON plan says so: {r}"
        );
        let r = warren(&vh, &home, &["show", "orders.dlq"]).await;
        assert!(r.stdout.contains(&said), "{label}: show says so: {r}");
        assert_eq!(ids(&vh, "orders.dlq").await.len(), 5, "{label}");

        // A plan that reads the head (a filter), then one that reads nothing first (all of the
        // queue, the one feeder known): both go to orders.v2.
        let r = warren(
            &vh,
            &home,
            &["replay", "orders.dlq", "--filter", "body:4", "--yes"],
        )
        .await;
        assert_eq!(r.code, Some(0), "{label}: filtered run: {r}");
        let r = warren(
            &vh,
            &home,
            &["replay", "orders.dlq", "--limit", "2", "--yes"],
        )
        .await;
        assert_eq!(r.code, Some(0), "{label}: unread run: {r}");
        assert!(
            r.stderr.contains(&said),
            "{label}: the run's plan says so: {r}"
        );
        assert_eq!(
            ids(&vh, "orders.v2").await,
            named("r", &[0, 1, 4]),
            "{label}"
        );
        assert_eq!(ids(&vh, "orders").await, Vec::<String>::new(), "{label}");
        every_id_once(&vh, "r", 5, &label).await;

        // Removed: the plain target again.
        let r = warren(&vh, &home, &["redirect", "remove", "orders"]).await;
        assert_eq!(r.code, Some(0), "{label}: remove: {r}");
        let r = warren(&vh, &home, &["redirect", "list", "--json"]).await;
        assert!(r.json().is_empty(), "{label}: none left: {r}");
        let r = warren(&vh, &home, &["replay", "orders.dlq", "--dry-run"]).await;
        assert!(
            r.stderr.contains("→ orders via") && !r.stderr.contains("redirected"),
            "{label}: plain target: {r}"
        );
        eprintln!("{label}: a dry run after the removal took {:?}", r.elapsed);
        let r = warren(&vh, &home, &["replay", "orders.dlq", "--yes"]).await;
        assert_eq!(r.code, Some(0), "{label}: plain run: {r}");
        assert_eq!(ids(&vh, "orders").await, named("r", &[2, 3]), "{label}");
        assert_eq!(
            ids(&vh, "orders.dlq").await,
            Vec::<String>::new(),
            "{label}"
        );
        every_id_once(&vh, "r", 5, &label).await;
        eprintln!("{label}: orders.v2 r-0 r-1 r-4, orders r-2 r-3, 5 ids once each");

        // On the record: both changes are on the audit stream.
        let r = warren(&vh, &home, &["audit", "--json"]).await;
        let kinds: Vec<String> = r
            .json()
            .iter()
            .filter(|v| v["kind"] == "redirect")
            .map(|v| v["event"].as_str().unwrap_or("").to_string())
            .collect();
        assert_eq!(kinds, ["remove", "add"], "{label}: the audit: {r}");
        vh.cleanup().await;
    })
    .await;
}

#[tokio::test]
async fn refused_redirects_change_nothing() {
    for b in TestBroker::all() {
        let label = b.label.clone();
        let (vh, home) = setup(&b, "redirect-refused", "n", 2).await;
        let refused = |to: &'static str, extra: &'static str| {
            let (vh, home) = (&vh, &home);
            async move {
                let mut args = vec!["redirect", "add", "orders", to, "--create-audit-stream"];
                if !extra.is_empty() {
                    args.insert(0, extra);
                }
                warren(vh, home, &args).await
            }
        };
        let r = refused("orders.gone", "").await;
        assert_eq!(r.code, Some(1), "{label}: missing: {r}");
        assert!(r.stderr.contains("does not exist"), "{label}: {r}");
        let r = refused("orders.wait", "").await;
        assert_eq!(r.code, Some(1), "{label}: wait queue: {r}");
        assert!(r.stderr.contains("wait queue"), "{label}: {r}");
        let r = refused("orders.v2", "--read-only").await;
        assert_eq!(r.code, Some(1), "{label}: read-only: {r}");
        assert!(r.stderr.contains("read-only"), "{label}: {r}");
        let r = warren(&vh, &home, &["redirect", "remove", "orders"]).await;
        assert_eq!(r.code, Some(1), "{label}: nothing to remove: {r}");
        // Nothing was kept: the redirect stream was never created.
        let streams = vh
            .get_json(&format!("/api/queues/{}", common::enc(&vh.name)))
            .await;
        assert!(
            !streams.to_string().contains("warren.redirects"),
            "{label}: no redirect stream: {streams}"
        );

        // An entry the broker does not vouch for (no user_id) is not acted on.
        let r = warren(
            &vh,
            &home,
            &[
                "redirect",
                "add",
                "orders",
                "orders.v2",
                "--create-audit-stream",
            ],
        )
        .await;
        assert_eq!(r.code, Some(0), "{label}: a real one: {r}");
        let r = warren(&vh, &home, &["redirect", "remove", "orders"]).await;
        assert_eq!(r.code, Some(0), "{label}: removed: {r}");
        forge(&vh, "orders", "orders.v2").await;
        let r = warren(&vh, &home, &["redirect", "list", "--json"]).await;
        assert!(
            r.json().is_empty(),
            "{label}: the forged one is not in force: {r}"
        );
        assert!(
            r.stderr.contains("not acted on"),
            "{label}: and it is said: {r}"
        );
        let r = warren(&vh, &home, &["replay", "orders.dlq", "--dry-run"]).await;
        assert!(
            !r.stderr.contains("redirected"),
            "{label}: plain target: {r}"
        );
        assert_eq!(ids(&vh, "orders.dlq").await, named("n", &[0, 1]), "{label}");
        vh.cleanup().await;
    }
}

/// A plan that cannot read the redirects moves nothing: here `warren.redirects` is a classic
/// queue, not a stream, so no message may go where a redirect it cannot see would have sent it.
#[tokio::test]
async fn a_plan_that_cannot_read_the_redirects_moves_nothing() {
    for b in TestBroker::all() {
        let label = b.label.clone();
        let (vh, home) = setup(&b, "redirect-unread", "u", 2).await;
        let conn = h::connect(&vh).await;
        let ch = h::confirm_channel(&conn).await;
        h::declare(
            &ch,
            "warren.redirects",
            QueueType::Classic,
            FieldTable::default(),
        )
        .await;
        let _ = conn.close(200, "ok".into()).await;
        let r = warren(&vh, &home, &["replay", "orders.dlq", "--yes"]).await;
        assert_eq!(r.code, Some(1), "{label}: {r}");
        assert!(
            r.stderr
                .contains("the redirects kept on the broker could not be read"),
            "{label}: {r}"
        );
        let r = warren(&vh, &home, &["redirect", "list"]).await;
        assert_eq!(r.code, Some(3), "{label}: the list says why too: {r}");
        assert_eq!(ids(&vh, "orders.dlq").await, named("u", &[0, 1]), "{label}");
        assert!(ids(&vh, "orders").await.is_empty(), "{label}");
        vh.cleanup().await;
    }
}

/// An `add` entry on the redirect stream without the `user_id` the broker vouches for.
async fn forge(vh: &TestVhost, from: &str, to: &str) {
    let body = serde_json::json!({
        "warren_audit": 1, "kind": "redirect", "event": "add", "run_id": "forged",
        "at": "2026-12-01T00:00:00Z",
        "record": {
            "at": "2026-12-01T00:00:00Z", "from": from, "to": to, "reason": "forged",
            "os_user": "mallory", "broker_user": "guest", "context": "c", "vhost": vh.name,
        }
    });
    let conn = h::connect(vh).await;
    let ch = h::confirm_channel(&conn).await;
    h::publish(
        &ch,
        "warren.redirects",
        &Default::default(),
        &Default::default(),
        body.to_string().as_bytes(),
    )
    .await;
    let _ = conn.close(200, "ok".into()).await;
}

/// The TUI's worker on a context of `vh` (`create_audit_stream = true`, `read_only` as given).
fn worker(
    vh: &TestVhost,
    home: &Home,
    read_only: bool,
) -> (mpsc::Sender<Command>, mpsc::Receiver<Report>) {
    let config = format!(
        "[contexts.c]\nmanagement_urls = [\"{}\"]\namqp_urls = [\"amqp://{}:{}\"]\nvhost = \"{}\"\nusername = \"guest\"\npassword_env = \"WARREN_TEST_REDIRECT_PASSWORD\"\ncreate_audit_stream = true\nread_only = {read_only}\n",
        vh.broker.mgmt_base(),
        vh.broker.host,
        vh.broker.amqp_port,
        vh.name
    );
    std::fs::write(home.dir.join("config.toml"), config).expect("config");
    // The worker opens Warren's store and reads the password from the environment.
    // SAFETY: nextest runs each test in a process of its own; set before its worker starts.
    unsafe {
        std::env::set_var("WARREN_STORE", home.store());
        std::env::set_var("WARREN_TEST_REDIRECT_PASSWORD", "guest");
    }
    let overrides = Overrides {
        config_path: Some(home.dir.join("config.toml")),
        context: Some("c".into()),
        ..Default::default()
    };
    let (tx, rx, _task) = common::spawn_worker(overrides);
    (tx, rx)
}

/// The worker's answer to one redirect command: the notice, or the error's text.
async fn ask(
    tx: &mpsc::Sender<Command>,
    rx: &mut mpsc::Receiver<Report>,
    vhost: &str,
    change: RedirectChange,
) -> Result<String, String> {
    let cmd = Command::Redirect {
        vhost: vhost.into(),
        change,
        create_stream: None,
    };
    tx.send(cmd).await.unwrap();
    loop {
        let e = tokio::time::timeout(std::time::Duration::from_secs(60), rx.recv())
            .await
            .expect("an answer within 60 s")
            .expect("the worker is alive");
        match e {
            Report::Notice(n) => return Ok(n),
            Report::Error(f) => return Err(f.to_string()),
            _ => {}
        }
    }
}

/// The worker's plan for replaying all of `orders.dlq`: its target lines.
async fn plan_targets(
    tx: &mpsc::Sender<Command>,
    rx: &mut mpsc::Receiver<Report>,
    vhost: &str,
    label: &str,
) -> Vec<String> {
    tx.send(Command::PreviewReplay {
        vhost: vhost.into(),
        queue: "orders.dlq".into(),
        selection: Selection::All,
        keep_attempts: false,
        strip_failure_stamp: false,
        edited: None,
    })
    .await
    .unwrap();
    match common::worker_until(rx, label, |e| matches!(e, Report::ReplayPreview(_)), |_| {}).await {
        Report::ReplayPreview(p) => p.targets,
        _ => unreachable!(),
    }
}

async fn replay_all(
    tx: &mpsc::Sender<Command>,
    rx: &mut mpsc::Receiver<Report>,
    vhost: &str,
    n: u64,
    label: &str,
) -> u64 {
    tx.send(common::replay_all(vhost, "orders.dlq", n))
        .await
        .unwrap();
    match common::worker_until(
        rx,
        label,
        |e| matches!(e, Report::ReplayFinished(_)),
        |_| {},
    )
    .await
    {
        Report::ReplayFinished(o) => o.progress.moved,
        _ => unreachable!(),
    }
}

#[tokio::test]
async fn a_redirect_from_the_tui_changes_its_plan_and_its_run() {
    for b in TestBroker::all() {
        let label = format!("{} (TUI)", b.label);
        let (vh, home) = setup(&b, "redirect-tui", "t", 3).await;
        let (tx, mut rx) = worker(&vh, &home, false);
        let v = vh.name.clone();
        let add = RedirectChange::Add {
            from: "orders".into(),
            to: "orders.v2".into(),
            reason: REASON.into(),
        };
        let said = ask(&tx, &mut rx, &v, add).await;
        assert!(
            said.as_ref().is_ok_and(|n| n.starts_with("redirected")),
            "{label}: {said:?}"
        );
        // The UI is told the redirects in force (its detail pane applies them).
        let told = common::worker_until(
            &mut rx,
            &label,
            |e| matches!(e, Report::Redirects { .. }),
            |_| {},
        )
        .await;
        assert!(
            matches!(&told, Report::Redirects { redirects, .. } if redirects.get("orders").is_some_and(|r| r.to == "orders.v2")),
            "{label}: {told:?}"
        );
        let said = ask(&tx, &mut rx, &v, RedirectChange::List).await;
        assert!(
            said.as_ref()
                .is_ok_and(|n| n.contains(&format!("orders → orders.v2 ({REASON})"))),
            "{label}: {said:?}"
        );
        let targets = plan_targets(&tx, &mut rx, &v, &label).await;
        assert_eq!(targets.len(), 1, "{label}: {targets:?}");
        assert!(
            targets[0].starts_with(&format!("orders.v2 (redirected from orders: {REASON})")),
            "{label}: the modal says so: {targets:?}"
        );
        assert_eq!(replay_all(&tx, &mut rx, &v, 3, &label).await, 3, "{label}");
        assert_eq!(
            ids(&vh, "orders.v2").await,
            named("t", &[0, 1, 2]),
            "{label}"
        );

        // Removed from the TUI: two new dead letters go to orders again.
        let said = ask(
            &tx,
            &mut rx,
            &v,
            RedirectChange::Remove {
                from: "orders".into(),
            },
        )
        .await;
        assert!(
            said.as_ref()
                .is_ok_and(|n| n.starts_with("redirect removed")),
            "{label}: {said:?}"
        );
        let conn = h::connect(&vh).await;
        let msgs: Vec<_> = (3..5).map(|i| simple("t", i, &[])).collect();
        dead_letter(&conn, "orders", "orders.dlq", &msgs).await;
        let _ = conn.close(200, "ok".into()).await;
        let targets = plan_targets(&tx, &mut rx, &v, &label).await;
        assert!(
            targets.len() == 1 && targets[0].starts_with("orders (exchange"),
            "{label}: plain target: {targets:?}"
        );
        assert_eq!(replay_all(&tx, &mut rx, &v, 2, &label).await, 2, "{label}");
        assert_eq!(ids(&vh, "orders").await, named("t", &[3, 4]), "{label}");
        every_id_once(&vh, "t", 5, &label).await;
        eprintln!("{label}: orders.v2 t-0..t-2, orders t-3 t-4, 5 ids once each");
        drop(tx);
        vh.cleanup().await;
    }
}

#[tokio::test]
async fn a_read_only_tui_changes_no_redirect() {
    for b in TestBroker::all() {
        let label = format!("{} (TUI read-only)", b.label);
        let (vh, home) = setup(&b, "redirect-tui-ro", "o", 1).await;
        let (tx, mut rx) = worker(&vh, &home, true);
        let v = vh.name.clone();
        let add = RedirectChange::Add {
            from: "orders".into(),
            to: "orders.v2".into(),
            reason: String::new(),
        };
        let said = ask(&tx, &mut rx, &v, add).await;
        assert!(
            said.as_ref().is_err_and(|e| e.contains("read-only")),
            "{label}: {said:?}"
        );
        let said = ask(&tx, &mut rx, &v, RedirectChange::List).await;
        assert!(
            said.as_ref().is_ok_and(|n| n.starts_with("no redirects")),
            "{label}: {said:?}"
        );
        drop(tx);
        vh.cleanup().await;
    }
}

/// A front end that refuses every creation and writes down what it was asked.
#[derive(Default)]
struct Refusing {
    asked: Vec<String>,
}

impl warren::ops::Front for Refusing {
    fn plan(&mut self, _plan: warren::ops::Plan<'_>) {
        self.asked.push("plan".into());
    }
    fn go_ahead(
        &mut self,
        _count: u64,
        kind: warren::domain::run::RunKind,
        _typed: bool,
    ) -> Result<bool, String> {
        self.asked.push(kind.verb().into());
        Ok(true)
    }
    fn audit_consent(&mut self, _configured: Option<bool>) -> warren::broker::audit::Consent<'_> {
        self.asked.push("stream".into());
        warren::broker::audit::Consent::Refuse
    }
    fn create_archive(&mut self, _what: &str) -> Result<bool, String> {
        Ok(false)
    }
    fn read_again(&mut self, _queue: &str, _cost: &str) -> Result<bool, String> {
        Ok(false)
    }
    fn say(&mut self, _text: &str) {}
    fn started(&mut self, _run_id: &str, _on_broker: bool) {}
}

/// At the home: a viewer the broker lets read but not publish is refused before anything is
/// asked; a "no" to creating the redirect stream keeps nothing and creates nothing.
#[tokio::test]
async fn the_home_refuses_a_viewer_first_and_creates_nothing_without_consent() {
    use warren::ops::{Stop, redirect};
    for b in TestBroker::all() {
        let label = b.label.clone();
        let (vh, home) = setup(&b, "redirect-home", "h", 1).await;
        let req = redirect::AddRequest {
            from: "orders".into(),
            to: "orders.v2".into(),
            reason: String::new(),
        };
        let viewer = common::make_user(&vh, "monitoring", "^$", "^$").await;
        let s = common::session_as(&vh, home.dir.join("config.toml"), Some(&viewer)).await;
        let mut front = Refusing::default();
        let r = redirect::add(&s, &req, &mut front).await;
        assert!(
            matches!(&r, Err(Stop::Refused(why @ warren::ops::Refusal::ReadOnly { .. })) if why.to_string().contains("read-only")),
            "{label}: {r:?}"
        );
        assert!(
            front.asked.is_empty(),
            "{label}: nothing asked: {:?}",
            front.asked
        );
        drop(s);
        common::drop_user(&vh, &viewer).await;

        let s = common::session_as(&vh, home.dir.join("config.toml"), None).await;
        let mut front = Refusing::default();
        let r = redirect::add(&s, &req, &mut front).await;
        // Nobody could answer: the question goes back, naming what would be created.
        assert!(
            matches!(&r, Err(Stop::Unanswered(q)) if q.contains("warren.redirects") && q.contains("warren.audit")),
            "{label}: {r:?}"
        );
        assert_eq!(front.asked, ["stream"], "{label}");
        let listed = redirect::list(&s).await.expect("list");
        assert!(listed.redirects.is_empty(), "{label}");
        let queues = vh
            .get_json(&format!("/api/queues/{}", common::enc(&vh.name)))
            .await;
        assert!(
            !queues.to_string().contains("warren.redirects"),
            "{label}: nothing created"
        );
        vh.cleanup().await;
    }
}

/// `warren restore --replay` follows a redirect too: archived dead letters of `orders` go to
/// `orders.v2`.
#[tokio::test]
async fn a_restore_that_replays_follows_a_redirect() {
    for b in TestBroker::all() {
        let label = b.label.clone();
        let (vh, home) = setup(&b, "redirect-restore", "a", 2).await;
        let archive = ["archive", "orders.dlq", "--create-archive", "--yes"];
        let r = warren(&vh, &home, &archive).await;
        assert_eq!(r.code, Some(0), "{label}: archive: {r}");
        let add = ["redirect", "add", "orders", "orders.v2", "--reason", REASON];
        let r = warren(&vh, &home, &[&add[..], &["--create-audit-stream"]].concat()).await;
        assert_eq!(r.code, Some(0), "{label}: add: {r}");
        let r = warren(&vh, &home, &["restore", "--replay", "--yes"]).await;
        assert_eq!(r.code, Some(0), "{label}: restore --replay: {r}");
        assert_eq!(ids(&vh, "orders.v2").await, named("a", &[0, 1]), "{label}");
        assert!(ids(&vh, "orders").await.is_empty(), "{label}");
        assert!(ids(&vh, "orders.dlq").await.is_empty(), "{label}");
        eprintln!("{label}: restore --replay sent a-0 a-1 to orders.v2");
        vh.cleanup().await;
    }
}

/// The real TUI in tmux, on a context that neither allows nor forbids creating streams:
/// `:redirect add` asks first (issue 38: it used to fail without asking), `n` keeps nothing,
/// `y` creates the streams and says what it did; the replay modal's target line says
/// "orders.v2 (redirected from orders: …)", and Enter moves all three there.
#[tokio::test(flavor = "multi_thread")]
async fn the_tui_on_a_terminal_redirects_its_replay() {
    for b in TestBroker::all() {
        let label = b.label.clone();
        let (vh, home) = setup(&b, "redirect-e2e", "e", 3).await;
        let config = home.dir.join("config.toml");
        std::fs::write(
            &config,
            format!(
                "[contexts.c]\nmanagement_urls = [\"{}\"]\namqp_urls = [\"amqp://{}:{}\"]\nvhost = \"{}\"\nusername = \"guest\"\npassword_env = \"WARREN_TEST_REDIRECT_PASSWORD\"\n",
                b.mgmt_base(),
                b.host,
                b.amqp_port,
                vh.name
            ),
        )
        .expect("config");
        let cmd = format!(
            "WARREN_TEST_REDIRECT_PASSWORD=guest WARREN_STORE={store} WARREN_LOG_DIR={logs} {bin} --config {cfg} --context c; sleep 30",
            store = home.store().display(),
            logs = home.dir.join("logs").display(),
            bin = replay_util::bin().display(),
            cfg = config.display(),
        );
        let t = tmux_util::Tmux::open(&cmd, None, 200, 40);
        let wait = std::time::Duration::from_secs(30);
        t.wait_for("orders.dlq", wait);
        let add = format!("redirect add orders orders.v2 {REASON}");
        t.keys(&[":", &add, "Enter"]);
        let asked = t.wait_for("Create it first?", wait);
        assert!(
            asked.contains("warren.redirects") && asked.contains("Enter (or y)"),
            "{label}: {asked}"
        );
        t.keys(&["n"]);
        t.wait_for("nothing created, nothing changed", wait);
        let queues = vh
            .get_json(&format!("/api/queues/{}", common::enc(&vh.name)))
            .await;
        assert!(
            !queues.to_string().contains("warren.redirects"),
            "{label}: nothing created after n"
        );
        t.keys(&[":", &add, "Enter"]);
        t.wait_for("Create it first?", wait);
        t.keys(&["y"]);
        t.wait_for("redirected: replays bound for orders go to orders.v2", wait);
        t.keys(&["Enter"]);
        t.wait_for("Rejected", wait);
        t.keys(&["a"]);
        t.wait_for("[3 selected]", wait);
        t.keys(&["r"]);
        let modal = t.wait_for("Reaches", wait);
        assert!(
            modal.contains(&format!("orders.v2 (redirected from orders: {REASON})")),
            "{label}: {modal}"
        );
        t.keys(&["Enter"]);
        let done = t.wait_for("done", wait);
        assert!(done.contains("moved 3"), "{label}: {done}");
        t.keys(&["Escape", "q"]);
        assert_eq!(
            ids(&vh, "orders.v2").await,
            named("e", &[0, 1, 2]),
            "{label}"
        );
        every_id_once(&vh, "e", 3, &label).await;
        eprintln!("{label}: the TUI in tmux moved e-0..e-2 to orders.v2");
        vh.cleanup().await;
    }
}
