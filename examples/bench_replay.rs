//! Replay throughput: Warren's whole replay (session, plan, header rewrite, confirms, batched
//! acks, audit) against the management UI's "Move messages" (a dynamic shovel with the UI's
//! settings) on the same broker, in alternating rounds, two ways: as the machine is (client and
//! broker share every core) and pinned (`taskset`: the broker's beam process on one core, this
//! process on the other — closer to a broker on a machine of its own). Figures are printed, not
//! asserted. And `--million`: the `warren` binary replays 1,000,000 messages and its peak
//! resident memory (VmHWM) is printed.
//!
//! ```sh
//! cargo run --release --example bench_replay                # 20,000 × 1 KiB, 3 rounds, both ways
//! cargo run --release --example bench_replay -- --short     # 5,000, 3 rounds: a quick look
//! cargo build --release && cargo run --release --example bench_replay -- --million
//! ```
//!
//! Options: `--short`, `--shared` / `--pinned` (one way only), `--raw` (also a bare pipelined
//! lapin mover), `--naive` (also the one-at-a-time get/publish/ack loop), `--million [N]`,
//! `--warren-only` (no shovel: to run under a profiler), `--archive` (also archive the same
//! messages after each replay round: archive against replay), `--cli` (also `warren replay` as
//! a process after each Warren round: the operator's whole path, both audits written; needs
//! `cargo build --release` for the binary; with `--raw`, the bare mover runs as a process too,
//! spawn to exit, as the like-for-like yardstick for it).
//! Env: `BENCH_AMQP` (default `amqp://guest:guest@127.0.0.1:5672`), `BENCH_MGMT` (default
//! `http://guest:guest@127.0.0.1:15672`), `BENCH_N` (20000), `BENCH_ROUNDS` (3), `BENCH_BODY`
//! (bytes per message, 1024), `BENCH_NAIVE_N` (5000), `BENCH_WARREN` (the binary for
//! `--million` and `--cli`; default `target/release/warren` beside this example), `BENCH_AUDIT=1` (with
//! `--million`: the run writes the broker's audit stream too), `BENCH_PERSISTENT=0` (transient
//! messages: the rounds without the broker's disk writes, the largest source of their spread),
//! `WARREN_LOG_DIR` (with `--cli`: where
//! the `warren` child logs; `WARREN_LOG=warren=debug` adds each step's time before and after the
//! move).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use lapin::options::{
    BasicAckOptions, BasicGetOptions, BasicPublishOptions, ConfirmSelectOptions,
    QueueDeclareOptions, QueuePurgeOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{BasicProperties, Connection};
use warren::broker::session::{ReadConsent, ReplaySpec, Session};
use warren::config::{self, Config, Overrides};
use warren::domain::selection::Selection;
use warren::store::{AuditOutcome, AuditStart, Store};

#[path = "support/dead_letter.rs"]
mod dead_letter;

