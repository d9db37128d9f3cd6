//! Discovery against real brokers: dead-letter queues found by argument (fanout, direct and the
//! default exchange), by policy and by name, with the right feeders; retry loops recognised and
//! not listed, a wait queue known by its topology whatever its name, its work queue consumed or
//! not; routing resolved from the broker's own bindings.

use crate::common;

use std::time::Duration;

use common::{TestBroker, TestVhost};
use lapin::options::{
    BasicPublishOptions, ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel, ExchangeKind};
use serde_json::json;
use warren::broker::discover;
use warren::broker::management::Management;
use warren::config::{self, Config, Overrides};
use warren::domain::discovery::{Convention, DlqKind, QueueType, RetryLoop, resolve_routing};

fn args(pairs: &[(&str, AMQPValue)]) -> FieldTable {
    let mut t = FieldTable::default();
    for (k, v) in pairs {
        t.insert((*k).into(), v.clone());
    }
    t
}

fn s(text: &str) -> AMQPValue {
    AMQPValue::LongString(text.into())
}

async fn queue(ch: &Channel, name: &str, a: FieldTable) {
    ch.queue_declare(
        name.into(),
        QueueDeclareOptions {
            durable: true,
            ..Default::default()
        },
        a,
    )
    .await
    .unwrap_or_else(|e| panic!("declare {name}: {e}"));
}

