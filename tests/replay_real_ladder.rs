//! A hand-rolled TTL retry ladder (plain amqplib, the commonest pattern), end to end: a real Node
//! worker fails real messages through its wait queue and copies them into the DLQ itself; Warren
//! lists the queues, shows, groups and replays the dead letters; the fixed worker must then have
//! processed every replayed message, with its retry counter at 0, each message id accounted for.
//!
//! amqplib is installed once under `target/tmp/frameworks/` (see `framework_util`).

use crate::common;
use crate::framework_util;
use crate::replay_util;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use common::TestBroker;
use common::TestVhost;
use common::amqp as h;
use common::drain::until_quiet;
use framework_util::{Worker, npm_prefix, wait_for};
use replay_util::{Home, warren};
use serde_json::Value;

const AMQPLIB: &str = "amqplib@2.3.1";

/// The app: `orders` is consumed; a failure is republished to the `wait` exchange (key
/// `orders`) with `x-retry-count` + 1 and `x-last-error`; `orders.wait` holds it for its TTL and
/// dead-letters it through the `work` exchange (no dead-letter routing key: it keeps `orders`)
/// back into `orders`; on the third failure the app copies it into `orders.dlq` itself and acks.
/// `node app.js send` publishes 5 orders (3 "card declined", 2 "stock service timed out") and
/// prints their ids; the fixed worker records each message it handles with the counter it saw.
const LADDER_APP: &str = r#"
const amqp = require('amqplib');
const fs = require('fs');
const TRIES = 3;
(async () => {
  const conn = await amqp.connect(process.env.WARREN_TEST_BROKER);
  const ch = await conn.createConfirmChannel();
  await ch.assertExchange('work', 'direct', { durable: true });
  await ch.assertExchange('wait', 'direct', { durable: true });
  await ch.assertQueue('orders', { durable: true });
  await ch.bindQueue('orders', 'work', 'orders');
  await ch.assertQueue('orders.wait', { durable: true, arguments: { 'x-message-ttl': 200, 'x-dead-letter-exchange': 'work' } });
  await ch.bindQueue('orders.wait', 'wait', 'orders');
  await ch.assertQueue('orders.dlq', { durable: true });
  if (process.argv[2] === 'send') {
    const sent = [];
    for (let i = 0; i < 5; i++) {
      const fail = i < 3 ? `card declined for order ${i}` : `stock service timed out after ${100 + i} ms`;
      const id = `order-${i}`;
      ch.publish('work', 'orders', Buffer.from(JSON.stringify({ order: i, fail })), { messageId: id, persistent: true, contentType: 'application/json' });
      sent.push({ id, fail });
    }
    await ch.waitForConfirms();
    console.log(JSON.stringify(sent));
    await conn.close();
    return;
  }
  const fixed = process.env.WARREN_TEST_FIXED === '1';
  await ch.prefetch(10);
  await ch.consume('orders', async (msg) => {
    const headers = msg.properties.headers || {};
    const seen = headers['x-retry-count'] || 0;
    if (fixed) {
      fs.appendFileSync(process.env.WARREN_TEST_DONE, `${msg.properties.messageId} ${JSON.stringify(headers['x-retry-count'])}\n`);
      ch.ack(msg);
      return;
    }
    const error = JSON.parse(msg.content.toString()).fail;
    const tries = seen + 1;
    const out = { ...msg.properties, headers: { ...headers, 'x-retry-count': tries, 'x-last-error': error } };
    if (tries < TRIES) ch.publish('wait', 'orders', msg.content, out);
    else ch.sendToQueue('orders.dlq', msg.content, out);
    await ch.waitForConfirms();
    ch.ack(msg);
  });
  console.log('ready');
})().catch((e) => { console.error(e); process.exit(1); });
"#;

/// Waits until the worker says it consumes.
async fn ladder_started(mut w: Worker) -> Worker {
    let up = wait_for(Duration::from_secs(30), || {
        let ready = w.log_text().contains("ready");
        async move { ready.then_some(()) }
    })
    .await;
    w.assert_running();
    assert!(up.is_some(), "{} never consumed:\n{}", w.name, w.log_text());
    w
}

/// What the fixed worker handled: message id → the `x-retry-count` it saw (JSON).
fn done(dir: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(dir.join("done.txt"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(id, n)| (id.to_string(), n.to_string()))
        .collect()
}

fn str_of<'a>(v: &'a Value, k: &str) -> &'a str {
    v[k].as_str().unwrap_or_default()
}

