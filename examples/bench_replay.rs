//! Replay throughput: Warren's engine (plan, header rewrite, confirms, batched acks, audit) against
//! the management UI's "Move messages" (a dynamic shovel with the UI's settings) and a naive
//! one-at-a-time get/publish/confirm/ack loop, on the same broker, alternating rounds; and the
//! same engine archiving (`warren archive`: into the archive stream, headers carried whole)
//! right after each replay round, for archive against replay.
//!
//! `cargo run --release --example bench_replay` — figures are printed, not asserted.
//! Env: `BENCH_AMQP` (default `amqp://guest:guest@127.0.0.1:5672`), `BENCH_MGMT` (default
//! `http://guest:guest@127.0.0.1:15672`), `BENCH_N` (20000), `BENCH_ROUNDS` (3),
//! `BENCH_NAIVE_N` (5000).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use lapin::options::{
    BasicAckOptions, BasicGetOptions, BasicPublishOptions, ConfirmSelectOptions,
    QueueDeclareOptions, QueuePurgeOptions,
};
use lapin::types::{AMQPValue, FieldArray, FieldTable, LongString};
use lapin::{BasicProperties, Connection};
use warren::broker::config::{self, Config, Overrides};
use warren::broker::session::{ReadConsent, ReplaySpec, Session};
use warren::domain::selection::Selection;
use warren::store::{AuditOutcome, AuditStart, Store};

