//! The AMQP moves that make the scenarios happen: declare their topology, publish their
//! messages with confirms, produce their faults (take and reject, hand back until a delivery
//! limit, climb a retry ladder) and wait until every queue holds what it should.

use std::time::{Duration, Instant};

use lapin::message::Delivery;
use lapin::options::{
    BasicGetOptions, BasicPublishOptions, BasicRejectOptions, ConfirmSelectOptions,
    ExchangeBindOptions, ExchangeDeclareOptions, ExchangeUnbindOptions, QueueBindOptions,
    QueueDeclareOptions,
};
use lapin::types::FieldTable;
use lapin::{Channel, Confirmation, Connection};

use super::scenarios::{Binding, Destination, Fault, Ladder, Message, Scenario};
use super::{DemoError, SETTLE_TIMEOUT};
use crate::broker::amqp::{self, passive_depth, properties_to_amqp, short, soft_error_code};
use crate::domain::sanitize;
use crate::domain::value::HeaderValue;

/// Declares every scenario's topology, publishes every message, produces every fault, and
/// waits until all of it has landed.
pub async fn run(conn: &Connection, scenarios: &[Scenario]) -> Result<(), DemoError> {
    let ch = conn
        .create_channel()
        .await
        .map_err(|e| broker_err("open a channel", &e))?;
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .map_err(|e| broker_err("turn on publisher confirms", &e))?;

    for s in scenarios {
        declare(&ch, s).await?;
    }
    // Every message before any consumer work: expiries run on the broker's clock meanwhile.
    for m in scenarios.iter().flat_map(|s| &s.messages) {
        publish(&ch, m).await?;
    }
    for s in scenarios {
        produce(&ch, s.fault, s.messages.len()).await?;
    }

    let expected: Vec<(&str, u64)> = scenarios
        .iter()
        .flat_map(|s| &s.queues)
        .map(|q| (q.name, q.expected))
        .collect();
    settle(&ch, &expected, SETTLE_TIMEOUT).await?;
    let _ = ch.close(200, "demo built".into()).await;
    Ok(())
}

fn broker_err(what: impl Into<String>, e: &lapin::Error) -> DemoError {
    let reason = match soft_error_code(e) {
        Some((code, text)) => format!("{} ({code})", sanitize::one_line(&text, 300)),
        None => e.to_string(),
    };
    DemoError::Broker {
        what: what.into(),
        reason,
    }
}

