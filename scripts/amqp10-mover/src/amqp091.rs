//! AMQP 0.9.1 with lapin: the queues, the fill (dead letters as `bench_replay` makes them), and
//! the bare pipelined mover, a copy of `bench_replay`'s `raw_round`.

use anyhow::{Result, bail};
use futures_util::StreamExt;
use futures_util::stream::FuturesOrdered;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, QueueDeclareOptions, QueuePurgeOptions,
};
use lapin::types::{AMQPValue, FieldArray, FieldTable, LongString};
use lapin::{BasicProperties, Connection, ConnectionProperties};
use std::time::{Duration, Instant};

pub async fn connect(uri: &str) -> Result<Connection> {
    Ok(Connection::connect(uri, ConnectionProperties::default()).await?)
}

fn long(s: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(s))
}

/// `dlq`, fed by `work`'s dead-lettering, and `work`: durable classic queues.
pub async fn declare(conn: &Connection) -> Result<()> {
    let ch = conn.create_channel().await?;
    let durable = QueueDeclareOptions {
        durable: true,
        ..Default::default()
    };
    ch.queue_declare("dlq".into(), durable, FieldTable::default())
        .await?;
    let mut args = FieldTable::default();
    args.insert("x-dead-letter-exchange".into(), long(""));
    args.insert("x-dead-letter-routing-key".into(), long("dlq"));
    ch.queue_declare("work".into(), durable, args).await?;
    let _ = ch.close(200, "declared".into()).await;
    Ok(())
}

pub async fn purge(conn: &Connection) -> Result<()> {
    let ch = conn.create_channel().await?;
    for q in ["dlq", "work"] {
        ch.queue_purge(q.into(), QueuePurgeOptions::default())
            .await?;
    }
    let _ = ch.close(200, "purged".into()).await;
    Ok(())
}

/// Messages ready in `queue` (a passive declare).
pub async fn depth(conn: &Connection, queue: &str) -> Result<u32> {
    let ch = conn.create_channel().await?;
    let passive = QueueDeclareOptions {
        passive: true,
        ..Default::default()
    };
    let q = ch
        .queue_declare(queue.into(), passive, FieldTable::default())
        .await?;
    let _ = ch.close(200, "ok".into()).await;
    Ok(q.message_count())
}

/// The headers of a message the broker dead-lettered from `work` (as `bench_replay` fills).
fn dead_letter_headers() -> FieldTable {
    let mut death = FieldTable::default();
    death.insert("count".into(), AMQPValue::LongLongInt(1));
    death.insert("reason".into(), long("rejected"));
    death.insert("queue".into(), long("work"));
    death.insert("exchange".into(), long(""));
    let keys = FieldArray::from(vec![long("work")]);
    death.insert("routing-keys".into(), AMQPValue::FieldArray(keys));
    death.insert("time".into(), AMQPValue::Timestamp(1_700_000_000));
    let mut h = FieldTable::default();
    let deaths = FieldArray::from(vec![AMQPValue::FieldTable(death)]);
    h.insert("x-death".into(), AMQPValue::FieldArray(deaths));
    h.insert("x-first-death-queue".into(), long("work"));
    h.insert("x-first-death-reason".into(), long("rejected"));
    h.insert("x-first-death-exchange".into(), long(""));
    h.insert("tenant".into(), long("acme"));
    h
}