const BODY: usize = 1024;

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn enc(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

struct Bench {
    amqp: String,
    mgmt: url::Url,
    vhost: String,
    http: reqwest::Client,
    user: String,
    pass: String,
}

impl Bench {
    async fn api(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> Result<()> {
        let mut base = self.mgmt.clone();
        let _ = base.set_username("");
        let _ = base.set_password(None);
        let url = format!("{}{}", base.as_str().trim_end_matches('/'), path);
        let mut req = self
            .http
            .request(method, &url)
            .basic_auth(&self.user, Some(&self.pass));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req
            .send()
            .await
            .with_context(|| format!("management API {url}"))?;
        if !r.status().is_success() {
            bail!("{url}: {}", r.status());
        }
        Ok(())
    }

    fn amqp_url(&self) -> String {
        format!("{}/{}", self.amqp.trim_end_matches('/'), enc(&self.vhost))
    }

    async fn connect(&self) -> Result<Connection> {
        Ok(warren::broker::amqp::connect(
            &[self.amqp_url()],
            &self.vhost,
            &self.user,
            &self.pass,
            None,
        )
        .await?)
    }
}

async fn depth(conn: &Connection, queue: &str) -> Result<u32> {
    let ch = conn.create_channel().await?;
    let q = ch
        .queue_declare(
            queue.into(),
            QueueDeclareOptions {
                passive: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await?;
    let _ = ch.close(200, "ok".into()).await;
    Ok(q.message_count())
}

/// `n` dead letters of 1 KiB with a broker-style death record (rejected in `work`), pipelined.
async fn fill(conn: &Connection, n: u32) -> Result<()> {
    let ch = conn.create_channel().await?;
    ch.confirm_select(ConfirmSelectOptions::default()).await?;
    let mut death = FieldTable::default();
    death.insert("count".into(), AMQPValue::LongLongInt(1));
    death.insert(
        "reason".into(),
        AMQPValue::LongString(LongString::from("rejected")),
    );
    death.insert(
        "queue".into(),
        AMQPValue::LongString(LongString::from("work")),
    );
    death.insert(
        "exchange".into(),
        AMQPValue::LongString(LongString::from("")),
    );
    death.insert(
        "routing-keys".into(),
        AMQPValue::FieldArray(FieldArray::from(vec![AMQPValue::LongString(
            LongString::from("work"),
        )])),
    );
    death.insert("time".into(), AMQPValue::Timestamp(1_700_000_000));
    let mut pending = Vec::with_capacity(1000);
    for i in 0..n {
        let mut h = FieldTable::default();
        h.insert(
            "x-death".into(),
            AMQPValue::FieldArray(FieldArray::from(vec![AMQPValue::FieldTable(death.clone())])),
        );
        h.insert(
            "x-first-death-queue".into(),
            AMQPValue::LongString(LongString::from("work")),
        );
        h.insert(
            "x-first-death-reason".into(),
            AMQPValue::LongString(LongString::from("rejected")),
        );
        h.insert(
            "x-first-death-exchange".into(),
            AMQPValue::LongString(LongString::from("")),
        );
        h.insert(
            "tenant".into(),
            AMQPValue::LongString(LongString::from("acme")),
        );
        let props = BasicProperties::default()
            .with_message_id(format!("bench-{i}").into())
            .with_content_type("application/json".into())
            .with_delivery_mode(2)
            .with_headers(h);
        let body: Vec<u8> = (0..BODY)
            .map(|j| b'a' + ((i as usize + j) % 26) as u8)
            .collect();
        pending.push(
            ch.basic_publish(
                "".into(),
                "dlq".into(),
                BasicPublishOptions::default(),
                &body,
                props,
            )
            .await?,
        );
        if pending.len() >= 1000 {
            for c in pending.drain(..) {
                c.await?;
            }
        }
    }
    for c in pending {
        c.await?;
    }
    let _ = ch.close(200, "filled".into()).await;
    Ok(())
}

async fn purge(conn: &Connection) -> Result<()> {
    let ch = conn.create_channel().await?;
    for q in ["dlq", "work"] {
        ch.queue_purge(q.into(), QueuePurgeOptions::default())
            .await?;
    }
    let _ = ch.close(200, "purged".into()).await;
    Ok(())
}

struct WarrenRun {
    preview: Duration,
    replay: Duration,
}

async fn warren_round(b: &Bench, store: &Store, n: u32) -> Result<WarrenRun> {
    let overrides = Overrides {
        amqp_url: Some(b.amqp_url()),
        management_url: Some(b.mgmt.to_string()),
        vhost: Some(b.vhost.clone()),
        ..Default::default()
    };
    let target = config::resolve(&Config::default(), &overrides, &|_| None)?;
    let session = Session::open(target).await?;
    let spec = ReplaySpec {
        queue: "dlq".into(),
        selection: Selection::All,
        limit: None,
        rate: None,
        to: None,
        allow_fan_out: false,
        keep_attempts: false,
        clear_expiry: false,
        window: session.target.settings.replay.window,
        consent: ReadConsent::Reuse,
        run_id: None,
    };
    let t0 = Instant::now();
    let preview = session.preview(&spec, |_| Default::default()).await?;
    if !preview.refusals.is_empty() {
        bail!("refused: {:?}", preview.refusals);
    }
    let preview_time = t0.elapsed();
    let t1 = Instant::now();
    let id = store.begin_replay(&AuditStart {
        run_id: warren::broker::audit::new_run_id(jiff::Timestamp::now()),
        at: jiff::Timestamp::now(),
        os_user: warren::store::current_os_user(),
        broker_user: session.whoami.name.clone(),
        context: session.target.context.clone(),
        vhost: b.vhost.clone(),
        from_queue: "dlq".into(),
        targets: preview.targets.keys().cloned().collect(),
        filter: None,
        group: None,
        requested_limit: None,
        dry_run: false,
        keep_attempts: false,
        clear_expiry: false,
    })?;
    let (_tx, rx) = tokio::sync::watch::channel(false);
    let mut events = 0u64;
    let summary = session
        .replay(&spec, &preview, HashMap::new(), rx, |_| events += 1)
        .await?;
    store.finish_replay(
        id,
        &AuditOutcome {
            at: jiff::Timestamp::now(),
            moved: summary.progress.moved,
            returned: summary.progress.returned,
            failed: summary.progress.failed,
            remaining: summary.progress.remaining,
            message_ids: summary.counts.moved_ids.clone(),
            duplicated: summary.counts.duplicated,
            duplicate_ids: summary.counts.duplicate_ids.clone(),
            outcome: "completed".into(),
        },
    )?;
    let replay = t1.elapsed();
    if summary.progress.moved != u64::from(n) {
        bail!(
            "warren moved {} of {n}: {:?}",
            summary.progress.moved,
            summary.stop
        );
    }
    Ok(WarrenRun {
        preview: preview_time,
        replay,
    })
}

/// `warren archive dlq` as the CLI runs it (the engine with the archive action, and the audit)
/// into a fresh `warren.archive` stream; the time of the run, as for the replay.
async fn archive_round(b: &Bench, conn: &Connection, store: &Store, n: u32) -> Result<Duration> {
    use warren::broker::replay::Action;
    use warren::broker::session::Work;
    let overrides = Overrides {
        amqp_url: Some(b.amqp_url()),
        management_url: Some(b.mgmt.to_string()),
        vhost: Some(b.vhost.clone()),
        ..Default::default()
    };
    let target = config::resolve(&Config::default(), &overrides, &|_| None)?;
    let session = Session::open(target).await?;
    let stream = session.target.archive.stream.clone();
    let ch = conn.create_channel().await?;
    let _ = ch
        .queue_delete(stream.as_str().into(), Default::default())
        .await;
    let _ = ch.close(200, "ok".into()).await;
    session
        .create_archive()
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let spec = ReplaySpec {
        queue: "dlq".into(),
        selection: Selection::All,
        limit: None,
        rate: None,
        to: None,
        allow_fan_out: false,
        keep_attempts: false,
        clear_expiry: false,
        window: session.target.settings.replay.window,
        consent: ReadConsent::Reuse,
        run_id: None,
    };
    let t = Instant::now();
    let id = store.begin_operation(
        warren::store::Operation::Archive,
        &AuditStart {
            run_id: warren::broker::audit::new_run_id(jiff::Timestamp::now()),
            at: jiff::Timestamp::now(),
            os_user: warren::store::current_os_user(),
            broker_user: session.whoami.name.clone(),
            context: session.target.context.clone(),
            vhost: b.vhost.clone(),
            from_queue: "dlq".into(),
            targets: vec![stream.clone()],
            filter: None,
            group: None,
            requested_limit: None,
            dry_run: false,
            keep_attempts: false,
            clear_expiry: false,
        },
    )?;
    let work = Work {
        action: Action::Archive {
            stream: stream.clone(),
            stamp: warren::domain::archive::Stamp {
                from: "dlq".into(),
                by: "bench@guest".into(),
                reason: "benchmark".into(),
            },
        },
        limit: u64::from(n),
        allowed_targets: [(String::new(), stream.clone())].into_iter().collect(),
        redirects: Default::default(),
        replays: Default::default(),
        ages: Default::default(),
    };
    let (_tx, rx) = tokio::sync::watch::channel(false);
    let summary = session.run_job(&spec, work, rx, |_| {}).await?;
    store.finish_replay(
        id,
        &AuditOutcome {
            at: jiff::Timestamp::now(),
            moved: summary.progress.moved,
            returned: summary.progress.returned,
            failed: summary.progress.failed,
            remaining: summary.progress.remaining,
            message_ids: summary.counts.moved_ids.clone(),
            duplicated: summary.counts.duplicated,
            duplicate_ids: summary.counts.duplicate_ids.clone(),
            outcome: "completed".into(),
        },
    )?;
    let took = t.elapsed();
    if summary.progress.moved != u64::from(n) {
        bail!(
            "warren archived {} of {n}: {:?}",
            summary.progress.moved,
            summary.stop
        );
    }
    Ok(took)
}

async fn shovel_round(b: &Bench, conn: &Connection, round: usize, n: u32) -> Result<Duration> {
    let name = format!("Move from dlq {round}");
    let uri = format!("amqp:///{}", enc(&b.vhost));
    let body = serde_json::json!({
        "component": "shovel",
        "vhost": b.vhost,
        "name": name,
        "value": {
            "src-protocol": "amqp091",
            "src-uri": uri,
            "src-queue": "dlq",
            "src-prefetch-count": 1000,
            "src-delete-after": "queue-length",
            "dest-protocol": "amqp091",
            "dest-uri": uri,
            "dest-queue": "work",
            "dest-add-forward-headers": false,
            "ack-mode": "on-confirm",
        }
    });
    let t = Instant::now();
    b.api(
        reqwest::Method::PUT,
        &format!("/api/parameters/shovel/{}/{}", enc(&b.vhost), enc(&name)),
        Some(body),
    )
    .await?;
    loop {
        if depth(conn, "work").await? >= n && depth(conn, "dlq").await? == 0 {
            break;
        }
        if t.elapsed() > Duration::from_secs(300) {
            bail!("shovel did not finish in 5 minutes");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let took = t.elapsed();
    // With src-delete-after the shovel removes itself; make sure before the next round.
    let _ = b
        .api(
            reqwest::Method::DELETE,
            &format!("/api/parameters/shovel/{}/{}", enc(&b.vhost), enc(&name)),
            None,
        )
        .await;
    Ok(took)
}

/// One publish of the plain pipelined mover, with its DLQ tag.
type RawPublish = std::pin::Pin<
    Box<dyn std::future::Future<Output = (u64, lapin::Result<lapin::Confirmation>)> + Send>,
>;

/// The naive tool: basic.get, publish, wait for the confirm, ack — one message at a time.
async fn naive_round(conn: &Connection, n: u32) -> Result<Duration> {
    let ch = conn.create_channel().await?;
    ch.confirm_select(ConfirmSelectOptions::default()).await?;
    let t = Instant::now();
    let mut moved = 0;
    while moved < n {
        let Some(m) = ch
            .basic_get("dlq".into(), BasicGetOptions::default())
            .await?
        else {
            break;
        };
        let d = m.delivery;
        ch.basic_publish(
            "".into(),
            "work".into(),
            BasicPublishOptions {
                mandatory: true,
                ..Default::default()
            },
            &d.data,
            d.properties.clone(),
        )
        .await?
        .await?;
        ch.basic_ack(d.delivery_tag, BasicAckOptions::default())
            .await?;
        moved += 1;
    }
    let took = t.elapsed();
    let _ = ch.close(200, "done".into()).await;
    if moved != n {
        bail!("naive loop moved {moved} of {n}");
    }
    Ok(took)
}

/// A minimal pipelined mover with plain lapin (no planning, no header rewrite): consume with a
/// prefetch of 1000, publish each delivery as it comes, ack (multiple) in order as confirms
/// arrive. The ceiling for an AMQP client on this broker.
async fn raw_round(
    consume_conn: &Connection,
    publish_conn: &Connection,
    n: u32,
) -> Result<Duration> {
    use futures_util::StreamExt;
    use futures_util::stream::FuturesOrdered;
    let cch = consume_conn.create_channel().await?;
    cch.basic_qos(1000, lapin::options::BasicQosOptions::default())
        .await?;
    let pch = publish_conn.create_channel().await?;
    pch.confirm_select(ConfirmSelectOptions::default()).await?;
    let t = Instant::now();
    let mut consumer = cch
        .basic_consume(
            "dlq".into(),
            "raw".into(),
            lapin::options::BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await?;
    let mut inflight = FuturesOrdered::new();
    let mut received = 0u32;
    let mut done = 0u32;
    let mut last_ready = 0u64;
    let mut last_acked = 0u64;
    while done < n {
        tokio::select! {
            biased;
            Some((tag, r)) = inflight.next(), if !inflight.is_empty() => {
                let r: lapin::Result<lapin::Confirmation> = r;
                if !r?.is_ack() { bail!("nack"); }
                last_ready = tag;
                done += 1;
                if last_ready - last_acked >= 256 || inflight.is_empty() {
                    cch.basic_ack(last_ready, BasicAckOptions { multiple: true }).await?;
                    last_acked = last_ready;
                }
            }
            d = consumer.next(), if received < n => {
                let Some(d) = d else { bail!("consumer ended") };
                let d = d?;
                received += 1;
                let ch = pch.clone();
                let tag = d.delivery_tag;
                let mut fut: RawPublish = Box::pin(async move {
                    let r = match ch.basic_publish("".into(), "work".into(), BasicPublishOptions { mandatory: true, ..Default::default() }, &d.data, d.properties.clone()).await {
                        Ok(c) => c.await,
                        Err(e) => Err(e),
                    };
                    (tag, r)
                });
                // A publish that completes on its first poll is not polled again.
                match futures_util::poll!(fut.as_mut()) {
                    std::task::Poll::Ready(done) => {
                        inflight.push_back(Box::pin(futures_util::future::ready(done)) as RawPublish)
                    }
                    std::task::Poll::Pending => inflight.push_back(fut),
                }
            }
        }
    }
    if last_acked < last_ready {
        cch.basic_ack(last_ready, BasicAckOptions { multiple: true })
            .await?;
    }
    let took = t.elapsed();
    let _ = cch.close(200, "done".into()).await;
    let _ = pch.close(200, "done".into()).await;
    Ok(took)
}

fn rate(n: u32, d: Duration) -> f64 {
    f64::from(n) / d.as_secs_f64()
}

#[tokio::main]
async fn main() -> Result<()> {
    let n: u32 = env_or("BENCH_N", "20000").parse()?;
    let rounds: usize = env_or("BENCH_ROUNDS", "3").parse()?;
    let naive_n: u32 = env_or("BENCH_NAIVE_N", "5000").parse()?;
    let mgmt = url::Url::parse(&env_or("BENCH_MGMT", "http://guest:guest@127.0.0.1:15672"))?;
    let user = percent_encoding::percent_decode_str(mgmt.username())
        .decode_utf8_lossy()
        .into_owned();
    let pass = percent_encoding::percent_decode_str(mgmt.password().unwrap_or("guest"))
        .decode_utf8_lossy()
        .into_owned();
    let b = Bench {
        amqp: env_or("BENCH_AMQP", "amqp://guest:guest@127.0.0.1:5672"),
        vhost: format!("warren-bench-{}", std::process::id()),
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()?,
        mgmt,
        user: if user.is_empty() {
            "guest".into()
        } else {
            user
        },
        pass,
    };
    b.api(
        reqwest::Method::PUT,
        &format!("/api/vhosts/{}", enc(&b.vhost)),
        Some(serde_json::json!({})),
    )
    .await?;
    b.api(
        reqwest::Method::PUT,
        &format!("/api/permissions/{}/{}", enc(&b.vhost), enc(&b.user)),
        Some(serde_json::json!({"configure": ".*", "write": ".*", "read": ".*"})),
    )
    .await?;
    let result = run(&b, n, rounds, naive_n).await;
    let _ = b
        .api(
            reqwest::Method::DELETE,
            &format!("/api/vhosts/{}", enc(&b.vhost)),
            None,
        )
        .await;
    result
}

async fn run(b: &Bench, n: u32, rounds: usize, naive_n: u32) -> Result<()> {
    let conn = b.connect().await?;
    let ch = conn.create_channel().await?;
    for q in ["dlq", "work"] {
        ch.queue_declare(
            q.into(),
            QueueDeclareOptions {
                durable: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await?;
    }
    let store_path = std::env::temp_dir().join(format!("warren-bench-{}.db", std::process::id()));
    let store = Store::open(&store_path)?;
    let overview: serde_json::Value = b
        .http
        .get(format!("{}api/overview", {
            let mut u = b.mgmt.clone();
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u
        }))
        .basic_auth(&b.user, Some(&b.pass))
        .send()
        .await?
        .json()
        .await?;
    println!(
        "RabbitMQ {} — {n} dead letters × {BODY} B, {rounds} rounds alternating\n",
        overview["rabbitmq_version"].as_str().unwrap_or("?")
    );
    println!(
        "{:<7} {:<34} {:>10} {:>12}",
        "round", "method", "seconds", "msgs/s"
    );
    let mut warren_rates = Vec::new();
    let mut warren_e2e = Vec::new();
    let mut shovel_rates = Vec::new();
    let mut raw_rates = Vec::new();
    let mut archive_rates = Vec::new();
    // Archive / replay of the same round (run back to back, so both see the same load).
    let mut archive_vs_replay: Vec<f64> = Vec::new();
    for round in 1..=rounds {
        purge(&conn).await?;
        fill(&conn, n).await?;
        let w = warren_round(b, &store, n).await?;
        let r = rate(n, w.replay);
        println!(
            "{round:<7} {:<34} {:>10.3} {:>12.0}",
            "warren replay (engine + audit)",
            w.replay.as_secs_f64(),
            r
        );
        let e2e = rate(n, w.preview + w.replay);
        println!(
            "{round:<7} {:<34} {:>10.3} {:>12.0}   (preview {:.3} s)",
            "warren incl. preview",
            (w.preview + w.replay).as_secs_f64(),
            e2e,
            w.preview.as_secs_f64()
        );
        warren_rates.push(r);
        warren_e2e.push(e2e);

        purge(&conn).await?;
        fill(&conn, n).await?;
        let a = archive_round(b, &conn, &store, n).await?;
        let r = rate(n, a);
        println!(
            "{round:<7} {:<34} {:>10.3} {:>12.0}",
            "warren archive (engine + audit)",
            a.as_secs_f64(),
            r
        );
        archive_rates.push(r);
        archive_vs_replay.push(r / warren_rates.last().copied().unwrap_or(r));

        purge(&conn).await?;
        fill(&conn, n).await?;
        let s = shovel_round(b, &conn, round, n).await?;
        let r = rate(n, s);
        println!(
            "{round:<7} {:<34} {:>10.3} {:>12.0}",
            "shovel (UI \"Move messages\")",
            s.as_secs_f64(),
            r
        );
        shovel_rates.push(r);

        purge(&conn).await?;
        fill(&conn, n).await?;
        let pconn = b.connect().await?;
        let t = raw_round(&conn, &pconn, n).await?;
        let _ = pconn.close(200, "done".into()).await;
        println!(
            "{round:<7} {:<34} {:>10.3} {:>12.0}",
            "plain lapin, pipelined (no rewrite)",
            t.as_secs_f64(),
            rate(n, t)
        );
        raw_rates.push(rate(n, t));
    }
    purge(&conn).await?;
    fill(&conn, naive_n).await?;
    let t = naive_round(&conn, naive_n).await?;
    let naive = rate(naive_n, t);
    println!(
        "{:<7} {:<34} {:>10.3} {:>12.0}   ({naive_n} messages)",
        "1",
        "one-at-a-time get/publish/ack",
        t.as_secs_f64(),
        naive
    );
    purge(&conn).await?;

    let median = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    let (w, we, s) = (
        median(&mut warren_rates),
        median(&mut warren_e2e),
        median(&mut shovel_rates),
    );
    println!(
        "\nmedian msgs/s: warren {w:.0} (incl. preview {we:.0}), shovel {s:.0}, one-at-a-time {naive:.0}"
    );
    println!(
        "warren / shovel = {:.2}× (goal ≥ 1.25×); incl. preview {:.2}×; warren / one-at-a-time = {:.1}×",
        w / s,
        we / s,
        w / naive
    );
    let spread = |v: &[f64]| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(0.0, f64::max);
        (lo, hi)
    };
    let (rlo, rhi) = spread(&warren_rates);
    let (alo, ahi) = spread(&archive_rates);
    let (qlo, qhi) = spread(&archive_vs_replay);
    let a = median(&mut archive_rates);
    let q = median(&mut archive_vs_replay);
    println!(
        "archive: median {a:.0} msgs/s ({alo:.0}–{ahi:.0}); replay {w:.0} ({rlo:.0}–{rhi:.0}); archive / replay per round: median {q:.2}× ({qlo:.2}–{qhi:.2}×; goal ≥ 0.90×)"
    );
    drop(store);
    let _ = std::fs::remove_file(&store_path);
    let _ = conn.close(200, "bench done".into()).await;
    Ok(())
}