/// On every broker version the run has (3.10 keeps the copied `x-death` history, 4.x starts a
/// fresh one on a client republish).
#[tokio::test]
async fn a_hand_rolled_ladder_is_read_by_its_headers_and_replayed_past_its_wait_queue() {
    let Some(modules) = npm_prefix("amqplib-2.3.1", &[AMQPLIB]) else {
        return;
    };
    // The brokers at once (each run has its own vhost, Home and app); a broker's two in turn.
    TestBroker::each(|broker| {
        let modules = modules.clone();
        async move {
            // Named like a wait queue, and a name that matches no pattern: known by what it
            // does (a TTL queue returning each message by its own key to one queue).
            for wait in ["orders.wait", "orders.cooldown"] {
                ladder_on(&broker, &modules, wait).await;
            }
        }
    })
    .await;
}

async fn ladder_on(broker: &TestBroker, modules: &Path, wait: &str) {
    let t0 = Instant::now();
    let vhost = TestVhost::new(broker, "ladder").await;
    let home = Home::new("ladder");
    let dir = home.dir.clone();
    std::fs::write(dir.join("app.js"), LADDER_APP.replace("orders.wait", wait)).expect("app.js");
    let conn = h::connect(&vhost).await;
    let url = vhost.amqp_url();

    let failing = ladder_started(framework_util::node_worker(
        modules,
        &dir,
        &url,
        false,
        "failing-worker",
    ))
    .await;
    let out = std::process::Command::new("node")
        .args(["app.js", "send"])
        .current_dir(&dir)
        .env("NODE_PATH", modules)
        .env("WARREN_TEST_BROKER", &url)
        .output()
        .expect("node app.js send");
    assert!(
        out.status.success(),
        "send: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sent: Vec<Value> = serde_json::from_slice(&out.stdout).expect("sent messages as JSON");
    let error_of: BTreeMap<String, String> = sent
        .iter()
        .map(|m| (str_of(m, "id").to_string(), str_of(m, "fail").to_string()))
        .collect();
    assert_eq!(error_of.len(), 5, "{sent:?}");
    let ids: BTreeSet<String> = error_of.keys().cloned().collect();

    let dead = wait_for(Duration::from_secs(30), || async {
        (h::amqp_depth(&conn, "orders.dlq").await == 5).then_some(())
    })
    .await;
    assert!(
        dead.is_some(),
        "the app copied {} into orders.dlq:\n{}",
        h::amqp_depth(&conn, "orders.dlq").await,
        failing.log_text()
    );
    failing.stop(Duration::from_secs(10)).await;
    // The app acknowledges a delivery after it copied it into the DLQ: stopped the moment the
    // DLQ holds 5, it can die before its last acks reach the broker, which then hands those
    // deliveries (one retry short) back to `orders` — the fixed worker ran two of them in a CI
    // rehearsal. That is the app's at-least-once, not the replay: the incident's leftovers are
    // cleared once the broker has taken them back, so the fixed worker sees only what Warren
    // replays. The broker has taken them back once the app's consumer is off `orders`.
    let off = wait_for(Duration::from_secs(30), || async {
        framework_util::queue_state(&conn, "orders")
            .await
            .filter(|(_, consumers)| *consumers == 0)
    })
    .await;
    assert!(off.is_some(), "the stopped app still consumes from orders");
    let ch = conn.create_channel().await.expect("channel");
    for q in ["orders", wait] {
        ch.queue_purge(q.into(), lapin::options::QueuePurgeOptions::default())
            .await
            .expect("purge the ladder's leftovers");
    }

    // queues: the work queue its wait queue feeds back is not a DLQ; the app's DLQ is.
    let queues = warren(&vhost, &home, &["queues", "--all", "--json"]).await;
    assert_eq!(queues.code, Some(0), "{queues}");
    let kinds: BTreeMap<String, String> = queues
        .json()
        .iter()
        .map(|q| (str_of(q, "name").to_string(), str_of(q, "kind").to_string()))
        .collect();
    assert_eq!(
        kinds.get("orders.dlq").map(String::as_str),
        Some("dlq"),
        "{queues}"
    );
    assert_eq!(
        kinds.get("orders").map(String::as_str),
        Some("queue"),
        "{queues}"
    );
    assert_eq!(
        kinds.get(wait).map(String::as_str),
        Some("wait"),
        "{queues}"
    );

    // show: the app's error text and count, by message id.
    let show = warren(&vhost, &home, &["show", "orders.dlq", "--json"]).await;
    assert_eq!(show.code, Some(0), "{show}");
    let mut shown = BTreeSet::new();
    for m in show.json() {
        let id = str_of(&m, "message_id").to_string();
        assert_eq!(str_of(&m, "convention"), "ladder", "{m}");
        assert_eq!(m["retries"], 3, "{m}");
        assert_eq!(m["exception"]["message"], error_of[&id].as_str(), "{m}");
        // Past the wait queue the death names, to where it returns messages.
        assert_eq!(m["replay_target"]["expected_queue"], wait, "{m}");
        assert_eq!(m["replay_target"]["rests_in"], "orders", "{m}");
        assert_eq!(
            str_of(&m, "verdict"),
            format!(
                "A failure after 3 retries (x-retry-count): {} (copied here from wait queue {wait})",
                error_of[&id]
            ),
            "{m}"
        );
        shown.insert(id);
    }
    assert_eq!(shown, ids, "{show}");
    let text = warren(&vhost, &home, &["show", "orders.dlq"]).await;
    assert!(text.stdout.contains("retries: 3"), "{text}");
    assert!(text.stdout.contains("card declined for order 1"), "{text}");
    assert!(
        text.stdout
            .contains("a wait queue: the replay goes on to orders, where it returns messages"),
        "{text}"
    );

    // groups: by the error text, what varies masked.
    let groups = warren(&vhost, &home, &["groups", "orders.dlq", "--json"]).await;
    let summary = framework_util::group_counts(&groups.json());
    assert_eq!(
        summary,
        BTreeMap::from([
            ("card declined for order #".to_string(), 3),
            ("stock service timed out after # ms".to_string(), 2),
        ]),
        "{groups}"
    );

    // The fix is deployed. The replay goes to orders (the wait queue is never the target), the
    // counter is reset and the plan says so.
    let fixed = ladder_started(framework_util::node_worker(
        modules,
        &dir,
        &url,
        true,
        "fixed-worker",
    ))
    .await;
    // The app copies its last failure into the DLQ (no queue dead-letters into it), so the run
    // reads nothing first and checks orders.wait as it meets it; the plan of each message is
    // the dry run's, which reads the head.
    let dry = warren(
        &vhost,
        &home,
        &["replay", "orders.dlq", "--dry-run", "--json"],
    )
    .await;
    assert_eq!(dry.code, Some(0), "{dry}");
    let run = warren(&vhost, &home, &["replay", "orders.dlq", "--yes", "--json"]).await;
    assert_eq!(run.code, Some(0), "{run}");
    assert_eq!(run.event("plan")["checked_as_met"], true, "{run}");
    assert_eq!(
        run.event("summary")["targets"],
        serde_json::json!({"orders": 5}),
        "{run}: past the wait queue"
    );
    let plan = dry.event("plan");
    let has = |field: &str, v: &str| {
        plan[field]
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x == v))
    };
    assert!(has("resets", "x-retry-count"), "{run}");
    assert!(has("removes", "x-last-error"), "{run}");
    assert!(has("removes", "x-death"), "{run}");
    assert_eq!(plan["attempts_not_reset"], 0, "{run}");
    let rests: Vec<&str> = plan["targets"]
        .as_object()
        .map(|t| t.values().filter_map(|t| t["rests_in"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(rests, vec!["orders"], "{dry}");
    assert!(dry.stderr.contains("attempts reset"), "{dry}");
    assert_eq!(run.summary_u64("moved"), 5, "{run}");

    let ran = wait_for(Duration::from_secs(30), || async {
        let d = done(&dir);
        (d.len() >= 5).then_some(d)
    })
    .await;
    // Anything sent round the ladder again, or handled twice, shows once the queues are quiet.
    until_quiet(
        &vhost,
        &conn,
        &["orders", wait, "orders.dlq"],
        || done(&dir).len(),
        Duration::from_secs(60),
    )
    .await;
    let log = fixed.log_text();
    fixed.stop(Duration::from_secs(10)).await;
    let ran = ran.unwrap_or_else(|| panic!("the fixed worker ran {:?}:\n{log}", done(&dir)));
    assert_eq!(ran.len(), 5, "each exactly once: {ran:?}");
    let ran_ids: BTreeSet<String> = ran.iter().map(|(id, _)| id.clone()).collect();
    assert_eq!(ran_ids, ids, "every order ran");
    for (id, counter) in &ran {
        assert_eq!(counter, "0", "{id} arrived with x-retry-count {counter}");
    }
    for q in ["orders.dlq", wait, "orders"] {
        assert_eq!(h::amqp_depth(&conn, q).await, 0, "{q}");
    }
    let audit = warren(&vhost, &home, &["audit", "--json"]).await;
    let audited: BTreeSet<String> = audit
        .json()
        .iter()
        .flat_map(|r| r["message_ids"].as_array().cloned().unwrap_or_default())
        .filter_map(|k| {
            k.as_str()
                .and_then(|k| k.strip_prefix("id:"))
                .map(str::to_string)
        })
        .collect();
    assert_eq!(audited, ids, "{audit}");

    let _ = conn.close(200, "done".into()).await;
    vhost.cleanup().await;
    eprintln!(
        "ladder ({wait}) end to end on {} in {:?}",
        broker.label,
        t0.elapsed()
    );
}
