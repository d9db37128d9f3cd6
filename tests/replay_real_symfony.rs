//! Symfony Messenger 5.4, end to end with Symfony's own Worker (Debian's php-symfony-messenger
//! and php-symfony-amqp-messenger, `tests/fixtures/symfony_worker.php`): a handler that throws
//! `CardDeclined` fails every order through 2 retries in Symfony's delay queues into the failure
//! transport's queue (`failed_payments`, which nothing dead-letters into); Warren must find that
//! queue by its topology, reading no message (never a delay queue), name the exception from Symfony's stamps (not
//! the delay queue's copied expiry), and, once the handler is fixed, replay every order to the
//! queue it failed in, where Symfony's worker handles each exactly once with its retry count at
//! 0 — under Symfony's JSON serializer (stamps in headers; the replay strips
//! `SentToFailureTransportStamp` on request) and the PhpSerializer (the envelope in the body).
//!
//! Without php, its amqp extension or Symfony's packages the test skips (outside CI) or fails
//! (under `CI=true`), as the other real-framework tests do.

use crate::common;
use crate::framework_util;
use crate::replay_util;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::amqp as h;
use common::drain::until_quiet;
use common::{TestBroker, TestVhost};
use framework_util::{Worker, wait_for};
use replay_util::{Home, warren};
use serde_json::Value;

const ORDERS: usize = 6;
const WORK: &str = "payments";
const FAILED: &str = "failed_payments";

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/symfony_worker.php")
}

/// php with the amqp extension and Symfony's packages, or `None` (skipped outside CI).
fn php_ready() -> Option<()> {
    let m = std::process::Command::new("php").arg("-m").output();
    let Ok(m) = m else {
        return framework_util::unavailable("php is not installed (Debian: php-cli)");
    };
    if !String::from_utf8_lossy(&m.stdout)
        .lines()
        .any(|l| l == "amqp")
    {
        return framework_util::unavailable("php's amqp extension is missing (Debian: php-amqp)");
    }
    for (what, pkg) in [
        ("Messenger/Bridge/Amqp", "php-symfony-amqp-messenger"),
        ("Serializer", "php-symfony-serializer"),
        ("EventDispatcher", "php-symfony-event-dispatcher"),
        ("DependencyInjection", "php-symfony-dependency-injection"),
        ("ErrorHandler", "php-symfony-error-handler"),
        ("PropertyAccess", "php-symfony-property-access"),
    ] {
        if !Path::new("/usr/share/php/Symfony/Component")
            .join(what)
            .exists()
        {
            return framework_util::unavailable(&format!("Symfony's {what} is missing ({pkg})"));
        }
    }
    if !String::from_utf8_lossy(&m.stdout)
        .lines()
        .any(|l| l == "xml")
    {
        return framework_util::unavailable("php's xml extension is missing (Debian: php-xml)");
    }
    Some(())
}

struct App<'a> {
    vhost: &'a TestVhost,
    dir: PathBuf,
    serializer: &'static str,
}

impl App<'_> {
    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let b = &self.vhost.broker;
        let mut cmd = tokio::process::Command::new("php");
        cmd.arg(script())
            .args(args)
            .current_dir(&self.dir)
            .env("WARREN_TEST_DSN_HOST", &b.host)
            .env("WARREN_TEST_DSN_PORT", b.amqp_port.to_string())
            .env("WARREN_TEST_DSN_VHOST", &self.vhost.name)
            .env("WARREN_TEST_SERIALIZER", self.serializer)
            .env("WARREN_TEST_FIXED", self.dir.join("fixed"))
            .env("WARREN_TEST_DONE", self.dir.join("done.txt"))
            .env("WARREN_TEST_QUEUE", WORK)
            .env("WARREN_TEST_FAILED", FAILED)
            .env("WARREN_TEST_RETRY_DELAY_MS", "100");
        cmd
    }

    async fn worker(&self, name: &str) -> Worker {
        let mut w = Worker::start(
            name,
            self.command(&["work"]),
            self.dir.join(format!("{name}.log")),
        );
        let up = wait_for(Duration::from_secs(30), || {
            let ready = w.log_text().contains("ready");
            async move { ready.then_some(()) }
        })
        .await;
        w.assert_running();
        assert!(up.is_some(), "{name} never started:\n{}", w.log_text());
        w
    }

    /// "order-0001 0 fresh": each order the fixed handler ran, with the retry count Symfony read
    /// and whether the delivery still carried `SentToFailureTransportStamp`.
    fn done(&self) -> Vec<Vec<String>> {
        std::fs::read_to_string(self.dir.join("done.txt"))
            .unwrap_or_default()
            .lines()
            .map(|l| l.split(' ').map(str::to_string).collect())
            .collect()
    }
}

/// The order id a message carries (its first `order-NNNN`, in the JSON or PHP body).
fn order_id(body: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(body);
    let i = text.find("order-")?;
    let id = text.get(i..i + 10)?;
    id[6..]
        .chars()
        .all(|c| c.is_ascii_digit())
        .then(|| id.to_string())
}

