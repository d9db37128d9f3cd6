//! The movers Warren is measured against in `bench_replay`: the management UI's "Move messages"
//! (a shovel), the one-at-a-time get/publish/ack loop, and a bare pipelined lapin mover (a module
//! of `examples/bench_replay.rs`).

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use lapin::Connection;
use lapin::options::{BasicAckOptions, BasicGetOptions, BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::FieldTable;

use super::{Bench, depth, enc};

pub(crate) async fn shovel_round(
    b: &Bench,
    conn: &Connection,
    round: usize,
    n: u32,
) -> Result<Duration> {
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
pub(crate) async fn naive_round(conn: &Connection, n: u32) -> Result<Duration> {
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
pub(crate) async fn raw_round(
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
