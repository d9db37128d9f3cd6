//! Browse benchmark against a real broker (figures printed, not asserted):
//! fills a classic DLQ with 100,000 × 1 KiB messages in a throwaway vhost, then measures
//! - time to the first 100 messages (goal < 300 ms),
//! - browse throughput over all 100,000 (goal ≥ 2× the management API's get),
//! - the management API's `POST /api/queues/{vh}/{q}/get` of 5,000 at a time (it always returns
//!   the head, so only batch rate is comparable),
//! - peak memory (VmHWM) with 100,000 browsed (goal < 300 MiB).
//!
//! Run: `cargo run --release --example bench_browse`. Broker: 127.0.0.1:5672 / 15672 unless
//! WARREN_BENCH_AMQP_PORT / WARREN_BENCH_MGMT_PORT say otherwise; guest/guest.

use std::time::{Duration, Instant};

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Confirmation};
use warren::broker::amqp::connect;
use warren::broker::browse::{BrowseRequest, browse};
use warren::domain::features::QueueType;
use warren::domain::quorum::BrowsePolicy;

const MESSAGES: usize = 100_000;
const BODY: usize = 1024;
const MGMT_BATCH: usize = 5_000;
const MGMT_ROUNDS: usize = 3;

fn port(var: &str, default: u16) -> u16 {
    std::env::var(var)
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(default)
}

fn vm_hwm_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

fn enc(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let amqp_port = port("WARREN_BENCH_AMQP_PORT", 5672);
    let mgmt = format!("http://127.0.0.1:{}", port("WARREN_BENCH_MGMT_PORT", 15672));
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()?;
    let vhost = format!("warren-bench-{}", std::process::id());
    let put = |path: String, body: serde_json::Value| {
        http.put(format!("{mgmt}{path}"))
            .basic_auth("guest", Some("guest"))
            .json(&body)
            .send()
    };
    put(
        format!("/api/vhosts/{}", enc(&vhost)),
        serde_json::json!({}),
    )
    .await?
    .error_for_status()?;
    put(
        format!("/api/permissions/{}/guest", enc(&vhost)),
        serde_json::json!({"configure": ".*", "write": ".*", "read": ".*"}),
    )
    .await?
    .error_for_status()?;
    let overview: serde_json::Value = http
        .get(format!("{mgmt}/api/overview"))
        .basic_auth("guest", Some("guest"))
        .send()
        .await?
        .json()
        .await?;
    let version = overview
        .get("rabbitmq_version")
        .and_then(|v| v.as_str())
        .unwrap_or("?")
        .to_string();

    let result = run(&http, &mgmt, &vhost, amqp_port, &version).await;
    let _ = http
        .delete(format!("{mgmt}/api/vhosts/{}", enc(&vhost)))
        .basic_auth("guest", Some("guest"))
        .send()
        .await;
    result
}

/// What the run measured, printed by [`Figures::print`].
struct Figures {
    first_ms: Vec<String>,
    browse_time: Duration,
    browse_rate: f64,
    hwm: Option<f64>,
    mgmt_time: Duration,
    mgmt_rate: f64,
    depth: u32,
    settled: Duration,
}

async fn run(
    http: &reqwest::Client,
    mgmt: &str,
    vhost: &str,
    amqp_port: u16,
    version: &str,
) -> anyhow::Result<()> {
    let url = format!("amqp://127.0.0.1:{amqp_port}");
    let conn = connect(&[url], vhost, "guest", "guest", None).await?;
    let ch = conn.create_channel().await?;
    ch.confirm_select(ConfirmSelectOptions::default()).await?;
    ch.queue_declare(
        "bench.dlq".into(),
        QueueDeclareOptions {
            durable: true,
            ..QueueDeclareOptions::default()
        },
        FieldTable::default(),
    )
    .await?;

    println!("RabbitMQ {version}: filling bench.dlq with {MESSAGES} × {BODY} B …");
    let fill_time = Instant::now();
    fill(&ch).await?;
    println!("  filled in {:.1} s", fill_time.elapsed().as_secs_f64());

    let first_ms = first_pages(&conn).await?;
    let (browse_time, hwm) = browse_all(&conn).await?;
    let (mgmt_time, mgmt_rate) = management_gets(http, mgmt, vhost).await?;
    let (depth, settled) = settled_depth(&conn).await?;
    Figures {
        first_ms,
        browse_time,
        browse_rate: MESSAGES as f64 / browse_time.as_secs_f64(),
        hwm,
        mgmt_time,
        mgmt_rate,
        depth,
        settled,
    }
    .print();
    Ok(())
}

/// `MESSAGES` persistent messages of `BODY` bytes, in batches of 1,000 each confirmed.
async fn fill(ch: &lapin::Channel) -> anyhow::Result<()> {
    let body = vec![b'x'; BODY];
    for batch in 0..MESSAGES / 1000 {
        let mut confirms = Vec::with_capacity(1000);
        for i in 0..1000 {
            let props = BasicProperties::default()
                .with_message_id(format!("m-{}", batch * 1000 + i).into())
                .with_delivery_mode(2);
            confirms.push(
                ch.basic_publish(
                    "".into(),
                    "bench.dlq".into(),
                    BasicPublishOptions::default(),
                    &body,
                    props,
                )
                .await?,
            );
        }
        for c in confirms {
            if !matches!(c.await?, Confirmation::Ack(None)) {
                anyhow::bail!("publish not confirmed");
            }
        }
    }
    Ok(())
}

