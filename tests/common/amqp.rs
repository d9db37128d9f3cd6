//! AMQP helpers for tests against real brokers: connect to a test vhost, declare queues of each
//! type, publish with typed headers and confirms, dead-letter messages for real (the broker
//! writes `x-death`), build a retry ladder, and read a queue back for assertions.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicGetOptions, BasicNackOptions, BasicPublishOptions,
    BasicQosOptions, BasicRejectOptions, ConfirmSelectOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use lapin::{BasicProperties, Channel, Confirmation, Connection};
use warren::broker::amqp::{dead_letter_from_delivery, properties_to_amqp};
use warren::domain::features::{BrokerVersion, QueueType};
use warren::domain::message::{DeadLetter, Properties};
use warren::domain::value::{HeaderValue, Table};

use super::TestVhost;

/// A connection to the test vhost through Warren's own connect.
pub async fn connect(vhost: &TestVhost) -> Connection {
    warren::broker::amqp::connect(&[vhost.amqp_url()], &vhost.name, "guest", "guest", None)
        .await
        .unwrap_or_else(|e| panic!("connect to RabbitMQ {}: {e}", vhost.broker.label))
}

/// The broker's version from the management API.
pub async fn broker_version(vhost: &TestVhost) -> BrokerVersion {
    let v = vhost.get_json("/api/overview").await;
    let s = v
        .get("rabbitmq_version")
        .and_then(|s| s.as_str())
        .unwrap_or_default();
    BrokerVersion::parse(s).unwrap_or_else(|| panic!("unparsable broker version {s:?}"))
}

/// A channel with publisher confirms on.
pub async fn confirm_channel(conn: &Connection) -> Channel {
    let ch = conn.create_channel().await.expect("channel");
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .expect("confirm_select");
    ch
}

fn key(s: &str) -> ShortString {
    ShortString::try_new(s).expect("short name")
}

fn long(s: &str) -> AMQPValue {
    AMQPValue::LongString(LongString::from(s))
}

/// Declares a durable queue of `kind` with extra arguments.
pub async fn declare(ch: &Channel, name: &str, kind: QueueType, mut args: FieldTable) {
    args.insert("x-queue-type".into(), long(kind.as_str()));
    ch.queue_declare(
        key(name),
        QueueDeclareOptions {
            durable: true,
            ..QueueDeclareOptions::default()
        },
        args,
    )
    .await
    .unwrap_or_else(|e| panic!("declare {kind} queue {name}: {e}"));
}

/// Arguments that dead-letter into `dlq` through the default exchange.
pub fn dead_letter_to(dlq: &str) -> FieldTable {
    let mut args = FieldTable::default();
    args.insert("x-dead-letter-exchange".into(), long(""));
    args.insert("x-dead-letter-routing-key".into(), long(dlq));
    args
}

/// Publishes through the default exchange and waits for the broker's confirm.
pub async fn publish(ch: &Channel, queue: &str, props: &Properties, headers: &Table, body: &[u8]) {
    let props = properties_to_amqp(props, headers).expect("publishable properties");
    publish_raw(ch, "", queue, props, body).await;
}

/// Publishes with lapin properties and asserts the message was routed and confirmed.
pub async fn publish_raw(
    ch: &Channel,
    exchange: &str,
    routing_key: &str,
    props: BasicProperties,
    body: &[u8],
) {
    let confirm = ch
        .basic_publish(
            key(exchange),
            key(routing_key),
            BasicPublishOptions {
                mandatory: true,
                ..BasicPublishOptions::default()
            },
            body,
            props,
        )
        .await
        .expect("publish")
        .await
        .expect("confirm");
    match confirm {
        Confirmation::Ack(None) => {}
        other => panic!("publish to {routing_key} not confirmed as routed: {other:?}"),
    }
}

