//! AMQP 1.0 with fe2o3-amqp: the bare pipelined mover, with the same guarantee as the 0.9.1
//! one. A message is accepted on the source only after the broker settled its copy on the
//! target with `accepted`; the source's acceptances go out in order, in batches (one
//! disposition per consecutive range), every 256 or when nothing is in flight; the source's
//! link credit keeps at most `window` deliveries unsettled, as a 0.9.1 prefetch does.

use anyhow::{Context, Result, bail};
use fe2o3_amqp::link::delivery::DeliveryInfo;
use fe2o3_amqp::link::receiver::CreditMode;
use fe2o3_amqp::session::SessionHandle;
use fe2o3_amqp::types::messaging::{
    ApplicationProperties, Batch, Body, Data, Header, Message, MessageAnnotations, Outcome,
    Properties,
};
use fe2o3_amqp::types::primitives::{Binary, OrderedMap, Symbol, Timestamp, Value};
use fe2o3_amqp::{Connection, Receiver, Sender, Session};
use futures_util::StreamExt;
use futures_util::stream::FuturesOrdered;
use std::time::{Duration, Instant};

/// One connection with one session, to `vhost` (RabbitMQ takes the vhost from the open
/// frame's hostname, `vhost:NAME`).
pub struct Link {
    conn: fe2o3_amqp::connection::ConnectionHandle<()>,
    pub session: SessionHandle<()>,
}

impl Link {
    pub async fn open(url: &str, vhost: &str, name: &str) -> Result<Link> {
        let hostname = format!("vhost:{vhost}");
        let mut conn = Connection::builder()
            .container_id(name)
            .hostname(hostname.as_str())
            .open(url)
            .await
            .with_context(|| format!("AMQP 1.0 connection to {url}"))?;
        let session = Session::begin(&mut conn).await?;
        Ok(Link { conn, session })
    }

    pub async fn close(mut self) {
        let _ = self.session.end().await;
        let _ = self.conn.close().await;
    }
}

/// The source's acceptances and credit: unsettled deliveries stay within `window`.
struct Source {
    receiver: Receiver,
    window: u32,
    received: u32,
    accepted: u32,
    ready: Vec<DeliveryInfo>,
}

impl Source {
    /// Accepts every delivery whose copy is confirmed, and tops the credit up to the window.
    async fn accept_ready(&mut self) -> Result<()> {
        let k = self.ready.len() as u32;
        self.receiver.accept_all(self.ready.drain(..)).await?;
        self.accepted += k;
        let unsettled = self.received - self.accepted;
        self.receiver.set_credit(self.window - unsettled).await?;
        Ok(())
    }
}

/// Moves `n` messages from `/queues/dlq` (on `src`) to `/queues/work` (on `dst`), each as it
/// came (header, annotations, properties, application properties, body, footer; not the
/// delivery annotations, which belong to one delivery).
pub async fn mover(
    src: &mut SessionHandle<()>,
    dst: &mut SessionHandle<()>,
    n: u32,
    window: u32,
) -> Result<Duration> {
    let receiver = Receiver::builder()
        .name("bench-mover-source")
        .source("/queues/dlq")
        .credit_mode(CreditMode::Manual)
        .attach(src)
        .await?;
    let mut sender = Sender::attach(dst, "bench-mover-target", "/queues/work").await?;
    let mut s = Source {
        receiver,
        window,
        received: 0,
        accepted: 0,
        ready: Vec::with_capacity(256),
    };
    let t = Instant::now();
    s.receiver.set_credit(window).await?;
    let mut inflight = FuturesOrdered::new();
    let mut done = 0u32;
    while done < n {
        tokio::select! {
            biased;
            Some((info, outcome)) = inflight.next(), if !inflight.is_empty() => {
                match outcome {
                    Ok(Outcome::Accepted(_)) => {}
                    other => bail!("the target did not accept a message: {other:?}"),
                }
                s.ready.push(info);
                done += 1;
                if s.ready.len() >= 256 || inflight.is_empty() {
                    s.accept_ready().await?;
                }
            }
            d = s.receiver.recv::<Body<Value>>(), if s.received < n => {
                let (info, mut message) = d?.into_parts();
                s.received += 1;
                message.delivery_annotations = None;
                let confirm = sender.send_batchable(message).await?;
                inflight.push_back(async move { (info, confirm.await) });
            }
        }
    }
    if !s.ready.is_empty() {
        s.accept_ready().await?;
    }
    let took = t.elapsed();
    let _ = sender.close().await;
    let _ = s.receiver.close().await;
    Ok(took)
}

/// The message `amqp091::fill` makes, as the broker hands it to an AMQP 1.0 consumer (header
/// durable, the `x-` headers as message annotations, `tenant` as an application property, the
/// body as one data section), published over AMQP 1.0 so the broker stores it natively.
fn dead_letter(i: u32, body_size: usize) -> Message<Body<Value>> {
    let death: OrderedMap<Value, Value> = [
        ("count", Value::Long(1)),
        ("exchange", Value::String(String::new())),
        ("queue", Value::String("work".into())),
        ("reason", Value::String("rejected".into())),
        (
            "routing-keys",
            Value::List(vec![Value::String("work".into())]),
        ),
        (
            "time",
            Value::Timestamp(Timestamp::from_milliseconds(1_700_000_000_000)),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (Value::Symbol(Symbol::from(k)), v))
    .collect();
    let annotations = MessageAnnotations::builder()
        .insert("x-death", Value::List(vec![Value::Map(death)]))
        .insert("x-first-death-exchange", Value::String(String::new()))
        .insert("x-first-death-queue", Value::String("work".into()))
        .insert("x-first-death-reason", Value::String("rejected".into()))
        .build();
    let body: Vec<u8> = (0..body_size)
        .map(|j| b'a' + ((i as usize + j) % 26) as u8)
        .collect();
    Message::builder()
        .header(Header::builder().durable(true).build())
        .message_annotations(annotations)
        .properties(
            Properties::builder()
                .message_id(format!("bench-{i}"))
                .content_type("application/json")
                .build(),
        )
        .application_properties(
            ApplicationProperties::builder()
                .insert("tenant", "acme")
                .build(),
        )
        .body(Body::Data(Batch::new(vec![Data(Binary::from(body))])))
        .build()
}

/// `BENCH_FILL=10`: the dead letters published over AMQP 1.0 into `/queues/dlq`, pipelined,
/// each accepted by the broker.
pub async fn fill(link: &mut Link, n: u32, body_size: usize) -> Result<()> {
    let mut sender = Sender::attach(&mut link.session, "bench-fill", "/queues/dlq").await?;
    let mut pending = Vec::with_capacity(1000);
    for i in 0..n {
        pending.push(sender.send_batchable(dead_letter(i, body_size)).await?);
        if pending.len() >= 1000 || i + 1 == n {
            for c in pending.drain(..) {
                match c.await {
                    Ok(Outcome::Accepted(_)) => {}
                    other => bail!("the broker did not accept a fill message: {other:?}"),
                }
            }
        }
    }
    let _ = sender.close().await;
    Ok(())
}