/// A browse of the first `limit` messages of the classic queue, with nothing held back.
fn req(limit: usize) -> BrowseRequest {
    BrowseRequest {
        limit,
        ..BrowseRequest::new(
            "bench.dlq",
            QueueType::Classic,
            BrowsePolicy::unrestricted(),
        )
    }
}

/// Time to the first 100, three tries (the first pays for nothing the others do not), in ms.
async fn first_pages(conn: &lapin::Connection) -> anyhow::Result<Vec<String>> {
    let mut firsts = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let page = browse(conn, &req(100)).await?;
        firsts.push(t.elapsed());
        anyhow::ensure!(page.messages.len() == 100, "first page short");
    }
    Ok(firsts
        .iter()
        .map(|d| format!("{:.0}", d.as_secs_f64() * 1000.0))
        .collect())
}

/// A browse of all `MESSAGES`: its time, and the peak memory with them all held.
async fn browse_all(conn: &lapin::Connection) -> anyhow::Result<(Duration, Option<f64>)> {
    let t = Instant::now();
    let page = browse(conn, &req(MESSAGES)).await?;
    let browse_time = t.elapsed();
    anyhow::ensure!(
        page.messages.len() == MESSAGES,
        "browsed {} of {MESSAGES} ({:?})",
        page.messages.len(),
        page.stopped
    );
    let hwm = vm_hwm_mib();
    drop(page);
    Ok((browse_time, hwm))
}

/// The management API's get, `MGMT_ROUNDS` × `MGMT_BATCH` requeued: its time and rate.
async fn management_gets(
    http: &reqwest::Client,
    mgmt: &str,
    vhost: &str,
) -> anyhow::Result<(Duration, f64)> {
    let path = format!("{mgmt}/api/queues/{}/bench.dlq/get", enc(vhost));
    let mut mgmt_time = Duration::ZERO;
    for _ in 0..MGMT_ROUNDS {
        let t = Instant::now();
        let got: serde_json::Value = http
            .post(&path)
            .basic_auth("guest", Some("guest"))
            .json(&serde_json::json!({
                "count": MGMT_BATCH, "ackmode": "ack_requeue_true", "encoding": "auto"
            }))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        mgmt_time += t.elapsed();
        let n = got.as_array().map_or(0, Vec::len);
        anyhow::ensure!(n == MGMT_BATCH, "management get returned {n}");
    }
    let mgmt_rate = (MGMT_BATCH * MGMT_ROUNDS) as f64 / mgmt_time.as_secs_f64();
    Ok((mgmt_time, mgmt_rate))
}

/// The queue's depth once the gets' requeues have landed, and how long that took.
async fn settled_depth(conn: &lapin::Connection) -> anyhow::Result<(u32, Duration)> {
    // The management API's get hands its messages back asynchronously: a depth read at once
    // counted 96,267 of 100,000 on 4.3. Wait (up to 10 s) for it to settle, and say how long.
    let counter = conn.create_channel().await?;
    let settling = Instant::now();
    let depth = loop {
        let depth = counter
            .queue_declare(
                "bench.dlq".into(),
                QueueDeclareOptions {
                    passive: true,
                    ..QueueDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await?
            .message_count();
        if depth as usize == MESSAGES || settling.elapsed() > Duration::from_secs(10) {
            break depth;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    Ok((depth, settling.elapsed()))
}

impl Figures {
    fn print(&self) {
        let Figures {
            ref first_ms,
            browse_time,
            browse_rate,
            hwm,
            mgmt_time,
            mgmt_rate,
            depth,
            settled,
        } = *self;
        println!(
            "  time to first 100 messages: {} ms (goal < 300)",
            first_ms.join(", ")
        );
        println!(
            "  browse {MESSAGES}: {:.2} s = {browse_rate:.0} msg/s",
            browse_time.as_secs_f64()
        );
        println!(
            "  management get {MGMT_ROUNDS} × {MGMT_BATCH} (ack_requeue_true): {:.2} s = {mgmt_rate:.0} msg/s",
            mgmt_time.as_secs_f64()
        );
        println!(
            "  browse / management: {:.1}× (goal ≥ 2×)",
            browse_rate / mgmt_rate
        );
        match hwm {
            Some(m) => {
                println!("  peak memory (VmHWM) with {MESSAGES} browsed: {m:.0} MiB (goal < 300)")
            }
            None => println!("  peak memory: /proc/self/status unavailable"),
        }
        println!(
            "  queue depth afterwards: {depth} (expected {MESSAGES}), settled {:.2} s after the last get",
            settled.as_secs_f64()
        );
    }
}