async fn ids_in(conn: &lapin::Connection, queue: &str) -> Vec<String> {
    h::peek(conn, queue, 100)
        .await
        .iter()
        .map(|m| order_id(&m.body).unwrap_or_else(|| "?".into()))
        .collect()
}

#[tokio::test]
async fn symfony_failures_are_found_explained_and_replayed_with_the_json_serializer() {
    if php_ready().is_none() {
        return;
    }
    for broker in TestBroker::all() {
        symfony_on(&broker, "json").await;
    }
}

#[tokio::test]
async fn symfony_failures_are_found_explained_and_replayed_with_the_php_serializer() {
    if php_ready().is_none() {
        return;
    }
    for broker in TestBroker::all() {
        symfony_on(&broker, "php").await;
    }
}

async fn symfony_on(broker: &TestBroker, serializer: &'static str) {
    let t0 = Instant::now();
    let vhost = TestVhost::new(broker, &format!("symfony-{serializer}")).await;
    let home = Home::new("symfony");
    let app = App {
        vhost: &vhost,
        dir: home.dir.clone(),
        serializer,
    };
    let conn = h::connect(&vhost).await;

    let failing = app.worker("failing-worker").await;
    let out = app
        .command(&["dispatch", &ORDERS.to_string()])
        .output()
        .await;
    let out = out.expect("php dispatch");
    assert!(
        out.status.success(),
        "dispatch: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sent: Vec<String> = serde_json::from_slice(&out.stdout).expect("the ids as JSON");
    let ids: BTreeSet<String> = sent.iter().cloned().collect();
    assert_eq!(ids.len(), ORDERS, "{sent:?}");

    let failed = wait_for(Duration::from_secs(30), || async {
        (h::amqp_depth(&conn, FAILED).await == ORDERS as u64).then_some(())
    })
    .await;
    assert!(
        failed.is_some(),
        "{FAILED} holds {}:\n{}",
        h::amqp_depth(&conn, FAILED).await,
        failing.log_text()
    );
    failing.stop(Duration::from_secs(10)).await;
    // Every order once in the failure queue, none left in the work queue.
    let before = ids_in(&conn, FAILED).await;
    assert_eq!(
        before.iter().cloned().collect::<BTreeSet<_>>(),
        ids,
        "{before:?}"
    );
    assert_eq!(before.len(), ORDERS, "{before:?}");
    assert_eq!(h::amqp_depth(&conn, WORK).await, 0);

    // queues: the failure queue found by its topology; no delay queue taken for a DLQ.
    let queues = warren(&vhost, &home, &["queues", "--all", "--json"]).await;
    assert_eq!(queues.code, Some(0), "{queues}");
    let listed: BTreeMap<String, Value> = queues
        .json()
        .into_iter()
        .map(|q| (q["name"].as_str().unwrap_or_default().to_string(), q))
        .collect();
    assert_eq!(listed[FAILED]["kind"], "error", "{queues}");
    assert_eq!(listed[FAILED]["convention"], "symfony", "{queues}");
    assert_eq!(listed[WORK]["kind"], "queue", "{queues}");
    for (name, q) in &listed {
        if name.starts_with("delay_") {
            assert!(
                q["convention"].is_null(),
                "a delay queue listed as a DLQ: {q}"
            );
        }
    }

    // show: Symfony's own record, not the delay queue's copied expiry.
    let show = warren(&vhost, &home, &["show", FAILED, "--json"]).await;
    assert_eq!(show.code, Some(0), "{show}");
    let mut shown = BTreeSet::new();
    for m in show.json() {
        let id = order_id(m["exception"]["message"].as_str().unwrap_or("").as_bytes());
        let id = id.unwrap_or_else(|| panic!("no order in {m}"));
        assert_eq!(m["convention"], "symfony", "{m}");
        assert_eq!(m["exception"]["type"], "App\\CardDeclined", "{m}");
        assert_eq!(
            m["exception"]["message"],
            format!("card declined for order {id}"),
            "{m}"
        );
        assert_eq!(m["retries"], 2, "{m}");
        assert_eq!(m["message_type"], "App\\ChargeCard", "{m}");
        assert_eq!(m["deaths_copied"], true, "{m}");
        assert_eq!(m["replay_target"]["expected_queue"], WORK, "{m}");
        let verdict = m["verdict"].as_str().unwrap_or_default();
        assert!(
            verdict.starts_with(
                "App\\CardDeclined in payments after 2 retries on transport async: card declined"
            ),
            "{m}"
        );
        assert!(!verdict.contains("xpired"), "{m}");
        shown.insert(id);
    }
    assert_eq!(shown, ids, "{show}");

    // groups: one failure, by its exception.
    let groups = warren(&vhost, &home, &["groups", FAILED, "--json"]).await;
    let summary = framework_util::group_counts(&groups.json());
    assert_eq!(
        summary,
        BTreeMap::from([(
            "App\\CardDeclined: card declined for order order-#".to_string(),
            ORDERS as u64
        )]),
        "{groups}"
    );

    // JSON: a replay without the failure stamp that fails again comes back to the failure
    // transport (Symfony 5.4 would drop it with the stamp), told as failed again.
    if serializer == "json" {
        let failing = app.worker("failing-again").await;
        let one = [
            "replay",
            FAILED,
            "--yes",
            "--json",
            "--limit",
            "1",
            "--strip-failure-stamp",
        ];
        let again = warren(&vhost, &home, &one).await;
        assert_eq!(again.code, Some(0), "{again}");
        assert_eq!(again.summary_u64("moved"), 1, "{again}");
        let back = wait_for(Duration::from_secs(30), || async {
            let ids = ids_in(&conn, FAILED).await;
            (ids.len() == ORDERS).then_some(ids)
        })
        .await;
        failing.stop(Duration::from_secs(10)).await;
        let back = back.unwrap_or_default();
        assert_eq!(
            back.iter().cloned().collect::<BTreeSet<_>>(),
            ids,
            "{back:?}"
        );
        let show = warren(&vhost, &home, &["show", FAILED, "--json"]).await;
        let again: Vec<Value> = show
            .json()
            .into_iter()
            .filter(|m| m["replay_count"] == 1)
            .collect();
        assert_eq!(again.len(), 1, "{show}");
        assert!(
            again[0]["verdict"]
                .as_str()
                .is_some_and(|v| v.ends_with("; failed again after 1 replay")),
            "{show}"
        );
    }

    // The fix is deployed; the plan warns that Symfony drops a second failure.
    std::fs::write(app.dir.join("fixed"), "").expect("the fix");
    let fixed = app.worker("fixed-worker").await;
    let dry = warren(&vhost, &home, &["replay", FAILED, "--dry-run", "--json"]).await;
    assert_eq!(dry.code, Some(0), "{dry}");
    let plan = dry.event("plan");
    assert_eq!(plan["attempts_not_reset"], 0, "{dry}");
    let warned = plan["warnings"]
        .as_object()
        .is_some_and(|w| w.keys().any(|k| k.starts_with("Symfony will drop it")));
    assert!(warned, "{dry}");
    let strip = serializer == "json";
    let mut args = vec!["replay", FAILED, "--yes", "--json"];
    if strip {
        args.push("--strip-failure-stamp");
    }
    let run = warren(&vhost, &home, &args).await;
    assert_eq!(run.code, Some(0), "{run}");
    assert_eq!(run.summary_u64("moved"), ORDERS as u64, "{run}");
    assert_eq!(
        run.event("summary")["targets"],
        serde_json::json!({WORK: ORDERS}),
        "{run}"
    );

    let ran = wait_for(Duration::from_secs(30), || async {
        let d = app.done();
        (d.len() >= ORDERS).then_some(d)
    })
    .await;
    // Anything handled twice, or failed again, shows once the queues are quiet.
    until_quiet(
        &vhost,
        &conn,
        &[WORK, FAILED],
        || app.done().len(),
        Duration::from_secs(60),
    )
    .await;
    let log = fixed.log_text();
    fixed.stop(Duration::from_secs(10)).await;
    assert!(
        ran.is_some(),
        "the fixed worker ran {:?}:\n{log}",
        app.done()
    );
    let ran = app.done();
    assert_eq!(ran.len(), ORDERS, "each exactly once: {ran:?}");
    let ran_ids: BTreeSet<String> = ran.iter().map(|r| r[0].clone()).collect();
    assert_eq!(ran_ids, ids, "every order ran");
    let stamp = if strip { "fresh" } else { "failed-before" };
    for r in &ran {
        assert_eq!(r[1..], ["0".to_string(), stamp.to_string()], "{r:?}");
    }
    for q in [FAILED, WORK] {
        assert_eq!(h::amqp_depth(&conn, q).await, 0, "{q}");
    }
    // The audit says which replays published the messages without their failure stamp.
    let audit = warren(&vhost, &home, &["audit", "--json"]).await;
    let records = audit.json();
    let stripped: Vec<bool> = records
        .iter()
        .map(|r| r["strip_failure_stamp"] == true)
        .collect();
    let expected = if strip { vec![true, true] } else { vec![false] };
    assert_eq!(stripped, expected, "newest first: {audit}");
    let text = warren(&vhost, &home, &["audit"]).await;
    assert_eq!(
        text.stdout
            .contains("--strip-failure-stamp: Symfony's failure stamp removed"),
        strip,
        "{text}"
    );
    let _ = conn.close(200, "done".into()).await;
    vhost.cleanup().await;
    eprintln!(
        "symfony ({serializer}) end to end on {} in {:?}",
        broker.label,
        t0.elapsed()
    );
}