async fn declare(ch: &Channel, s: &Scenario) -> Result<(), DemoError> {
    for (name, kind) in &s.exchanges {
        ch.exchange_declare(
            short("the exchange name", name)?,
            kind.clone(),
            ExchangeDeclareOptions {
                durable: true,
                ..ExchangeDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .map_err(|e| broker_err(format!("declare exchange '{name}'"), &e))?;
    }
    for q in &s.queues {
        let mut arguments = q.arguments.clone();
        arguments.insert("x-queue-type", HeaderValue::string(q.kind.as_str()));
        ch.queue_declare(
            short("the queue name", q.name)?,
            QueueDeclareOptions {
                durable: true,
                ..QueueDeclareOptions::default()
            },
            amqp::table_to_amqp(&arguments)?,
        )
        .await
        .map_err(|e| broker_err(format!("declare queue '{}'", q.name), &e))?;
    }
    for b in &s.bindings {
        bind(ch, b).await?;
    }
    Ok(())
}

async fn bind(ch: &Channel, b: &Binding) -> Result<(), DemoError> {
    let source = short("the exchange name", b.source)?;
    let key = short("the routing key", b.key)?;
    match b.destination {
        Destination::Queue(queue) => ch
            .queue_bind(
                short("the queue name", queue)?,
                source,
                key,
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(|e| {
                broker_err(
                    format!("bind queue '{queue}' to exchange '{}'", b.source),
                    &e,
                )
            }),
        Destination::Exchange(exchange) => ch
            .exchange_bind(
                short("the exchange name", exchange)?,
                source,
                key,
                ExchangeBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(|e| {
                broker_err(
                    format!("bind exchange '{exchange}' to exchange '{}'", b.source),
                    &e,
                )
            }),
    }
}

async fn unbind(ch: &Channel, b: &Binding) -> Result<(), DemoError> {
    let source = short("the exchange name", b.source)?;
    let key = short("the routing key", b.key)?;
    match b.destination {
        Destination::Queue(queue) => ch
            .queue_unbind(
                short("the queue name", queue)?,
                source,
                key,
                FieldTable::default(),
            )
            .await
            .map_err(|e| {
                broker_err(
                    format!("unbind queue '{queue}' from exchange '{}'", b.source),
                    &e,
                )
            }),
        Destination::Exchange(exchange) => ch
            .exchange_unbind(
                short("the exchange name", exchange)?,
                source,
                key,
                ExchangeUnbindOptions::default(),
                FieldTable::default(),
            )
            .await
            .map_err(|e| {
                broker_err(
                    format!("unbind exchange '{exchange}' from exchange '{}'", b.source),
                    &e,
                )
            }),
    }
}

/// Publishes with `mandatory` and waits for the confirm; an unroutable message is an error.
async fn publish(ch: &Channel, m: &Message) -> Result<(), DemoError> {
    let (exchange, key) = (m.exchange, m.routing_key.as_str());
    let what = || format!("accept a message for exchange '{exchange}', key '{key}'");
    let confirm = ch
        .basic_publish(
            short("the exchange name", exchange)?,
            short("the routing key", key)?,
            BasicPublishOptions {
                mandatory: true,
                ..BasicPublishOptions::default()
            },
            &m.body,
            properties_to_amqp(&m.properties, &m.headers)?,
        )
        .await
        .map_err(|e| broker_err(what(), &e))?
        .await
        .map_err(|e| broker_err(what(), &e))?;
    match confirm {
        Confirmation::Ack(None) => Ok(()),
        Confirmation::Ack(Some(ret)) => Err(DemoError::Broker {
            what: what(),
            reason: format!("returned it as unroutable ({})", ret.reply_code),
        }),
        Confirmation::Nack(_) => Err(DemoError::Broker {
            what: what(),
            reason: "nacked the publish".to_string(),
        }),
        Confirmation::NotRequested => Err(DemoError::Broker {
            what: what(),
            reason: "sent no publisher confirm".to_string(),
        }),
    }
}

/// Makes the `n` messages a scenario published into dead letters, as its fault says.
async fn produce(ch: &Channel, fault: Fault, n: usize) -> Result<(), DemoError> {
    match fault {
        Fault::Published => Ok(()),
        Fault::Rejected { queue } => {
            let got = take(ch, queue, n).await?;
            reject_all(got, false, queue).await
        }
        Fault::DeliveryLimit { queue, dlq } => exhaust_delivery_limit(ch, queue, dlq, n).await,
        Fault::RetryLadder(ladder) => retry_ladder(ch, &ladder, n).await,
    }
}

/// No static topology sends a rejection sometimes to the wait queue and sometimes to the DLQ
/// (the attempt count lives only in x-death, which no exchange routes on), so in the last round
/// the retry exchange is pointed at the DLQ, and afterwards back at the wait queue.
///
/// The bindings move only while this holds all `n` messages: a rejection is not confirmed, and a
/// loaded broker dead-letters the previous round's rejections late. Moved before the take, a late
/// one met both bindings at once and was copied into the DLQ and the wait queue (the DLQ held 8
/// of 5 on a loaded 3.10). Once all `n` are taken again, every earlier rejection has made its
/// way round, and nothing is in flight while the exchange changes.
async fn retry_ladder(ch: &Channel, ladder: &Ladder, n: usize) -> Result<(), DemoError> {
    for attempt in 1..=ladder.attempts {
        let last = attempt == ladder.attempts;
        let got = take(ch, ladder.work, n).await?;
        if last {
            bind(ch, &ladder.dlq_binding()).await?;
            unbind(ch, &ladder.wait_binding()).await?;
        }
        reject_all(got, false, ladder.work).await?;
        if last {
            settle(ch, &[(ladder.dlq, n as u64)], SETTLE_TIMEOUT).await?;
            bind(ch, &ladder.wait_binding()).await?;
            unbind(ch, &ladder.dlq_binding()).await?;
        }
    }
    Ok(())
}

/// Rejects with requeue until the quorum queue has dead-lettered all `n` into `dlq`.
/// `basic.reject` rather than `basic.nack`: on 4.3+ a nack with requeue is a free return and
/// would never reach the limit.
async fn exhaust_delivery_limit(
    ch: &Channel,
    queue: &str,
    dlq: &str,
    n: usize,
) -> Result<(), DemoError> {
    let name = short("the queue name", queue)?;
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    while depth(ch, dlq).await? < n as u64 {
        let got = ch
            .basic_get(name.clone(), BasicGetOptions { no_ack: false })
            .await
            .map_err(|e| broker_err(format!("get a message from '{queue}'"), &e))?;
        match got {
            Some(m) => {
                m.delivery
                    .reject(BasicRejectOptions { requeue: true })
                    .await
                    .map_err(|e| broker_err(format!("hand back a message to '{queue}'"), &e))?;
            }
            None if Instant::now() >= deadline => {
                return Err(DemoError::NotSettled {
                    waited: SETTLE_TIMEOUT,
                    pending: vec![(dlq.to_string(), depth(ch, dlq).await?, n as u64)],
                });
            }
            None => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
    Ok(())
}

async fn depth(ch: &Channel, queue: &str) -> Result<u64, DemoError> {
    passive_depth(ch, short("the queue name", queue)?)
        .await
        .map_err(|e| broker_err(format!("report the depth of queue '{queue}'"), &e))
}

/// Waits until every queue holds exactly its expected number of messages.
async fn settle(
    ch: &Channel,
    expected: &[(&str, u64)],
    timeout: Duration,
) -> Result<(), DemoError> {
    let start = Instant::now();
    loop {
        let mut pending = Vec::new();
        for (q, want) in expected {
            let have = depth(ch, q).await?;
            if have != *want {
                pending.push((q.to_string(), have, *want));
            }
        }
        if pending.is_empty() {
            return Ok(());
        }
        if start.elapsed() >= timeout {
            return Err(DemoError::NotSettled {
                waited: timeout,
                pending,
            });
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Takes `n` messages with `basic.get`, holding them all before answering, so none comes back
/// through a TTL queue and is taken twice in the same round.
async fn take(ch: &Channel, queue: &str, n: usize) -> Result<Vec<Delivery>, DemoError> {
    let name = short("the queue name", queue)?;
    let mut out = Vec::with_capacity(n);
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    while out.len() < n {
        let got = ch
            .basic_get(name.clone(), BasicGetOptions { no_ack: false })
            .await
            .map_err(|e| broker_err(format!("get a message from '{queue}'"), &e))?;
        match got {
            Some(m) => out.push(m.delivery),
            None if Instant::now() >= deadline => {
                return Err(DemoError::NotSettled {
                    waited: SETTLE_TIMEOUT,
                    pending: vec![(queue.to_string(), out.len() as u64, n as u64)],
                });
            }
            None => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
    Ok(out)
}

async fn reject_all(
    deliveries: Vec<Delivery>,
    requeue: bool,
    queue: &str,
) -> Result<(), DemoError> {
    for d in deliveries {
        d.reject(BasicRejectOptions { requeue })
            .await
            .map_err(|e| broker_err(format!("reject a message from '{queue}'"), &e))?;
    }
    Ok(())
}