/// Headers holding every AMQP field type the broker accepts, distinct per `i`.
pub fn every_type_headers(i: u32) -> Table {
    let mut nested = Table::new();
    nested.insert("count", HeaderValue::I64(i64::from(i)));
    nested.insert("reason", HeaderValue::string("rejected"));
    let mut h = Table::new();
    h.insert("seq", HeaderValue::I32(i as i32));
    h.insert("t-bool", HeaderValue::Bool(i.is_multiple_of(2)));
    h.insert("t-i8", HeaderValue::I8(-(i as i8 % 100)));
    h.insert("t-u8", HeaderValue::U8((i % 250) as u8));
    h.insert("t-i16", HeaderValue::I16(-1000 - i as i16));
    h.insert("t-u16", HeaderValue::U16(60_000 + i as u16));
    h.insert("t-i32", HeaderValue::I32(-100_000 - i as i32));
    h.insert("t-u32", HeaderValue::U32(3_000_000_000 + i));
    h.insert("t-i64", HeaderValue::I64(-(1_i64 << 40) - i64::from(i)));
    h.insert("t-f32", HeaderValue::F32(1.5 + i as f32));
    h.insert("t-f64", HeaderValue::F64(-2.25e100 * f64::from(i + 1)));
    h.insert(
        "t-decimal",
        HeaderValue::Decimal {
            scale: 2,
            value: 1000 + i,
        },
    );
    h.insert(
        "t-string",
        HeaderValue::LongString(format!("message {i} ✓").into_bytes()),
    );
    h.insert(
        "t-latin1",
        HeaderValue::LongString(vec![b'c', b'a', b'f', 0xe9, i as u8]),
    );
    h.insert(
        "t-timestamp",
        HeaderValue::Timestamp(1_700_000_000 + u64::from(i)),
    );
    h.insert("t-table", HeaderValue::Table(nested.clone()));
    h.insert(
        "t-array",
        HeaderValue::Array(vec![
            HeaderValue::Table(nested),
            HeaderValue::string("x"),
            HeaderValue::I64(7),
        ]),
    );
    h.insert("t-bytes", HeaderValue::Bytes(vec![0, 1, 2, 255, i as u8]));
    h.insert("t-void", HeaderValue::Void);
    h
}

/// A binary body, distinct per `i`, including bytes that are not UTF-8.
pub fn binary_body(i: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|j| ((j as u32).wrapping_mul(31).wrapping_add(i * 7) % 256) as u8)
        .collect()
}