async fn exchange(ch: &Channel, name: &str, kind: ExchangeKind) {
    ch.exchange_declare(
        name.into(),
        kind,
        ExchangeDeclareOptions {
            durable: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
    .unwrap_or_else(|e| panic!("declare exchange {name}: {e}"));
}

async fn bind(ch: &Channel, queue: &str, exchange: &str, key: &str) {
    ch.queue_bind(
        queue.into(),
        exchange.into(),
        key.into(),
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await
    .unwrap_or_else(|e| panic!("bind {queue}: {e}"));
}

/// A management client for the vhost.
fn management(vh: &TestVhost) -> Management {
    let over = Overrides {
        management_url: Some(vh.broker.mgmt_url_with_creds()),
        vhost: Some(vh.name.clone()),
        ..Default::default()
    };
    let target = config::resolve(&Config::default(), &over, &|_: &str| None).expect("target");
    Management::new(&target).expect("client")
}

/// The dead-letter topology of a small shop, declared over AMQP.
async fn declare_shop(vh: &TestVhost) -> lapin::Connection {
    let conn = lapin::Connection::connect(&vh.amqp_url(), lapin::ConnectionProperties::default())
        .await
        .expect("amqp connect");
    let ch = conn.create_channel().await.expect("channel");

    // Argument DLX to a fanout exchange.
    exchange(&ch, "payments.dlx", ExchangeKind::Fanout).await;
    queue(
        &ch,
        "payments",
        args(&[("x-dead-letter-exchange", s("payments.dlx"))]),
    )
    .await;
    queue(&ch, "payments.dead", FieldTable::default()).await;
    bind(&ch, "payments.dead", "payments.dlx", "").await;

    // Argument DLX to a direct exchange with a routing key: only the matching binding counts.
    exchange(&ch, "shipping.dlx", ExchangeKind::Direct).await;
    queue(
        &ch,
        "shipping",
        args(&[
            ("x-dead-letter-exchange", s("shipping.dlx")),
            ("x-dead-letter-routing-key", s("held")),
        ]),
    )
    .await;
    queue(&ch, "shipping.held", FieldTable::default()).await;
    queue(&ch, "shipping.audit", FieldTable::default()).await;
    bind(&ch, "shipping.held", "shipping.dlx", "held").await;
    bind(&ch, "shipping.audit", "shipping.dlx", "audit").await;

    // Default exchange + routing key, into a quorum DLQ.
    queue(
        &ch,
        "inventory",
        args(&[
            ("x-dead-letter-exchange", s("")),
            ("x-dead-letter-routing-key", s("inventory.failed")),
        ]),
    )
    .await;
    queue(
        &ch,
        "inventory.failed",
        args(&[("x-queue-type", s("quorum"))]),
    )
    .await;

    // By policy (dead-letter-exchange + key in the policy, none in arguments).
    queue(&ch, "invoices", FieldTable::default()).await;
    queue(&ch, "invoices.rejects", FieldTable::default()).await;
    vh.policy(
        "invoices-dl",
        "^invoices$",
        "queues",
        json!({"dead-letter-exchange": "", "dead-letter-routing-key": "invoices.rejects"}),
    )
    .await;

    // By name only.
    for name in [
        "billing_error",
        "billing_skipped",
        "orders.group.dlq",
        "error",
    ] {
        queue(&ch, name, FieldTable::default()).await;
    }

    // A retry ladder: work → TTL wait queue → back to work. Neither is a DLQ.
    queue(
        &ch,
        "orders.process",
        args(&[
            ("x-dead-letter-exchange", s("")),
            ("x-dead-letter-routing-key", s("orders.retry.wait")),
        ]),
    )
    .await;
    queue(
        &ch,
        "orders.retry.wait",
        args(&[
            ("x-message-ttl", AMQPValue::LongInt(5000)),
            ("x-dead-letter-exchange", s("")),
            ("x-dead-letter-routing-key", s("orders.process")),
        ]),
    )
    .await;
    queue(&ch, "plain", FieldTable::default()).await;

    // One message, so shipping.held sorts first.
    ch.basic_publish(
        "".into(),
        "shipping.held".into(),
        BasicPublishOptions::default(),
        b"parcel",
        BasicProperties::default(),
    )
    .await
    .expect("publish")
    .await
    .expect("confirm");
    conn
}

#[tokio::test]
async fn finds_dead_letter_queues_by_argument_policy_and_name() {
    for broker in TestBroker::all() {
        let vh = TestVhost::new(&broker, "discover").await;
        let conn = declare_shop(&vh).await;
        let mgmt = management(&vh);

        // Queue stats arrive with the broker's next tick: wait for the message to be counted.
        let counted = common::wait::poll(Duration::from_secs(15), || async {
            let d = discover::discover(&mgmt, &vh.name, &[])
                .await
                .expect("discover");
            if d.dlq("shipping.held").and_then(|q| q.depth) == Some(1) {
                Ok(d)
            } else {
                Err(d)
            }
        })
        .await;
        let (Ok(d) | Err(d)) = counted;
        let names: Vec<&str> = d
            .dead_letter_queues
            .iter()
            .map(|q| q.name.as_str())
            .collect();
        println!("RabbitMQ {}: DLQs {names:?}", broker.label);
        assert_eq!(
            names,
            vec![
                "shipping.held",
                "billing_error",
                "billing_skipped",
                "error",
                "inventory.failed",
                "invoices.rejects",
                "orders.group.dlq",
                "payments.dead",
            ]
        );

        let q = |n: &str| d.dlq(n).unwrap_or_else(|| panic!("{n} listed"));
        assert_eq!(q("payments.dead").feeders, vec!["payments"]);
        assert_eq!(q("payments.dead").convention, Convention::Broker);
        assert_eq!(q("shipping.held").feeders, vec!["shipping"]);
        assert_eq!(q("shipping.held").depth, Some(1));
        assert!(!q("shipping.held").feeders_uncertain);
        assert_eq!(q("inventory.failed").feeders, vec!["inventory"]);
        assert_eq!(q("inventory.failed").queue_type, QueueType::Quorum);
        let expected_limit = if broker.label == "3.10" {
            None
        } else {
            Some(20)
        };
        assert_eq!(q("inventory.failed").delivery_limit, expected_limit);
        assert_eq!(q("invoices.rejects").feeders, vec!["invoices"]);
        assert!(q("invoices.rejects").by_topology && !q("invoices.rejects").by_name);
        assert_eq!(
            (q("billing_error").kind, q("billing_error").convention),
            (DlqKind::Error, Convention::MassTransit)
        );
        assert_eq!(
            (q("billing_skipped").kind, q("billing_skipped").convention),
            (DlqKind::Skipped, Convention::MassTransit)
        );
        assert_eq!(q("orders.group.dlq").convention, Convention::Spring);
        assert_eq!(q("error").convention, Convention::NServiceBus);
        assert!(q("error").feeders.is_empty());

        assert_eq!(
            d.retry_loops,
            vec![RetryLoop {
                vhost: vh.name.clone(),
                work_queue: "orders.process".into(),
                wait_queue: "orders.retry.wait".into(),
                ttl_ms: 5000
            }]
        );
        let others: Vec<&str> = d.other_queues.iter().map(|q| q.name.as_str()).collect();
        assert_eq!(
            others,
            vec![
                "inventory",
                "invoices",
                "orders.process",
                "orders.retry.wait",
                "payments",
                "plain",
                "shipping",
                "shipping.audit"
            ]
        );

        // Routing from the broker's own bindings.
        let (exchanges, bindings) = (
            mgmt.exchanges(&vh.name).await.unwrap(),
            mgmt.bindings(&vh.name).await.unwrap(),
        );
        assert_eq!(
            resolve_routing(&exchanges, &bindings, "shipping.dlx", "held"),
            vec!["shipping.held"]
        );
        assert_eq!(
            resolve_routing(&exchanges, &bindings, "payments.dlx", "anything"),
            vec!["payments.dead"]
        );
        assert_eq!(
            resolve_routing(&exchanges, &bindings, "", "plain"),
            vec!["plain"]
        );
        let from_source = mgmt
            .exchange_bindings(&vh.name, "shipping.dlx")
            .await
            .unwrap();
        assert_eq!(from_source.len(), 2);
        let one = mgmt.queue(&vh.name, "inventory.failed").await.unwrap();
        assert_eq!(one.queue_type, QueueType::Quorum);

        let _ = conn.close(200, "done".into()).await;
        vh.cleanup().await;
    }
}

#[tokio::test]
async fn configured_patterns_add_dead_letter_queues() {
    let broker = TestBroker::default_broker();
    let vh = TestVhost::new(&broker, "patterns").await;
    let conn = lapin::Connection::connect(&vh.amqp_url(), lapin::ConnectionProperties::default())
        .await
        .expect("connect");
    let ch = conn.create_channel().await.expect("channel");
    queue(&ch, "graveyard.orders", FieldTable::default()).await;
    queue(&ch, "orders", FieldTable::default()).await;
    let over = Overrides {
        management_url: Some(broker.mgmt_url_with_creds()),
        ..Default::default()
    };
    let target = config::resolve(&Config::default(), &over, &|_: &str| None).expect("target");
    let mgmt = Management::new(&target).expect("client");
    let patterns = vec![regex::Regex::new("^graveyard\\.").unwrap()];
    let d = discover::discover(&mgmt, &vh.name, &patterns)
        .await
        .expect("discover");
    let names: Vec<&str> = d
        .dead_letter_queues
        .iter()
        .map(|q| q.name.as_str())
        .collect();
    assert_eq!(names, vec!["graveyard.orders"]);
    assert_eq!(d.dead_letter_queues[0].convention, Convention::Unknown);
    let _ = conn.close(200, "done".into()).await;
    vh.cleanup().await;
}

/// A wait queue known by what it does, with a name that matches no pattern: `payments.cooldown`
/// holds messages for its TTL and dead-letters them back through `work` by their own routing
/// key into `payments`, the one queue bound there. `payments` is a work queue, not a DLQ, and
/// the pair a retry loop, whether or not `payments` is consumed when Warren looks.
#[tokio::test]
async fn a_wait_queue_is_known_by_its_topology_whatever_its_name() {
    for broker in TestBroker::all() {
        let vh = TestVhost::new(&broker, "ladder-topology").await;
        let conn =
            lapin::Connection::connect(&vh.amqp_url(), lapin::ConnectionProperties::default())
                .await
                .expect("connect");
        let ch = conn.create_channel().await.expect("channel");
        exchange(&ch, "work", ExchangeKind::Direct).await;
        exchange(&ch, "hold", ExchangeKind::Direct).await;
        queue(&ch, "payments", FieldTable::default()).await;
        bind(&ch, "payments", "work", "payments").await;
        queue(
            &ch,
            "payments.cooldown",
            args(&[
                ("x-message-ttl", AMQPValue::LongInt(1500)),
                ("x-dead-letter-exchange", s("work")),
            ]),
        )
        .await;
        bind(&ch, "payments.cooldown", "hold", "payments").await;
        queue(&ch, "payments.failed-for-good", FieldTable::default()).await;
        let mgmt = management(&vh);
        let consumer_ch = conn.create_channel().await.expect("channel");
        for consumed in [false, true] {
            if consumed {
                consumer_ch
                    .basic_consume(
                        "payments".into(),
                        "worker".into(),
                        lapin::options::BasicConsumeOptions::default(),
                        FieldTable::default(),
                    )
                    .await
                    .expect("consume");
            }
            let d = discover::discover(&mgmt, &vh.name, &[])
                .await
                .expect("discover");
            assert!(
                d.dlq("payments").is_none(),
                "{} (consumed: {consumed}): {:?}",
                broker.label,
                d.dead_letter_queues
            );
            assert_eq!(
                d.retry_loops,
                vec![RetryLoop {
                    vhost: vh.name.clone(),
                    work_queue: "payments".into(),
                    wait_queue: "payments.cooldown".into(),
                    ttl_ms: 1500
                }],
                "{} (consumed: {consumed})",
                broker.label
            );
        }
        let _ = conn.close(200, "done".into()).await;
        vh.cleanup().await;
    }
}