/// `n` persistent dead letters of `body_size` bytes into `dlq`, published over 0.9.1 as an
/// application would have (so both movers start from the same stored messages), pipelined.
pub async fn fill(conn: &Connection, n: u32, body_size: usize) -> Result<()> {
    let ch = conn.create_channel().await?;
    ch.confirm_select(ConfirmSelectOptions::default()).await?;
    let headers = dead_letter_headers();
    let mut pending = Vec::with_capacity(1000);
    for i in 0..n {
        let props = BasicProperties::default()
            .with_message_id(format!("bench-{i}").into())
            .with_content_type("application/json".into())
            .with_delivery_mode(2)
            .with_headers(headers.clone());
        let body: Vec<u8> = (0..body_size)
            .map(|j| b'a' + ((i as usize + j) % 26) as u8)
            .collect();
        let opts = BasicPublishOptions::default();
        pending.push(
            ch.basic_publish("".into(), "dlq".into(), opts, &body, props)
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

/// `BENCH_REWRITE=1`: the headers as Warren's replay publishes them, to see what its rewrite
/// costs the broker: the broker's `x-death`/`x-first-death-*`/`x-last-death-*` stripped, and
/// Warren's four headers added (replayed from, at, count, run id).
fn rewritten(props: &BasicProperties) -> BasicProperties {
    let mut h = FieldTable::default();
    if let Some(old) = props.headers() {
        for (k, v) in old.inner() {
            let name = k.as_str();
            let broker = name == "x-death"
                || name.starts_with("x-first-death-")
                || name.starts_with("x-last-death-");
            if !broker {
                h.insert(k.clone(), v.clone());
            }
        }
    }
    h.insert("warren-replayed-from".into(), long("dlq"));
    h.insert(
        "warren-replayed-at".into(),
        long("2026-12-03T15:00:00.123456789Z"),
    );
    h.insert("warren-replay-count".into(), AMQPValue::LongLongInt(1));
    h.insert(
        "warren-replay-id".into(),
        long("r-20261203T150000Z-0123456789ab"),
    );
    props.clone().with_headers(h)
}

type RawPublish = std::pin::Pin<
    Box<dyn std::future::Future<Output = (u64, lapin::Result<lapin::Confirmation>)> + Send>,
>;

/// The bare pipelined mover (`bench_replay --raw`): consume with a prefetch of `window`,
/// publish each delivery as it comes (mandatory, properties as they came unless `rewrite`),
/// ack (multiple) in order as confirms arrive, every 256 or when nothing is in flight.
pub async fn mover(
    consume: &Connection,
    publish: &Connection,
    n: u32,
    window: u16,
    rewrite: bool,
) -> Result<Duration> {
    let cch = consume.create_channel().await?;
    cch.basic_qos(window, BasicQosOptions::default()).await?;
    let pch = publish.create_channel().await?;
    pch.confirm_select(ConfirmSelectOptions::default()).await?;
    let t = Instant::now();
    let mut consumer = cch
        .basic_consume(
            "dlq".into(),
            "raw".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await?;
    let mut inflight = FuturesOrdered::new();
    let (mut received, mut done) = (0u32, 0u32);
    let (mut last_ready, mut last_acked) = (0u64, 0u64);
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
                let props = if rewrite { rewritten(&d.properties) } else { d.properties.clone() };
                let mut fut: RawPublish = Box::pin(async move {
                    let opts = BasicPublishOptions { mandatory: true, ..Default::default() };
                    let r = match ch.basic_publish("".into(), "work".into(), opts, &d.data, props).await {
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

/// The properties of the first message in `queue` (taken, acked), for `--check`.
pub async fn first_properties(conn: &Connection, queue: &str) -> Result<String> {
    let ch = conn.create_channel().await?;
    let opts = lapin::options::BasicGetOptions { no_ack: true };
    let Some(m) = ch.basic_get(queue.into(), opts).await? else {
        bail!("{queue} is empty");
    };
    let _ = ch.close(200, "ok".into()).await;
    Ok(format!(
        "{:?}\n  body {} bytes",
        m.delivery.properties,
        m.delivery.data.len()
    ))
}

/// `--check --dead-lettered`: one message the broker itself dead-letters into `dlq` (published
/// to `work`, rejected without requeue), so its death history is the broker's own record.
pub async fn dead_letter_one(conn: &Connection) -> Result<()> {
    let ch = conn.create_channel().await?;
    ch.confirm_select(ConfirmSelectOptions::default()).await?;
    let props = BasicProperties::default()
        .with_message_id("dead-1".into())
        .with_delivery_mode(2)
        .with_headers(FieldTable::from(std::collections::BTreeMap::from([(
            "tenant".into(),
            long("acme"),
        )])));
    ch.basic_publish(
        "".into(),
        "work".into(),
        BasicPublishOptions::default(),
        b"x",
        props,
    )
    .await?
    .await?;
    let get = lapin::options::BasicGetOptions { no_ack: false };
    let Some(m) = ch.basic_get("work".into(), get).await? else {
        bail!("work is empty");
    };
    let reject = lapin::options::BasicRejectOptions { requeue: false };
    ch.basic_reject(m.delivery.delivery_tag, reject).await?;
    while depth(conn, "dlq").await? == 0 {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let _ = ch.close(200, "ok".into()).await;
    Ok(())
}