/// Message count as the broker reports it to a passive declare (cheap, no management lag).
pub async fn amqp_depth(conn: &Connection, queue: &str) -> u64 {
    let ch = conn.create_channel().await.expect("channel");
    let q = ch
        .queue_declare(
            key(queue),
            QueueDeclareOptions {
                passive: true,
                ..QueueDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap_or_else(|e| panic!("passive declare {queue}: {e}"));
    let _ = ch.close(200, "ok".into()).await;
    u64::from(q.message_count())
}

/// Waits until `queue` holds `n` ready messages.
pub async fn wait_for_depth(conn: &Connection, queue: &str, n: u64, timeout: Duration) {
    super::wait::until_ok(&format!("{n} messages in {queue}"), timeout, || async {
        let d = amqp_depth(conn, queue).await;
        if d == n {
            Ok(())
        } else {
            Err(format!("{queue} holds {d} messages"))
        }
    })
    .await
}

/// Dead-letters `n` messages into `dlq` for real: declares `work_queue` (classic) dead-lettering
/// to `dlq` through the default exchange, publishes `n` messages (header `seq` = i, body
/// `message-i`), consumes them and rejects each with requeue=false, so the broker writes
/// `x-death` (reason `rejected`). `dlq` must already exist.
pub async fn dead_letter_by_reject(conn: &Connection, work_queue: &str, dlq: &str, n: u32) {
    let ch = confirm_channel(conn).await;
    declare(&ch, work_queue, QueueType::Classic, dead_letter_to(dlq)).await;
    let before = amqp_depth(conn, dlq).await;
    for i in 0..n {
        let mut h = Table::new();
        h.insert("seq", HeaderValue::I32(i as i32));
        let props = Properties {
            message_id: Some(format!("m-{i}")),
            delivery_mode: Some(2),
            ..Properties::default()
        };
        publish(
            &ch,
            work_queue,
            &props,
            &h,
            format!("message-{i}").as_bytes(),
        )
        .await;
    }
    reject_consumed(conn, work_queue, n, 100).await;
    wait_for_depth(conn, dlq, before + u64::from(n), Duration::from_secs(10)).await;
}

/// Consumes `n` messages of `queue` (`prefetch` at a time) and rejects each without requeue,
/// so a queue with a dead-letter exchange dead-letters them for real.
pub async fn reject_consumed(conn: &Connection, queue: &str, n: u32, prefetch: u16) {
    let consumer_ch = conn.create_channel().await.expect("channel");
    consumer_ch
        .basic_qos(prefetch, BasicQosOptions::default())
        .await
        .expect("qos");
    let mut consumer = consumer_ch
        .basic_consume(
            key(queue),
            key("test-rejector"),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .expect("consume");
    for _ in 0..n {
        let d = tokio::time::timeout(Duration::from_secs(10), consumer.next())
            .await
            .expect("delivery in time")
            .expect("consumer open")
            .expect("delivery");
        d.reject(BasicRejectOptions { requeue: false })
            .await
            .expect("reject");
    }
    let _ = consumer_ch.close(200, "ok".into()).await;
}

/// The `count` of the x-death entry for (queue, reason), 0 when absent.
fn x_death_count(headers: &Table, queue: &str, reason: &str) -> i64 {
    headers
        .get("x-death")
        .and_then(HeaderValue::as_array)
        .into_iter()
        .flatten()
        .filter_map(HeaderValue::as_table)
        .find(|e| e.get_str("queue") == Some(queue) && e.get_str("reason") == Some(reason))
        .and_then(|e| e.get_i64("count"))
        .unwrap_or(0)
}

/// A real retry ladder: `work` (classic) dead-letters rejected messages to `wait`, whose 100 ms
/// TTL dead-letters them back to `work`. A consumer rejects each delivery until it has been
/// attempted `attempts` times, then parks it in `dlq` (publishing a copy with all headers and
/// acking), as frameworks do. With 3 attempts the DLQ message carries
/// `[{count 2, expired, wait}, {count 2, rejected, work}]`. `dlq` must already exist.
pub async fn retry_ladder(
    conn: &Connection,
    work: &str,
    wait: &str,
    dlq: &str,
    attempts: u32,
    n: u32,
) {
    let ch = confirm_channel(conn).await;
    declare(&ch, work, QueueType::Classic, dead_letter_to(wait)).await;
    let mut wait_args = dead_letter_to(work);
    wait_args.insert("x-message-ttl".into(), AMQPValue::LongInt(100));
    declare(&ch, wait, QueueType::Classic, wait_args).await;
    let before = amqp_depth(conn, dlq).await;
    for i in 0..n {
        let mut h = Table::new();
        h.insert("seq", HeaderValue::I32(i as i32));
        let props = Properties {
            message_id: Some(format!("ladder-{i}")),
            ..Properties::default()
        };
        publish(&ch, work, &props, &h, format!("order-{i}").as_bytes()).await;
    }
    let consumer_ch = conn.create_channel().await.expect("channel");
    let mut consumer = consumer_ch
        .basic_consume(
            key(work),
            key("test-ladder"),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .expect("consume");
    let mut parked = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    while parked < n {
        let left = deadline.saturating_duration_since(Instant::now());
        let d = tokio::time::timeout(left, consumer.next())
            .await
            .expect("ladder finished in time")
            .expect("consumer open")
            .expect("delivery");
        let headers = d
            .properties
            .headers()
            .as_ref()
            .map(warren::broker::amqp::table_from_amqp)
            .unwrap_or_default();
        let tried = x_death_count(&headers, work, "rejected") + 1;
        if tried < i64::from(attempts) {
            d.reject(BasicRejectOptions { requeue: false })
                .await
                .expect("reject");
        } else {
            publish_raw(&ch, "", dlq, d.properties.clone(), &d.data).await;
            d.ack(BasicAckOptions::default()).await.expect("ack");
            parked += 1;
        }
    }
    let _ = consumer_ch.close(200, "ok".into()).await;
    wait_for_depth(conn, dlq, before + u64::from(n), Duration::from_secs(10)).await;
}

/// Reads up to `max` messages from the head with `basic.get` (a different path from Warren's
/// browse, so tests do not check browse with itself) and hands them all back with one
/// `basic.nack(multiple, requeue)`. Non-destructive on classic queues and streams-free; on
/// quorum queues it costs a delivery like any read.
pub async fn peek(conn: &Connection, queue: &str, max: usize) -> Vec<DeadLetter> {
    let ch = conn.create_channel().await.expect("channel");
    let mut out = Vec::new();
    let mut last = 0;
    while out.len() < max {
        let got = ch
            .basic_get(key(queue), BasicGetOptions::default())
            .await
            .expect("basic.get");
        let Some(msg) = got else { break };
        last = msg.delivery.delivery_tag;
        out.push(dead_letter_from_delivery(
            queue,
            out.len() as u64,
            msg.delivery,
            usize::MAX,
        ));
    }
    if last > 0 {
        ch.basic_nack(
            last,
            BasicNackOptions {
                multiple: true,
                requeue: true,
            },
        )
        .await
        .expect("nack");
    }
    let _ = ch.close(200, "ok".into()).await;
    out
}

/// The `seq` header of each message, in order.
pub fn seqs(messages: &[DeadLetter]) -> Vec<i64> {
    messages
        .iter()
        .map(|m| m.headers.get_i64("seq").unwrap_or(-1))
        .collect()
}

/// Queue depth from the management API once it reports `expected` (its statistics lag by a
/// few seconds); after 30 s, whatever it reports last, for the caller's assertion to show.
pub async fn mgmt_depth(vhost: &TestVhost, queue: &str, expected: u64) -> Option<u64> {
    let path = format!(
        "/api/queues/{}/{}",
        super::enc(&vhost.name),
        super::enc(queue)
    );
    let depth = super::wait::poll(Duration::from_secs(30), || async {
        let v = vhost.get_json(&path).await;
        let n = v.get("messages").and_then(serde_json::Value::as_u64);
        if n == Some(expected) { Ok(n) } else { Err(n) }
    })
    .await;
    match depth {
        Ok(n) | Err(n) => n,
    }
}

/// `orders` dead-letters into `orders.dlq`, which then holds o-1 … o-`n` (JSON,
/// `{"id": "o-N", "order": "x"}`), each rejected once for real.
pub async fn dead_json_orders(conn: &Connection, n: u32) {
    let ch = confirm_channel(conn).await;
    declare(&ch, "orders.dlq", QueueType::Classic, FieldTable::default()).await;
    declare(
        &ch,
        "orders",
        QueueType::Classic,
        dead_letter_to("orders.dlq"),
    )
    .await;
    for i in 1..=n {
        let props = Properties {
            message_id: Some(format!("o-{i}")),
            content_type: Some("application/json".into()),
            delivery_mode: Some(2),
            ..Properties::default()
        };
        let body = format!(r#"{{"id":"o-{i}","order":"x"}}"#);
        publish(&ch, "orders", &props, &Table::new(), body.as_bytes()).await;
    }
    reject_consumed(conn, "orders", n, 10).await;
    wait_for_depth(conn, "orders.dlq", u64::from(n), Duration::from_secs(10)).await;
}

/// The messages of `stream` from its first: the `expected` ones waited for patiently (a loaded
/// 4.3 took seconds to serve a stream's first chunk, which a 3 s wait read as an empty stream),
/// then any more, up to `most`, until a second's silence. Reading a stream takes nothing away.
pub async fn read_stream_expecting(
    conn: &Connection,
    stream: &str,
    expected: usize,
    most: usize,
) -> Vec<DeadLetter> {
    let ch = conn.create_channel().await.expect("channel");
    ch.basic_qos(1000, BasicQosOptions::default())
        .await
        .expect("qos");
    let mut args = FieldTable::default();
    args.insert(
        "x-stream-offset".into(),
        AMQPValue::LongString(LongString::from("first")),
    );
    let mut consumer = ch
        .basic_consume(
            stream.into(),
            super::unique("test-stream").as_str().into(),
            BasicConsumeOptions::default(),
            args,
        )
        .await
        .expect("consume the stream");
    let mut out = Vec::new();
    while out.len() < most {
        let wait = if out.len() < expected {
            Duration::from_secs(30)
        } else {
            Duration::from_secs(1)
        };
        match tokio::time::timeout(wait, consumer.next()).await {
            Ok(Some(Ok(d))) => {
                let tag = d.delivery_tag;
                out.push(dead_letter_from_delivery(
                    stream,
                    out.len() as u64,
                    d,
                    usize::MAX,
                ));
                // Acks on a stream only grant credit.
                let _ = ch.basic_ack(tag, BasicAckOptions { multiple: true }).await;
            }
            _ => break,
        }
    }
    let _ = ch.close(200, "read".into()).await;
    out
}
