//! The frameworks' own released code, end to end: their real workers fail real messages on the
//! local broker, Warren shows, groups and replays the dead letters, and the fixed real worker
//! must then have processed every replayed message, each message id accounted for.
//!
//! The frameworks are installed once under `target/tmp/frameworks/` (see `framework_util`).

use crate::common;
use crate::framework_util;
use crate::replay_util;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use common::amqp as h;
use common::drain::until_quiet;
use common::{TestBroker, TestVhost};
use framework_util::{Worker, npm_prefix, python_venv, queue_state, wait_for};
use lapin::types::FieldTable;
use replay_util::{Home, warren};
use serde_json::Value;
use warren::domain::features::QueueType;

const CELERY: &str = "celery==5.7.0";

/// The Celery app: its queue dead-letters into `work.dlq` (Celery itself has no dead-letter
/// queue), `charge` retries once through Celery's own retry and then rejects, `refund` rejects at
/// once. The fixed worker records each task it runs: id, name and the retries Celery saw.
const CELERY_APP: &str = r#"
import os
from celery import Celery
from celery.exceptions import Reject
from kombu import Exchange, Queue

app = Celery("app", broker=os.environ["WARREN_TEST_BROKER"])
app.conf.update(
    task_queues=[Queue("work", Exchange("work", type="direct"), routing_key="work",
                       queue_arguments={"x-dead-letter-exchange": "",
                                        "x-dead-letter-routing-key": "work.dlq"})],
    task_default_queue="work",
    task_default_exchange="work",
    task_default_routing_key="work",
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)
FIXED = os.environ.get("WARREN_TEST_FIXED") == "1"

def record(task):
    with open(os.environ["WARREN_TEST_DONE"], "a") as f:
        f.write(f"{task.request.id} {task.name} {task.request.retries}\n")

@app.task(bind=True, acks_late=True)
def charge(self, order):
    if FIXED:
        return record(self)
    if self.request.retries < 1:
        raise self.retry(countdown=0)
    raise Reject("card declined", requeue=False)

@app.task(bind=True, acks_late=True)
def refund(self, order):
    if FIXED:
        return record(self)
    raise Reject("refund service down", requeue=False)
"#;

/// Sends 5 `charge` and 2 `refund` tasks; one of each expires in 6 s (the failing worker, already
/// consuming, dead-letters them well within that), the others in an hour.
/// Prints what it sent as JSON.
const CELERY_SEND: &str = r#"
import json
from app import charge, refund
sent = []
for i in range(7):
    task = charge if i < 5 else refund
    expiring = i in (0, 5)
    r = task.apply_async(args=[i], expires=6 if expiring else 3600)
    sent.append({"id": r.id, "task": task.name, "expiring": expiring})
print(json.dumps(sent))
"#;

fn celery_worker(python: &Path, dir: &Path, broker: &str, fixed: bool, log: &str) -> Worker {
    let mut cmd = tokio::process::Command::new(python);
    cmd.args([
        "-m",
        "celery",
        "-A",
        "app",
        "worker",
        "--pool",
        "solo",
        // Without broker heartbeats its event loop wakes too rarely: a SIGTERM then took 9 s.
        "--without-gossip",
        "--without-mingle",
        "--loglevel",
        "info",
        "--hostname",
        if fixed { "fixed@%h" } else { "failing@%h" },
    ])
    .current_dir(dir)
    .env("WARREN_TEST_BROKER", broker)
    .env("WARREN_TEST_FIXED", if fixed { "1" } else { "0" })
    .env("WARREN_TEST_DONE", dir.join("done.txt"))
    // The worker refuses nothing as root, but says so at length.
    .env("C_FORCE_ROOT", "1");
    Worker::start(log, cmd, dir.join(format!("{log}.log")))
}

/// Starts a worker and waits until it consumes from `work`.
async fn started(conn: &lapin::Connection, mut w: Worker) -> Worker {
    let up = wait_for(Duration::from_secs(30), || async {
        queue_state(conn, "work")
            .await
            .filter(|(_, consumers)| *consumers > 0)
    })
    .await;
    w.assert_running();
    assert!(up.is_some(), "{} never consumed:\n{}", w.name, w.log_text());
    w
}