/// The run's outcome in the local audit, its moved ids read from the run's spool.
fn record_outcome(store: &Store, id: i64, summary: &warren::broker::replay::Summary) -> Result<()> {
    let out = AuditOutcome {
        canary: None,
        edits: Vec::new(),
        targets: Vec::new(),
        at: jiff::Timestamp::now(),
        moved: summary.progress.moved,
        returned: summary.progress.returned,
        failed: summary.progress.failed,
        remaining: summary.progress.remaining,
        message_ids: Vec::new(),
        duplicated: summary.counts.duplicated,
        duplicate_ids: summary.counts.duplicate_ids.clone(),
        outcome: warren::domain::outcome::RunOutcome::Completed,
    };
    let mut unread = None;
    store.finish_replay_with(id, &out, |put| {
        unread = summary.moved_ids.for_each(put).err();
    })?;
    match unread {
        Some(why) => bail!("moved ids not recorded: {why}"),
        None => Ok(()),
    }
}

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

    /// The `warren` binary's arguments for this broker and vhost, before its command.
    fn warren_args(&self) -> Vec<String> {
        vec![
            "--amqp-url".into(),
            self.amqp_url(),
            "--management-url".into(),
            self.mgmt.to_string(),
            "--vhost".into(),
            self.vhost.clone(),
        ]
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

/// `n` dead letters of `body_size` bytes with a broker-style death record (rejected in `work`), pipelined.
async fn fill(conn: &Connection, n: u32, body_size: usize, persistent: bool) -> Result<()> {
    let ch = conn.create_channel().await?;
    ch.confirm_select(ConfirmSelectOptions::default()).await?;
    let mut pending = Vec::with_capacity(1000);
    for i in 0..n {
        let h = dead_letter::headers();
        let props = BasicProperties::default()
            .with_message_id(format!("bench-{i}").into())
            .with_content_type("application/json".into())
            .with_delivery_mode(if persistent { 2 } else { 1 })
            .with_headers(h);
        let body: Vec<u8> = (0..body_size)
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

/// One Warren replay as a user runs it, timed whole: the session (management overview, cluster
/// check), the plan, the audit record, the run and the audit's outcome.
struct WarrenRun {
    whole: Duration,
    preview: Duration,
    examined: u64,
    /// CPU this process spent (user + system), seconds.
    cpu: f64,
    /// The replay alone (`Session::replay`, no session, plan or audit).
    run: Duration,
    /// Opening the session, and recording the outcome (the moved ids) in the local audit.
    session: Duration,
    outcome: Duration,
    /// The broker's CPU (seconds) before the replay (session, plan, audit record) and during it.
    broker_setup: f64,
    broker_run: f64,
}

async fn warren_round(
    b: &Bench,
    store: &Store,
    n: u32,
    broker_cpu: &dyn Fn() -> f64,
) -> Result<WarrenRun> {
    let cpu0 = cpu_seconds("self");
    let broker0 = broker_cpu();
    let t0 = Instant::now();
    let overrides = Overrides {
        amqp_url: Some(b.amqp_url()),
        management_url: Some(b.mgmt.to_string()),
        vhost: Some(b.vhost.clone()),
        ..Default::default()
    };
    let target = config::resolve(&Config::default(), &overrides, &|_| None)?;
    let session = Session::open(target).await?;
    let session_time = t0.elapsed();
    let spec = ReplaySpec {
        queue: "dlq".into(),
        selection: Selection::All,
        limit: None,
        rate: None,
        to: None,
        allow_fan_out: false,
        keep_attempts: false,
        clear_expiry: false,
        strip_failure_stamp: false,
        window: session.handle.target.settings.replay.window,
        consent: ReadConsent::Reuse,
        run_id: None,
        max_backlog: None,
        edits: None,
        protocol: Default::default(),
    };
    let tp = Instant::now();
    let preview = session
        .preview_to_run(&spec, |_| Default::default())
        .await?;
    if !preview.refusals.is_empty() {
        bail!("refused: {:?}", preview.refusals);
    }
    let preview_time = tp.elapsed();
    let id = store.begin_replay(&AuditStart {
        run_id: warren::broker::audit::new_run_id(jiff::Timestamp::now()),
        at: jiff::Timestamp::now(),
        os_user: warren::store::current_os_user(),
        broker_user: session.handle.whoami.name.clone(),
        context: session.handle.target.context.clone(),
        vhost: b.vhost.clone(),
        from_queue: "dlq".into(),
        targets: preview.targets.keys().cloned().collect(),
        filter: None,
        group: None,
        requested_limit: None,
        dry_run: false,
        keep_attempts: false,
        clear_expiry: false,
        strip_failure_stamp: false,
    })?;
    let (_tx, rx) = tokio::sync::watch::channel(false);
    let mut events = 0u64;
    let (broker1, t_run) = (broker_cpu(), Instant::now());
    let summary = session
        .replay(&spec, &preview, HashMap::new(), rx, |_| events += 1)
        .await?;
    let (broker2, run) = (broker_cpu(), t_run.elapsed());
    let t_outcome = Instant::now();
    record_outcome(store, id, &summary)?;
    let outcome = t_outcome.elapsed();
    let whole = t0.elapsed();
    if summary.progress.moved != u64::from(n) {
        bail!(
            "warren moved {} of {n}: {:?}",
            summary.progress.moved,
            summary.stop
        );
    }
    Ok(WarrenRun {
        whole,
        preview: preview_time,
        examined: preview.examined,
        cpu: cpu_seconds("self") - cpu0,
        run,
        session: session_time,
        outcome,
        broker_setup: broker1 - broker0,
        broker_run: broker2 - broker1,
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
    let stream = session.handle.target.archive.stream.clone();
    let ch = conn.create_channel().await?;
    let _ = ch
        .queue_delete(stream.as_str().into(), Default::default())
        .await;
    let _ = ch.close(200, "ok".into()).await;
    session
        .handle
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
        strip_failure_stamp: false,
        window: session.handle.target.settings.replay.window,
        consent: ReadConsent::Reuse,
        run_id: None,
        max_backlog: None,
        edits: None,
        protocol: Default::default(),
    };
    let t = Instant::now();
    let id = store.begin_operation(
        warren::store::Operation::Archive,
        &AuditStart {
            run_id: warren::broker::audit::new_run_id(jiff::Timestamp::now()),
            at: jiff::Timestamp::now(),
            os_user: warren::store::current_os_user(),
            broker_user: session.handle.whoami.name.clone(),
            context: session.handle.target.context.clone(),
            vhost: b.vhost.clone(),
            from_queue: "dlq".into(),
            targets: vec![stream.clone()],
            filter: None,
            group: None,
            requested_limit: None,
            dry_run: false,
            keep_attempts: false,
            clear_expiry: false,
            strip_failure_stamp: false,
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
            user_id: session.handle.target.credentials.username.clone(),
        },
        limit: u64::from(n),
        allowed_targets: [(String::new(), stream.clone())].into_iter().collect(),
        redirects: Default::default(),
        endpoint_redirects: Default::default(),
        replays: Default::default(),
        first_seen: Default::default(),
        planned_unread: false,
        check_as_met: false,
        bytes: 0,
        rest_queues: Vec::new(),
        carrier: Default::default(),
        carrier_by_head: false,
    };
    let (_tx, rx) = tokio::sync::watch::channel(false);
    let summary = session.run_job(&spec, work, rx, |_| {}).await?;
    record_outcome(store, id, &summary)?;
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

/// The bare mover as a process of its own (`BENCH_RAW_CHILD`, started by [`raw_process_round`]):
/// it starts, opens its two connections side by side, moves, closes — what `warren replay` as a
/// process pays around its own move, without anything Warren does besides.
async fn raw_child() -> Result<()> {
    let var = |k: &str| std::env::var(k).with_context(|| format!("{k} not set"));
    let (url, vhost, user, pass) = (
        var("BENCH_RAW_URL")?,
        var("BENCH_RAW_VHOST")?,
        var("BENCH_RAW_USER")?,
        var("BENCH_RAW_PASS")?,
    );
    let n: u32 = var("BENCH_RAW_CHILD")?.parse()?;
    let connect =
        || warren::broker::amqp::connect(std::slice::from_ref(&url), &vhost, &user, &pass, None);
    let (c, p) = tokio::join!(connect(), connect());
    let (c, p) = (c?, p?);
    raw_round(&c, &p, n).await?;
    let _ = tokio::join!(c.close(200, "done".into()), p.close(200, "done".into()));
    Ok(())
}

/// `--cli` with `--raw`: [`raw_child`] timed from spawn to exit, as [`cli_round`] times `warren
/// replay`; its CPU.
async fn raw_process_round(b: &Bench, n: u32) -> Result<(Duration, f64)> {
    let c0 = children_cpu();
    let t = Instant::now();
    let out = tokio::process::Command::new(std::env::current_exe()?)
        .env("BENCH_RAW_CHILD", n.to_string())
        .env("BENCH_RAW_URL", b.amqp_url())
        .env("BENCH_RAW_VHOST", &b.vhost)
        .env("BENCH_RAW_USER", &b.user)
        .env("BENCH_RAW_PASS", &b.pass)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .context("starting the bare mover")?;
    let took = t.elapsed();
    if !out.status.success() {
        bail!(
            "the bare mover failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    all_moved(b, n, "the bare mover", "").await?;
    Ok((took, children_cpu() - c0))
}

/// One round's line: its time and rate for `n` messages, and CPU µs a message (client, broker).
fn print_row(round: usize, way: Way, mover: &str, (t, n): (Duration, u32), cli: f64, brk: f64) {
    println!(
        "{round:<6} {:<34} {mover:<36} {:>8.3} {:>9.0} {cli:>9.1} {brk:>9.1}",
        way.label(),
        t.as_secs_f64(),
        rate(n, t),
    );
}

fn rate(n: u32, d: Duration) -> f64 {
    f64::from(n) / d.as_secs_f64()
}

/// Waits (up to 10 s) until the broker has used under a quarter of a core for 250 ms: the
/// persistent fill and the last run's clean-up (its message store's compaction, its disk
/// writes) are over, so no run is charged with the one before it. It did not narrow the spread
/// measured with persistent fills (the broker's CPU per message 65–107 µs between runs of one
/// mover, with it); transient fills (`BENCH_PERSISTENT=0`) did.
async fn quiet(broker_cpu: &dyn Fn() -> f64) {
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        let c0 = broker_cpu();
        tokio::time::sleep(Duration::from_millis(250)).await;
        if broker_cpu() - c0 < 0.0625 {
            return;
        }
    }
}

/// User + system CPU of a process (`"self"` or a PID), in seconds, from `/proc/PID/stat`.
fn cpu_seconds(pid: &str) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // The command name is in parentheses and may hold spaces: count fields after it.
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    (ticks(11) + ticks(12)) / 100.0
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| {
            let v: Vec<&str> = l.split_whitespace().take(3).collect();
            format!("load {}", v.join(" "))
        })
        .unwrap_or_else(|_| "load ?".into())
}

/// The PID of the process listening on `port` (the broker's beam.smp), from `ss`.
fn listener_pid(port: u16) -> Result<u32> {
    let out = std::process::Command::new("ss")
        .args(["-ltnpH", &format!("sport = :{port}")])
        .output()
        .context("running ss to find the broker's process")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let pid = text
        .split("pid=")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|p| p.parse().ok());
    pid.with_context(|| {
        format!("no process found listening on port {port} (ss needs root to show it)")
    })
}

fn affinity(pid: u32) -> Result<String> {
    let out = std::process::Command::new("taskset")
        .args(["-p", &pid.to_string()])
        .output()
        .context("running taskset")?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.rsplit(':')
        .next()
        .map(|m| m.trim().to_string())
        .filter(|m| !m.is_empty())
        .with_context(|| format!("taskset -p {pid} said: {text}"))
}

/// Sets the CPU mask of every thread of `pid` (`taskset -a -p MASK PID`).
fn set_affinity(pid: u32, mask: &str) -> Result<()> {
    let st = std::process::Command::new("taskset")
        .args(["-a", "-p", mask, &pid.to_string()])
        .stdout(std::process::Stdio::null())
        .status()
        .context("running taskset")?;
    if !st.success() {
        bail!("taskset -a -p {mask} {pid} failed");
    }
    Ok(())
}

/// The broker on CPU 0 and this process on CPU 1 while pinned; every thread's mask as it was
/// otherwise, and always when this is dropped (the brokers are shared).
struct Pinning {
    broker: u32,
    broker_mask: String,
    own_mask: String,
    pinned: bool,
}

impl Pinning {
    fn new(amqp_port: u16) -> Result<Pinning> {
        let broker = listener_pid(amqp_port)?;
        Ok(Pinning {
            broker,
            broker_mask: affinity(broker)?,
            own_mask: affinity(std::process::id())?,
            pinned: false,
        })
    }

    fn pin(&mut self) -> Result<()> {
        self.pinned = true;
        set_affinity(self.broker, "1")?;
        set_affinity(std::process::id(), "2")
    }

    fn unpin(&mut self) {
        if std::mem::take(&mut self.pinned) {
            let _ = set_affinity(self.broker, &self.broker_mask);
            let _ = set_affinity(std::process::id(), &self.own_mask);
        }
    }
}

impl Drop for Pinning {
    fn drop(&mut self) {
        self.unpin();
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Way {
    Shared,
    Pinned,
}

impl Way {
    fn label(self) -> &'static str {
        match self {
            Way::Shared => "shared cores",
            Way::Pinned => "pinned (broker cpu0, warren cpu1)",
        }
    }
}

struct Opts {
    n: u32,
    rounds: usize,
    body: usize,
    ways: Vec<Way>,
    raw: bool,
    naive: Option<u32>,
    million: Option<u32>,
    /// `--warren-only`: no shovel rounds (for a profiler).
    warren_only: bool,
    /// `--archive`: also archive (`warren archive`) after each replay round.
    archive: bool,
    /// `--cli`: also run `warren replay` as a process after each replay round ([`cli_round`]).
    cli: bool,
    /// `BENCH_PERSISTENT=0`: transient messages, no disk in the broker's path.
    persistent: bool,
}

fn opts() -> Result<Opts> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let has = |a: &str| args.iter().any(|x| x == a);
    let short = has("--short");
    let mut ways = Vec::new();
    if !has("--pinned") || has("--shared") {
        ways.push(Way::Shared);
    }
    if !has("--shared") || has("--pinned") {
        ways.push(Way::Pinned);
    }
    let million = args.iter().position(|a| a == "--million").map(|i| {
        args.get(i + 1)
            .and_then(|v| v.parse().ok())
            .unwrap_or(1_000_000)
    });
    Ok(Opts {
        n: env_or("BENCH_N", if short { "5000" } else { "20000" }).parse()?,
        rounds: env_or("BENCH_ROUNDS", "3").parse()?,
        body: env_or("BENCH_BODY", "1024").parse()?,
        ways,
        raw: has("--raw"),
        naive: has("--naive")
            .then(|| env_or("BENCH_NAIVE_N", "5000").parse())
            .transpose()?,
        million,
        warren_only: has("--warren-only"),
        archive: has("--archive"),
        cli: has("--cli"),
        persistent: env_or("BENCH_PERSISTENT", "1") != "0",
    })
}

fn main() -> Result<()> {
    // As the binary runs (`cli::main`).
    warren::tune_allocator();
    if std::env::var_os("BENCH_RAW_CHILD").is_some() {
        return tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?
            .block_on(raw_child());
    }
    // As the CLI runs it (`cli::main`): a multi-threaded runtime; `BENCH_RUNTIME=current` runs
    // the replay on one thread with the reactor instead.
    let runtime = match env_or("BENCH_RUNTIME", "multi").as_str() {
        "current" => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?,
        _ => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?,
    };
    runtime.block_on(bench())
}

async fn bench() -> Result<()> {
    let o = opts()?;
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
    let result = match o.million {
        Some(m) => million(&b, m, o.body).await,
        None => run(&b, &o).await,
    };
    let _ = b
        .api(
            reqwest::Method::DELETE,
            &format!("/api/vhosts/{}", enc(&b.vhost)),
            None,
        )
        .await;
    result
}

/// `dlq`, fed by `work`'s dead-lettering (so discovery knows where its messages come from, as
/// on a real broker), and `work`.
async fn declare(conn: &Connection) -> Result<()> {
    let ch = conn.create_channel().await?;
    ch.queue_declare(
        "dlq".into(),
        QueueDeclareOptions {
            durable: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await?;
    let mut args = FieldTable::default();
    args.insert(
        "x-dead-letter-exchange".into(),
        AMQPValue::LongString(LongString::from("")),
    );
    args.insert(
        "x-dead-letter-routing-key".into(),
        AMQPValue::LongString(LongString::from("dlq")),
    );
    ch.queue_declare(
        "work".into(),
        QueueDeclareOptions {
            durable: true,
            ..Default::default()
        },
        args,
    )
    .await?;
    let _ = ch.close(200, "declared".into()).await;
    Ok(())
}

async fn version(b: &Bench) -> Result<String> {
    let mut u = b.mgmt.clone();
    let _ = u.set_username("");
    let _ = u.set_password(None);
    let overview: serde_json::Value = b
        .http
        .get(format!("{u}api/overview"))
        .basic_auth(&b.user, Some(&b.pass))
        .send()
        .await?
        .json()
        .await?;
    Ok(overview["rabbitmq_version"]
        .as_str()
        .unwrap_or("?")
        .to_string())
}

fn amqp_port(b: &Bench) -> u16 {
    url::Url::parse(&b.amqp)
        .ok()
        .and_then(|u| u.port())
        .unwrap_or(5672)
}

/// Median, and the spread (max − min) as a share of the median.
fn stats(v: &[f64]) -> (f64, f64, f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let med = s.get(s.len() / 2).copied().unwrap_or(0.0);
    let (lo, hi) = (
        s.first().copied().unwrap_or(0.0),
        s.last().copied().unwrap_or(0.0),
    );
    (med, lo, hi, if med > 0.0 { (hi - lo) / med } else { 0.0 })
}

/// `a[i] / b[i]` for each round: "median× (min–max×)".
fn ratio_line(a: &[f64], b: &[f64]) -> String {
    let r: Vec<f64> = a
        .iter()
        .zip(b)
        .filter(|(_, y)| **y > 0.0)
        .map(|(x, y)| x / y)
        .collect();
    let (m, lo, hi, _) = stats(&r);
    format!("{m:.2}× ({lo:.2}–{hi:.2}×)")
}

#[derive(Default)]
struct Figures {
    warren: Vec<f64>,
    shovel: Vec<f64>,
    raw: Vec<f64>,
    /// Per moved message, µs of CPU: this process during Warren's run, the broker during
    /// Warren's and during the shovel's.
    warren_cpu: Vec<f64>,
    broker_cpu_warren: Vec<f64>,
    broker_cpu_shovel: Vec<f64>,
    /// `--raw`: the broker's CPU per message under the plain lapin mover.
    broker_cpu_raw: Vec<f64>,
    /// Warren's replay alone (no session, plan or audit): rate, and the broker's CPU per message.
    warren_run: Vec<f64>,
    broker_cpu_warren_run: Vec<f64>,
    /// `--archive`: the same engine archiving, right after each replay round, and its rate
    /// over that round's replay rate.
    archive: Vec<f64>,
    archive_vs_replay: Vec<f64>,
    /// `--cli`: the `warren` process's rate, its CPU and the broker's per message.
    cli: Vec<f64>,
    cli_cpu: Vec<f64>,
    broker_cpu_cli: Vec<f64>,
    /// `--cli --raw`: the bare mover as a process ([`raw_process_round`]): rate, broker CPU.
    raw_process: Vec<f64>,
    broker_cpu_raw_process: Vec<f64>,
}

async fn run(b: &Bench, o: &Opts) -> Result<()> {
    let n = o.n;
    let conn = b.connect().await?;
    declare(&conn).await?;
    let store_path = std::env::temp_dir().join(format!("warren-bench-{}.db", std::process::id()));
    let store = Store::open(&store_path)?;
    let cli_dir = std::env::temp_dir().join(format!("warren-bench-cli-{}", std::process::id()));
    std::fs::create_dir_all(&cli_dir)?;
    let broker_pid = listener_pid(amqp_port(b)).ok();
    let mut pinning = if o.ways.contains(&Way::Pinned) {
        Some(Pinning::new(amqp_port(b))?)
    } else {
        None
    };
    let broker_cpu = || broker_pid.map_or(0.0, |p| cpu_seconds(&p.to_string()));
    println!(
        "RabbitMQ {} — {n} {} dead letters × {} B, {} rounds alternating; {}",
        version(b).await?,
        if o.persistent {
            "persistent"
        } else {
            "transient"
        },
        o.body,
        o.rounds,
        load()
    );
    println!(
        "{:<6} {:<34} {:<36} {:>8} {:>9} {:>9} {:>9}",
        "round", "way", "mover", "seconds", "msgs/s", "cli µs/m", "brk µs/m"
    );
    let mut figs: HashMap<&'static str, Figures> = HashMap::new();
    for round in 1..=o.rounds {
        for &way in &o.ways {
            match (way, pinning.as_mut()) {
                (Way::Pinned, Some(p)) => p.pin()?,
                (_, Some(p)) => p.unpin(),
                _ => {}
            }
            let f = figs.entry(way.label()).or_default();
            // Alternate who goes first, so both see the same drift in the machine's load.
            let order: [bool; 2] = if round % 2 == 1 {
                [true, false]
            } else {
                [false, true]
            };
            if o.raw && round % 2 == 0 {
                raw_rounds(b, &conn, o, round, way, f, &broker_cpu).await?;
            }
            for warren_turn in order {
                if o.warren_only && !warren_turn {
                    continue;
                }
                purge(&conn).await?;
                fill(&conn, n, o.body, o.persistent).await?;
                quiet(&broker_cpu).await;
                let c0 = broker_cpu();
                if warren_turn {
                    let w = warren_round(b, &store, n, &broker_cpu).await?;
                    let brk = (broker_cpu() - c0) * 1e6 / f64::from(n);
                    let cli = w.cpu * 1e6 / f64::from(n);
                    println!(
                        "{round:<6} {:<34} {:<36} {:>8.3} {:>9.0} {:>9.1} {:>9.1}   (plan {:.3} s, {} read first; the replay alone {:.3} s = {:.0} msg/s, broker {:.1} µs/m; before it {:.1} µs/m; session {:.3} s, outcome {:.3} s)",
                        way.label(),
                        "warren replay (whole, audit on)",
                        w.whole.as_secs_f64(),
                        rate(n, w.whole),
                        cli,
                        brk,
                        w.preview.as_secs_f64(),
                        w.examined,
                        w.run.as_secs_f64(),
                        rate(n, w.run),
                        w.broker_run * 1e6 / f64::from(n),
                        w.broker_setup * 1e6 / f64::from(n),
                        w.session.as_secs_f64(),
                        w.outcome.as_secs_f64()
                    );
                    f.warren_run.push(rate(n, w.run));
                    f.broker_cpu_warren_run
                        .push(w.broker_run * 1e6 / f64::from(n));
                    f.warren.push(rate(n, w.whole));
                    f.warren_cpu.push(cli);
                    f.broker_cpu_warren.push(brk);
                    if o.cli {
                        purge(&conn).await?;
                        fill(&conn, n, o.body, o.persistent).await?;
                        quiet(&broker_cpu).await;
                        let c0 = broker_cpu();
                        let (t, cpu) = cli_round(b, &cli_dir, n).await?;
                        let brk = (broker_cpu() - c0) * 1e6 / f64::from(n);
                        let cli = cpu * 1e6 / f64::from(n);
                        print_row(
                            round,
                            way,
                            "warren replay (the CLI, both audits)",
                            (t, n),
                            cli,
                            brk,
                        );
                        f.cli.push(rate(n, t));
                        f.cli_cpu.push(cli);
                        f.broker_cpu_cli.push(brk);
                    }
                    if o.archive {
                        purge(&conn).await?;
                        fill(&conn, n, o.body, o.persistent).await?;
                        quiet(&broker_cpu).await;
                        let a = archive_round(b, &conn, &store, n).await?;
                        println!(
                            "{round:<6} {:<34} {:<36} {:>8.3} {:>9.0}",
                            way.label(),
                            "warren archive (engine + audit)",
                            a.as_secs_f64(),
                            rate(n, a)
                        );
                        f.archive.push(rate(n, a));
                        f.archive_vs_replay.push(rate(n, a) / rate(n, w.whole));
                    }
                } else {
                    let s = shovel_round(b, &conn, round, n).await?;
                    let brk = (broker_cpu() - c0) * 1e6 / f64::from(n);
                    println!(
                        "{round:<6} {:<34} {:<36} {:>8.3} {:>9.0} {:>9} {:>9.1}",
                        way.label(),
                        "shovel (UI \"Move messages\")",
                        s.as_secs_f64(),
                        rate(n, s),
                        "-",
                        brk
                    );
                    f.shovel.push(rate(n, s));
                    f.broker_cpu_shovel.push(brk);
                }
            }
            // The bare movers go last in odd rounds and first in even ones: the figures are
            // compared round by round, and neither side always follows the other's backlog.
            if o.raw && round % 2 == 1 {
                raw_rounds(b, &conn, o, round, way, f, &broker_cpu).await?;
            }
        }
    }
    if let Some(p) = pinning.as_mut() {
        p.unpin();
    }
    if let Some(naive_n) = o.naive {
        purge(&conn).await?;
        fill(&conn, naive_n, o.body, o.persistent).await?;
        let t = naive_round(&conn, naive_n).await?;
        println!(
            "{:<6} {:<34} {:<36} {:>8.3} {:>9.0}   ({naive_n} messages)",
            "1",
            Way::Shared.label(),
            "one-at-a-time get/publish/ack",
            t.as_secs_f64(),
            rate(naive_n, t)
        );
    }
    purge(&conn).await?;

    println!("\nmedians (min–max, spread); {}", load());
    for &way in &o.ways {
        let Some(f) = figs.get(way.label()) else {
            continue;
        };
        let (w, wl, wh, ws) = stats(&f.warren);
        let (s, sl, sh, ss) = stats(&f.shovel);
        println!(
            "  {:<34} warren {w:.0} msg/s ({wl:.0}–{wh:.0}, {:.0}%), shovel {s:.0} msg/s ({sl:.0}–{sh:.0}, {:.0}%)",
            way.label(),
            ws * 100.0,
            ss * 100.0
        );
        if !f.raw.is_empty() {
            let (r, rl, rh, _) = stats(&f.raw);
            let (wr, wrl, wrh, _) = stats(&f.warren_run);
            println!(
                "  {:<34} plain lapin {r:.0} msg/s ({rl:.0}–{rh:.0}); warren / plain lapin = {:.2}×; broker CPU per message under plain lapin {:.1} µs",
                "",
                w / r,
                stats(&f.broker_cpu_raw).0
            );
            println!(
                "  {:<34} warren's replay alone {wr:.0} msg/s ({wrl:.0}–{wrh:.0}), {:.2}× plain lapin; broker {:.1} µs per message during it",
                "",
                wr / r,
                stats(&f.broker_cpu_warren_run).0
            );
            if !f.cli.is_empty() {
                let (c, cl, ch, _) = stats(&f.cli);
                println!(
                    "  {:<34} `warren replay` (the CLI, both audits) {c:.0} msg/s ({cl:.0}–{ch:.0}), {:.2}× plain lapin; its CPU {:.1} µs, the broker's {:.1} µs per message",
                    "",
                    c / r,
                    stats(&f.cli_cpu).0,
                    stats(&f.broker_cpu_cli).0
                );
            }
            // Round by round: each ratio is of two runs minutes apart, not of two medians
            // taken across a drifting machine.
            println!(
                "  {:<34} per round (median, min–max): warren whole / plain lapin {}; replay alone / plain lapin {}",
                "",
                ratio_line(&f.warren, &f.raw),
                ratio_line(&f.warren_run, &f.raw)
            );
            if !f.raw_process.is_empty() && !f.cli.is_empty() {
                println!(
                    "  {:<34} per round (median, min–max): `warren replay` / plain lapin as a process {}; broker CPU per message, warren's over the process's {}",
                    "",
                    ratio_line(&f.cli, &f.raw_process),
                    ratio_line(&f.broker_cpu_cli, &f.broker_cpu_raw_process)
                );
                let (rp, rpl, rph, _) = stats(&f.raw_process);
                println!(
                    "  {:<34} plain lapin as a process {rp:.0} msg/s ({rpl:.0}–{rph:.0}); `warren replay` / it = {:.2}×; broker {:.1} µs per message under it",
                    "",
                    stats(&f.cli).0 / rp,
                    stats(&f.broker_cpu_raw_process).0
                );
            }
        }
        println!(
            "  {:<34} CPU per message: warren {:.1} µs; broker {:.1} µs under warren, {:.1} µs under the shovel",
            "",
            stats(&f.warren_cpu).0,
            stats(&f.broker_cpu_warren).0,
            stats(&f.broker_cpu_shovel).0
        );
        if !f.archive.is_empty() {
            let (a, al, ah, _) = stats(&f.archive);
            let (r, rl, rh, _) = stats(&f.archive_vs_replay);
            println!(
                "  {:<34} archive {a:.0} msg/s ({al:.0}–{ah:.0}); archive / replay per round {r:.2}× ({rl:.2}–{rh:.2}; goal within 10%)",
                ""
            );
        }
        let goal = if way == Way::Pinned { 1.5 } else { 1.25 };
        println!(
            "  {:<34} warren / shovel = {:.2}× (goal ≥ {goal}×)",
            "",
            w / s
        );
    }
    drop(store);
    let _ = std::fs::remove_file(&store_path);
    let _ = std::fs::remove_dir_all(&cli_dir);
    let _ = conn.close(200, "bench done".into()).await;
    Ok(())
}

/// `--raw`: the bare mover in this process, and with `--cli` as a process of its own, each on a
/// fresh fill; their figures go into `f` beside Warren's of the same round.
async fn raw_rounds(
    b: &Bench,
    conn: &Connection,
    o: &Opts,
    round: usize,
    way: Way,
    f: &mut Figures,
    broker_cpu: &dyn Fn() -> f64,
) -> Result<()> {
    let n = o.n;
    purge(conn).await?;
    fill(conn, n, o.body, o.persistent).await?;
    quiet(broker_cpu).await;
    let pconn = b.connect().await?;
    let cpu0 = cpu_seconds("self");
    let c0 = broker_cpu();
    let t = raw_round(conn, &pconn, n).await?;
    let brk = (broker_cpu() - c0) * 1e6 / f64::from(n);
    let cli = (cpu_seconds("self") - cpu0) * 1e6 / f64::from(n);
    let _ = pconn.close(200, "done".into()).await;
    print_row(
        round,
        way,
        "plain lapin, pipelined (no rewrite)",
        (t, n),
        cli,
        brk,
    );
    f.raw.push(rate(n, t));
    f.broker_cpu_raw.push(brk);
    if o.cli {
        purge(conn).await?;
        fill(conn, n, o.body, o.persistent).await?;
        quiet(broker_cpu).await;
        let c0 = broker_cpu();
        let (t, cpu) = raw_process_round(b, n).await?;
        let brk = (broker_cpu() - c0) * 1e6 / f64::from(n);
        print_row(
            round,
            way,
            "plain lapin as a process (spawn→exit)",
            (t, n),
            cpu * 1e6 / f64::from(n),
            brk,
        );
        f.raw_process.push(rate(n, t));
        f.broker_cpu_raw_process.push(brk);
    }
    Ok(())
}

/// Peak resident memory of the `warren` binary replaying `n` messages: fills the DLQ (confirms
/// in batches, transient messages to spare the disk), runs `warren replay dlq --yes` as a child,
/// and prints its VmHWM (polled from /proc while it runs, and the kernel's figure for the
/// finished child).
/// The `warren` binary beside this bench's directory (`target/release/warren`), or `BENCH_WARREN`.
fn warren_bin() -> Result<std::path::PathBuf> {
    let bin = match std::env::var_os("BENCH_WARREN") {
        Some(p) => std::path::PathBuf::from(p),
        None => std::env::current_exe()?
            .parent()
            .and_then(|p| p.parent())
            .map(|p| p.join("warren"))
            .context("where is the warren binary? set BENCH_WARREN")?,
    };
    if !bin.exists() {
        bail!(
            "{} not found: `cargo build --release` first (or set BENCH_WARREN)",
            bin.display()
        );
    }
    Ok(bin)
}

/// `--cli`: `warren replay dlq --yes` as the operator runs it — a process of its own, its
/// store (kept across rounds, as an operator's is), the broker's audit stream written at the
/// start and with every moved id at the end. Timed from spawn to exit; its CPU and the broker's.
async fn cli_round(b: &Bench, dir: &std::path::Path, n: u32) -> Result<(Duration, f64)> {
    let bin = warren_bin()?;
    let c0 = children_cpu();
    let t = Instant::now();
    let out = tokio::process::Command::new(&bin)
        .args(b.warren_args())
        .args(["--create-audit-stream", "replay", "dlq", "--yes"])
        .env("WARREN_STORE", dir.join("warren.db"))
        // A log directory given to the bench is the child's too (its step timings at
        // `WARREN_LOG=warren=debug`); the rounds' scratch one otherwise.
        .env(
            "WARREN_LOG_DIR",
            std::env::var_os("WARREN_LOG_DIR").unwrap_or_else(|| dir.as_os_str().to_owned()),
        )
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .context("starting warren")?;
    let took = t.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!("warren replay failed ({}): {err}", out.status);
    }
    if err.contains("not written") || err.contains("NOT COMPLETE") {
        bail!("warren replay's audit was not all written: {err}");
    }
    all_moved(b, n, "warren replay", &err).await?;
    Ok((took, children_cpu() - c0))
}

/// Fails unless `work` holds all `n` messages that `who` moved (`said`: what it printed).
async fn all_moved(b: &Bench, n: u32, who: &str, said: &str) -> Result<()> {
    let conn = b.connect().await?;
    let moved = depth(&conn, "work").await?;
    let _ = conn.close(200, "counted".into()).await;
    if moved != n {
        bail!("{who} moved {moved} of {n}: {said}");
    }
    Ok(())
}

/// CPU seconds of this process's children that have been waited for.
fn children_cpu() -> f64 {
    // SAFETY: getrusage only writes into the struct it is given.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru);
        ru
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(ru.ru_utime) + secs(ru.ru_stime)
}

async fn million(b: &Bench, n: u32, body: usize) -> Result<()> {
    let bin = warren_bin()?;
    let conn = b.connect().await?;
    declare(&conn).await?;
    println!(
        "RabbitMQ {} — {n} dead letters × {body} B through {}; {}",
        version(b).await?,
        bin.display(),
        load()
    );
    let t = Instant::now();
    fill(&conn, n, body, false).await?;
    println!(
        "filled in {:.1} s ({:.0} msg/s)",
        t.elapsed().as_secs_f64(),
        rate(n, t.elapsed())
    );
    let dir = std::env::temp_dir().join(format!("warren-bench-million-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    // `BENCH_AUDIT=1`: the run writes the broker's audit stream too (created for it), so its
    // outcome — every moved id — is part of what is measured.
    let audit = std::env::var("BENCH_AUDIT").is_ok_and(|v| v == "1");
    let mut args = b.warren_args();
    args.extend(["replay".to_string(), "dlq".to_string(), "--yes".to_string()]);
    if audit {
        args.push("--create-audit-stream".to_string());
        println!("with the broker audit stream");
    }
    let t = Instant::now();
    let mut child = std::process::Command::new(&bin)
        .args(&args)
        .env("WARREN_STORE", dir.join("warren.db"))
        .env("WARREN_LOG_DIR", &dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        // A file, not a pipe: progress lines would fill a pipe nobody reads until the end.
        .stderr(std::fs::File::create(dir.join("stderr.txt"))?)
        .spawn()
        .context("starting warren")?;
    let pid = child.id();
    let mut hwm_seen = 0u64;
    let status = loop {
        if let Some(kib) = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmHWM:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|v| v.parse::<u64>().ok())
            })
        {
            hwm_seen = hwm_seen.max(kib);
        }
        if let Some(st) = child.try_wait()? {
            break st;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let took = t.elapsed();
    let err = std::fs::read_to_string(dir.join("stderr.txt")).unwrap_or_default();
    // SAFETY: getrusage only writes into the struct it is given.
    let maxrss_kib = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru);
        ru.ru_maxrss
    };
    let moved = depth(&conn, "work").await?;
    let left = depth(&conn, "dlq").await?;
    let last = err
        .rsplit(['\r', '\n'])
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_string();
    println!(
        "warren replay: exit {}, {:.1} s ({:.0} msg/s), moved {moved}, left in the DLQ {left}: {last}",
        status.code().unwrap_or(-1),
        took.as_secs_f64(),
        rate(moved, took)
    );
    println!(
        "peak resident memory (VmHWM): {:.1} MiB (kernel's maxrss of the child {:.1} MiB; goal < 100 MiB); {}",
        hwm_seen as f64 / 1024.0,
        maxrss_kib as f64 / 1024.0,
        load()
    );
    if audit {
        // What another machine reads: `warren audit --json` with a store of its own, so only
        // the broker's record of the run is seen, its moved ids joined from the stream.
        let t = Instant::now();
        let out = std::process::Command::new(&bin)
            .args(b.warren_args())
            .args(["audit", "--json"])
            .env("WARREN_STORE", dir.join("other.db"))
            .env("WARREN_LOG_DIR", &dir)
            .stdin(std::process::Stdio::null())
            .output()
            .context("warren audit")?;
        let text = String::from_utf8_lossy(&out.stdout);
        let ids = text
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["kind"] == "replay" && v["seen"]["broker"] == true)
            .map(|v| v["message_ids"].as_array().map_or(0, Vec::len))
            .sum::<usize>();
        println!(
            "warren audit on another store read the run back from the stream in {:.1} s: {ids} moved ids{}",
            t.elapsed().as_secs_f64(),
            if err.contains("audit record was not written") {
                " — the run said its broker record was NOT written"
            } else {
                ""
            }
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !stderr.trim().is_empty() {
            println!("warren audit said: {}", stderr.trim());
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    purge(&conn).await?;
    let _ = conn.close(200, "bench done".into()).await;
    if moved != n || !status.success() {
        bail!("the replay did not move every message:\n{err}");
    }
    Ok(())
}