/// The fixed worker's record: task id → (task name, retries Celery saw), and how many runs.
fn done(dir: &Path) -> (BTreeMap<String, (String, i64)>, usize) {
    let text = std::fs::read_to_string(dir.join("done.txt")).unwrap_or_default();
    let mut runs = 0;
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        if let [id, task, retries] = parts[..] {
            runs += 1;
            out.insert(
                id.to_string(),
                (task.to_string(), retries.parse().unwrap_or(-1)),
            );
        }
    }
    (out, runs)
}

fn str_of<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or_default()
}

#[tokio::test]
async fn celery_tasks_are_named_keyed_by_task_id_and_none_is_discarded_on_replay() {
    let Some(python) = python_venv("celery-5.7.0", &[CELERY]) else {
        return;
    };
    let t0 = Instant::now();
    let broker = TestBroker::default_broker();
    let vhost = TestVhost::new(&broker, "celery").await;
    let home = Home::new("celery");
    let dir = home.dir.clone();
    std::fs::write(dir.join("app.py"), CELERY_APP).expect("app.py");
    std::fs::write(dir.join("send.py"), CELERY_SEND).expect("send.py");
    let conn = h::connect(&vhost).await;
    let ch = h::confirm_channel(&conn).await;
    h::declare(&ch, "work.dlq", QueueType::Classic, FieldTable::default()).await;
    let url = vhost.amqp_url();

    // The failing worker declares `work` (with its dead-letter arguments) and takes the tasks.
    let failing = started(
        &conn,
        celery_worker(&python, &dir, &url, false, "failing-worker"),
    )
    .await;
    let out = std::process::Command::new(&python)
        .arg("send.py")
        .current_dir(&dir)
        .env("WARREN_TEST_BROKER", &url)
        .output()
        .expect("send.py");
    // The deadlines are 6 s from each send, all before send.py exits (its start-up under load
    // took long enough that a clock started before it saw a deadline not yet passed).
    let sent_at = Instant::now();
    assert!(
        out.status.success(),
        "send.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sent: Vec<Value> = serde_json::from_slice(&out.stdout).expect("sent tasks as JSON");
    assert_eq!(sent.len(), 7);
    let ids: BTreeSet<String> = sent.iter().map(|t| str_of(t, "id").to_string()).collect();
    assert_eq!(ids.len(), 7, "seven task ids");
    let expiring: BTreeSet<String> = sent
        .iter()
        .filter(|t| t["expiring"] == true)
        .map(|t| str_of(t, "id").to_string())
        .collect();
    let task_of: BTreeMap<String, String> = sent
        .iter()
        .map(|t| (str_of(t, "id").to_string(), str_of(t, "task").to_string()))
        .collect();

    let dead = wait_for(Duration::from_secs(30), || async {
        queue_state(&conn, "work.dlq")
            .await
            .filter(|(n, _)| *n == 7)
    })
    .await;
    assert!(
        dead.is_some(),
        "the failing worker dead-lettered {:?} of 7:\n{}",
        queue_state(&conn, "work.dlq").await,
        failing.log_text()
    );
    failing.stop(Duration::from_secs(10)).await;
    // The two short deadlines pass while the tasks sit in the DLQ. Time, not an event: an
    // expired deadline is what is tested.
    let passed = Duration::from_millis(6_500);
    if let Some(rest) = passed.checked_sub(sent_at.elapsed()) {
        tokio::time::sleep(rest).await;
    }

    // show: every task by its task id, named, with the tries Celery made and whether its
    // deadline passed.
    let show = warren(&vhost, &home, &["show", "work.dlq", "--json"]).await;
    assert_eq!(show.code, Some(0), "{show}");
    let shown = show.json();
    assert_eq!(shown.len(), 7, "{show}");
    let mut keys = BTreeSet::new();
    for m in &shown {
        let key = str_of(m, "key");
        let id = key
            .strip_prefix("header:id:")
            .unwrap_or_else(|| panic!("key {key} is not the task id"));
        keys.insert(id.to_string());
        let task = &task_of[id];
        assert_eq!(str_of(m, "convention"), "celery", "{m}");
        assert_eq!(str_of(m, "message_type"), task, "{m}");
        let tries = if task == "app.charge" {
            "after 1 retry"
        } else {
            "on its first try"
        };
        assert_eq!(
            str_of(m, "verdict"),
            format!("Celery task {task}: rejected once by work, {tries}"),
            "{m}"
        );
        assert_eq!(
            m["deadline_passed"],
            expiring.contains(id),
            "{id} expiring: {m}"
        );
        assert_eq!(m["replay_target"]["expected_queue"], "work", "{m}");
    }
    assert_eq!(keys, ids, "every task once, by its id");

    // groups: by task and death, not one group for the whole queue.
    let groups = warren(&vhost, &home, &["groups", "work.dlq", "--json"]).await;
    assert_eq!(groups.code, Some(0), "{groups}");
    let summary = framework_util::group_counts(&groups.json());
    assert_eq!(
        summary,
        BTreeMap::from([
            ("app.charge: rejected in work".to_string(), 5),
            ("app.refund: rejected in work".to_string(), 2),
        ]),
        "{groups}"
    );

    // The fix is deployed; then the replay. The two past their deadline stay in the DLQ.
    let fixed = started(
        &conn,
        celery_worker(&python, &dir, &url, true, "fixed-worker"),
    )
    .await;
    // The dry run reads the head and plans each message; the run itself reads nothing first
    // (only 'work' dead-letters into work.dlq) and decides each deadline as it takes the message.
    let first = warren(
        &vhost,
        &home,
        &["replay", "work.dlq", "--dry-run", "--json"],
    )
    .await;
    assert_eq!(first.code, Some(0), "{first}");
    let plan = first.event("plan");
    assert_eq!(plan["selected"], 5, "{first}");
    assert_eq!(plan["expired"], 2, "{first}");
    assert_eq!(plan["expired_stay"], 2, "{first}");
    assert_eq!(plan["resets"], serde_json::json!(["retries"]), "{first}");
    assert_eq!(plan["attempts_not_reset"], 0, "{first}");
    assert_eq!(
        plan["notices"][0],
        "Celery will discard 2 of 7 on arrival: their `expires` has passed; they stay in the DLQ (--clear-expiry removes the deadline and replays them)",
        "{first}"
    );
    assert!(
        first.stderr.contains("attempts reset"),
        "every counter was reset: {first}"
    );
    let first = warren(&vhost, &home, &["replay", "work.dlq", "--yes", "--json"]).await;
    // 7 confirmed (the queue's depth), 5 moved: the two kept by their plan make it partial.
    assert_eq!(first.code, Some(1), "{first}");
    assert_eq!(
        first.event("plan")["examined"],
        0,
        "nothing read first: {first}"
    );
    assert!(
        first.event("summary")["outcome"]
            .as_str()
            .is_some_and(|o| o.contains("stayed in the DLQ by their own plan")),
        "{first}"
    );
    assert_eq!(first.summary_u64("moved"), 5, "{first}");
    assert_eq!(first.summary_u64("held_back"), 2, "{first}");
    assert_eq!(first.summary_u64("failed"), 0, "{first}");
    let ran = wait_for(Duration::from_secs(30), || async {
        let (d, _) = done(&dir);
        (d.len() >= 5).then_some(d)
    })
    .await
    .unwrap_or_else(|| {
        panic!(
            "the fixed worker ran {:?}:\n{}",
            done(&dir),
            fixed.log_text()
        )
    });
    let want: BTreeSet<String> = ids.difference(&expiring).cloned().collect();
    assert_eq!(
        ran.keys().cloned().collect::<BTreeSet<_>>(),
        want,
        "the five within their deadline ran"
    );
    let left = h::peek(&conn, "work.dlq", 10).await;
    let left_ids: BTreeSet<String> = left
        .iter()
        .filter_map(|m| m.headers.get_str("id").map(str::to_string))
        .collect();
    assert_eq!(left_ids, expiring, "the two past their deadline stayed");

    // --clear-expiry: the deadline goes, Celery runs them, the audit says so.
    let second = warren(
        &vhost,
        &home,
        &[
            "replay",
            "work.dlq",
            "--dry-run",
            "--json",
            "--clear-expiry",
        ],
    )
    .await;
    assert_eq!(second.code, Some(0), "{second}");
    let plan = second.event("plan");
    assert_eq!(plan["selected"], 2, "{second}");
    assert_eq!(plan["expired_stay"], 0, "{second}");
    assert!(
        plan["removes"]
            .as_array()
            .is_some_and(|r| r.iter().any(|n| n == "expires")),
        "{second}"
    );
    let second = warren(
        &vhost,
        &home,
        &["replay", "work.dlq", "--yes", "--json", "--clear-expiry"],
    )
    .await;
    assert_eq!(second.code, Some(0), "{second}");
    assert_eq!(second.summary_u64("moved"), 2, "{second}");
    let ran = wait_for(Duration::from_secs(30), || async {
        let (d, runs) = done(&dir);
        (d.len() >= 7).then_some((d, runs))
    })
    .await;
    let log = fixed.log_text();
    fixed.stop(Duration::from_secs(10)).await;
    let (ran, runs) =
        ran.unwrap_or_else(|| panic!("the fixed worker ran {:?}:\n{log}", done(&dir)));
    assert_eq!(
        ran.keys().cloned().collect::<BTreeSet<_>>(),
        ids,
        "all 7 ran"
    );
    assert_eq!(runs, 7, "each exactly once");
    for (id, (task, retries)) in &ran {
        assert_eq!(task, &task_of[id]);
        assert_eq!(*retries, 0, "{id}: Celery saw its retries reset");
    }
    assert!(
        !log.contains("Discarding revoked task") && !log.contains("expired"),
        "no task was discarded:\n{log}"
    );
    assert_eq!(queue_state(&conn, "work.dlq").await.map(|s| s.0), Some(0));
    assert_eq!(queue_state(&conn, "work").await.map(|s| s.0), Some(0));

    // The audit names the tasks by their ids, and records --clear-expiry.
    let audit = warren(&vhost, &home, &["audit", "--json"]).await;
    let records = audit.json();
    assert_eq!(records.len(), 2, "{audit}");
    assert_eq!(records[0]["clear_expiry"], true, "{audit}");
    assert_eq!(records[1]["clear_expiry"], false, "{audit}");
    let audited = |r: &Value| -> BTreeSet<String> {
        r["message_ids"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(|k| k.strip_prefix("header:id:").unwrap_or(k).to_string())
            .collect()
    };
    assert_eq!(audited(&records[0]), expiring, "{audit}");
    assert_eq!(audited(&records[1]), want, "{audit}");

    drop(ch);
    let _ = conn.close(200, "done".into()).await;
    vhost.cleanup().await;
    eprintln!("celery end to end in {:?}", t0.elapsed());
}

const RASCAL: &str = "rascal@21.0.1";

/// The rascal app: `work` republishes a failure for an immediate nack (the broker then
/// dead-letters it into `work.dlq`), `mail` forwards a failure to `mail.dead` (no `x-death`).
/// `node app.js send` publishes 5 orders (3 "card declined", 2 "gateway timeout") and 2 mails
/// and prints their message ids; the fixed worker records each message it handles.
const RASCAL_APP: &str = r#"
const Rascal = require('rascal');
const fs = require('fs');
const url = process.env.WARREN_TEST_BROKER;
const vhost = decodeURIComponent(new URL(url).pathname.slice(1));
const config = {
  vhosts: {
    [vhost]: {
      connection: { url },
      queues: {
        work: { options: { arguments: { 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': 'work.dlq' } } },
        'work.dlq': {},
        mail: {},
        'mail.dead': {},
      },
      publications: { work: { queue: 'work' }, mail: { queue: 'mail' }, 'mail.dead': { queue: 'mail.dead' } },
      subscriptions: { work: { queue: 'work' }, mail: { queue: 'mail' } },
    },
  },
};
const recovery = {
  work: [{ strategy: 'republish', immediateNack: true }],
  mail: [{ strategy: 'forward', publication: 'mail.dead' }],
};
(async () => {
  const broker = await Rascal.BrokerAsPromised.create(Rascal.withDefaultConfig(config));
  broker.on('error', (e) => console.error('broker error', e.message));
  if (process.argv[2] === 'send') {
    const sent = [];
    const send = async (name, content) => {
      const p = await broker.publish(name, content);
      sent.push(await new Promise((res) => p.on('success', (id) => res({ id, queue: name, fail: content.fail }))));
    };
    for (let i = 0; i < 5; i++) await send('work', { order: i, fail: i < 3 ? 'card declined' : 'gateway timeout' });
    for (let i = 0; i < 2; i++) await send('mail', { mail: i, fail: 'smtp refused' });
    console.log(JSON.stringify(sent));
    await broker.shutdown();
    return;
  }
  // Stopped as a deployment stops it: rascal cancels its consumers and waits for the acks of
  // messages it is still recovering (the original of a copy already republished or forwarded is
  // acked only after the copy's confirm). Killed without this, such an original went back to its
  // queue and the fixed worker handled it besides its replayed copy.
  process.on('SIGTERM', () => broker.shutdown().then(() => process.exit(0), (e) => { console.error(e); process.exit(1); }));
  const fixed = process.env.WARREN_TEST_FIXED === '1';
  for (const name of ['work', 'mail']) {
    const sub = await broker.subscribe(name);
    sub.on('message', (message, content, ackOrNack) => {
      if (fixed) {
        fs.appendFileSync(process.env.WARREN_TEST_DONE, `${message.properties.messageId} ${name}\n`);
        return ackOrNack();
      }
      ackOrNack(new Error(content.fail), recovery[name]);
    });
    sub.on('error', (e) => console.error('subscription error', e.message));
  }
  console.log('ready');
})().catch((e) => { console.error(e); process.exit(1); });
"#;

/// Waits until the broker has taken the stopped worker's consumers off `queues` (it requeues what
/// they held unacknowledged first), then asserts that no message went back to them.
async fn settled_by(conn: &lapin::Connection, queues: &[&str]) {
    let gone = wait_for(Duration::from_secs(30), || async {
        let mut states = Vec::new();
        for q in queues {
            states.push(queue_state(conn, q).await?);
        }
        states.iter().all(|s| s.1 == 0).then_some(states)
    })
    .await;
    let states =
        gone.unwrap_or_else(|| panic!("the stopped worker still consumes from {queues:?}"));
    for (q, (ready, _)) in queues.iter().zip(states) {
        assert_eq!(
            ready, 0,
            "{q}: the stopped worker left a message unsettled, back in its queue"
        );
    }
}

/// Starts a rascal worker and waits until it consumes from both queues.
async fn rascal_started(conn: &lapin::Connection, mut w: Worker) -> Worker {
    let up = wait_for(Duration::from_secs(30), || async {
        let work = queue_state(conn, "work").await?;
        let mail = queue_state(conn, "mail").await?;
        (work.1 > 0 && mail.1 > 0).then_some(())
    })
    .await;
    w.assert_running();
    assert!(up.is_some(), "{} never consumed:\n{}", w.name, w.log_text());
    w
}

fn done_ids(dir: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(dir.join("done.txt"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(id, q)| (id.to_string(), q.to_string()))
        .collect()
}

#[tokio::test]
async fn rascal_failures_are_read_from_its_table_and_a_replay_is_not_nacked_back() {
    let Some(modules) = npm_prefix("rascal-21.0.1", &[RASCAL]) else {
        return;
    };
    let t0 = Instant::now();
    let broker = TestBroker::default_broker();
    let vhost = TestVhost::new(&broker, "rascal").await;
    let home = Home::new("rascal");
    let dir = home.dir.clone();
    std::fs::write(dir.join("app.js"), RASCAL_APP).expect("app.js");
    let conn = h::connect(&vhost).await;
    let url = vhost.amqp_url();

    let failing = rascal_started(
        &conn,
        framework_util::node_worker(&modules, &dir, &url, false, "failing-worker"),
    )
    .await;
    let out = std::process::Command::new("node")
        .args(["app.js", "send"])
        .current_dir(&dir)
        .env("NODE_PATH", &modules)
        .env("WARREN_TEST_BROKER", &url)
        .output()
        .expect("node app.js send");
    assert!(
        out.status.success(),
        "send: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sent: Vec<Value> = serde_json::from_slice(&out.stdout).expect("sent messages as JSON");
    let ids_of = |queue: &str| -> BTreeSet<String> {
        sent.iter()
            .filter(|m| m["queue"] == queue)
            .map(|m| str_of(m, "id").to_string())
            .collect()
    };
    let (orders, mails) = (ids_of("work"), ids_of("mail"));
    assert_eq!((orders.len(), mails.len()), (5, 2), "{sent:?}");
    let error_of: BTreeMap<String, String> = sent
        .iter()
        .map(|m| (str_of(m, "id").to_string(), str_of(m, "fail").to_string()))
        .collect();

    let dead = wait_for(Duration::from_secs(30), || async {
        let dlq = queue_state(&conn, "work.dlq").await?.0;
        let parked = queue_state(&conn, "mail.dead").await?.0;
        (dlq == 5 && parked == 2).then_some(())
    })
    .await;
    assert!(
        dead.is_some(),
        "rascal dead-lettered {:?} and forwarded {:?}:\n{}",
        queue_state(&conn, "work.dlq").await,
        queue_state(&conn, "mail.dead").await,
        failing.log_text()
    );
    // The copies are counted in their DLQs before rascal acks the originals (a republished copy
    // is nacked into `work.dlq` before the republish's confirm comes back): stopped, the worker
    // must have settled every original, else one goes back to its queue to be handled twice.
    failing.stop(Duration::from_secs(10)).await;
    settled_by(&conn, &["work", "mail"]).await;

    // show: rascal's error text, by message id; the forwarded ones are explained from the table.
    for (queue, ids, how, target) in [
        ("work.dlq", &orders, "(nacked by rascal)", "work"),
        ("mail.dead", &mails, "(forwarded here by rascal)", "mail"),
    ] {
        let show = warren(&vhost, &home, &["show", queue, "--json"]).await;
        assert_eq!(show.code, Some(0), "{show}");
        let mut keys = BTreeSet::new();
        for m in show.json() {
            let id = str_of(&m, "message_id").to_string();
            assert_eq!(str_of(&m, "key"), format!("id:{id}"), "{m}");
            assert_eq!(str_of(&m, "convention"), "rascal", "{m}");
            assert_eq!(
                str_of(&m, "verdict"),
                format!("A failure in {target} {how}: {}", error_of[&id]),
                "{m}"
            );
            assert_eq!(m["replay_target"]["expected_queue"], target, "{m}");
            keys.insert(id);
        }
        assert_eq!(&keys, ids, "{show}");
    }
    let groups = warren(&vhost, &home, &["groups", "work.dlq", "--json"]).await;
    let summary = framework_util::group_counts(&groups.json());
    assert_eq!(
        summary,
        BTreeMap::from([
            ("card declined".to_string(), 3),
            ("gateway timeout".to_string(), 2),
        ]),
        "{groups}"
    );

    // The fix is deployed; replaying must reach the handler, not rascal's immediate nack.
    let fixed = rascal_started(
        &conn,
        framework_util::node_worker(&modules, &dir, &url, true, "fixed-worker"),
    )
    .await;
    for (queue, n, removes) in [
        (
            "work.dlq",
            5,
            vec!["rascal.recovery", "rascal.error", "x-death"],
        ),
        (
            "mail.dead",
            2,
            vec!["rascal.recovery", "rascal.error", "CC"],
        ),
    ] {
        // The plan of each message from the dry run (the run may read nothing first).
        let dry = warren(&vhost, &home, &["replay", queue, "--dry-run", "--json"]).await;
        assert_eq!(dry.code, Some(0), "{dry}");
        let plan = dry.event("plan");
        for r in removes {
            assert!(
                plan["removes"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|x| x == r)),
                "{queue} removes {r}: {dry}"
            );
        }
        assert!(dry.stderr.contains("attempts reset"), "{dry}");
        let run = warren(&vhost, &home, &["replay", queue, "--yes", "--json"]).await;
        assert_eq!(run.code, Some(0), "{run}");
        assert_eq!(run.summary_u64("moved"), n, "{run}");
    }
    let ran = wait_for(Duration::from_secs(30), || async {
        let d = done_ids(&dir);
        (d.len() >= 7).then_some(d)
    })
    .await;
    // Anything nacked straight back, or run twice, is in the DLQ or the log once the queues
    // are quiet.
    until_quiet(
        &vhost,
        &conn,
        &["work", "mail", "work.dlq", "mail.dead"],
        || done_ids(&dir).len(),
        Duration::from_secs(60),
    )
    .await;
    let log = fixed.log_text();
    fixed.stop(Duration::from_secs(10)).await;
    let ran = ran.unwrap_or_else(|| panic!("the fixed worker ran {:?}:\n{log}", done_ids(&dir)));
    assert_eq!(ran.len(), 7, "each exactly once: {ran:?}");
    let ran_in = |q: &str| -> BTreeSet<String> {
        ran.iter()
            .filter(|(_, queue)| queue == q)
            .map(|(id, _)| id.clone())
            .collect()
    };
    assert_eq!(ran_in("work"), orders, "every order ran");
    assert_eq!(ran_in("mail"), mails, "every mail ran");
    for q in ["work.dlq", "mail.dead", "work", "mail"] {
        assert_eq!(queue_state(&conn, q).await.map(|s| s.0), Some(0), "{q}");
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
    assert_eq!(
        audited,
        orders.union(&mails).cloned().collect::<BTreeSet<_>>(),
        "{audit}"
    );

    let _ = conn.close(200, "done".into()).await;
    vhost.cleanup().await;
    eprintln!("rascal end to end in {:?}", t0.elapsed());
}
