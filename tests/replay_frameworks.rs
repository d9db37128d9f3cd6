//! Framework conventions through the real binary: a MassTransit fault goes through the endpoint's
//! exchange to that endpoint's queue and to no other subscriber of the message type; `_skipped`
//! needs `--to`; an endpoint exchange bound to nothing is refused before anything moves;
//! NServiceBus goes back to `FailedQ`. Fault headers are stripped, ids kept, bodies untouched.

use crate::common;
use crate::replay_util;

use common::amqp::{self as h, amqp_depth};
use common::{TestBroker, TestVhost};
use lapin::options::{ExchangeBindOptions, ExchangeDeclareOptions, QueueBindOptions};
use lapin::types::FieldTable;
use lapin::{Channel, ExchangeKind};
use replay_util::{Home, read_all, warren};
use warren::domain::features::QueueType;
use warren::domain::message::{DeadLetter, Properties};
use warren::domain::value::{HeaderValue, Table};

const MESSAGE_TYPE: &str = "Shop.Contracts:CreateShippingLabel";

async fn fanout(ch: &Channel, name: &str) {
    ch.exchange_declare(
        name.into(),
        ExchangeKind::Fanout,
        ExchangeDeclareOptions {
            durable: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
    .expect("exchange");
}

/// MassTransit's topology for one endpoint: queue and exchange of the same name, bound.
async fn endpoint(ch: &Channel, name: &str) {
    fanout(ch, name).await;
    h::declare(ch, name, QueueType::Classic, FieldTable::default()).await;
    ch.queue_bind(
        name.into(),
        name.into(),
        "".into(),
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await
    .expect("bind");
}

fn mt_fault(i: u32, endpoint: &str, reason: &str) -> (Properties, Table, Vec<u8>) {
    let mut hd = Table::new();
    hd.insert("MT-Reason", HeaderValue::string(reason));
    hd.insert(
        "MT-Fault-ExceptionType",
        HeaderValue::string("Shop.Shipping.CarrierUnavailableException"),
    );
    hd.insert("MT-Fault-Message", HeaderValue::string("carrier down"));
    hd.insert(
        "MT-Fault-StackTrace",
        HeaderValue::string("at Shop.Shipping.Consumer.Consume()"),
    );
    hd.insert(
        "MT-Fault-Timestamp",
        HeaderValue::string("2024-05-01T10:00:00Z"),
    );
    hd.insert(
        "MT-Fault-InputAddress",
        HeaderValue::string(format!("rabbitmq://localhost/{endpoint}")),
    );
    hd.insert(
        "MT-Fault-ConsumerType",
        HeaderValue::string("Shop.Shipping.CreateShippingLabelConsumer"),
    );
    hd.insert("MT-Fault-MessageType", HeaderValue::string(MESSAGE_TYPE));
    hd.insert("MT-Fault-RetryCount", HeaderValue::I32(3));
    hd.insert("MT-Redelivery-Count", HeaderValue::I32(2));
    hd.insert("MT-Host-MachineName", HeaderValue::string("web-1"));
    hd.insert("MT-Host-MassTransitVersion", HeaderValue::string("8.2.0"));
    hd.insert(
        "MT-OriginalMessageId",
        HeaderValue::string(format!("orig-{i}")),
    );
    hd.insert("tenant", HeaderValue::string("acme"));
    let body = format!(
        r#"{{"messageId":"mt-{i}","conversationId":"c-{i}","messageType":["urn:message:Shop.Contracts:CreateShippingLabel"],"message":{{"orderId":{i}}}}}"#
    )
    .into_bytes();
    let props = Properties {
        message_id: Some(format!("mt-{i}")),
        correlation_id: Some(format!("c-{i}")),
        content_type: Some("application/vnd.masstransit+json".into()),
        delivery_mode: Some(2),
        ..Properties::default()
    };
    (props, hd, body)
}

fn header_names(m: &DeadLetter) -> Vec<String> {
    let mut v: Vec<String> = m.headers.keys().map(str::to_string).collect();
    v.sort();
    v
}

#[tokio::test]
async fn masstransit_faults_reach_their_endpoint_and_no_other_subscriber() {
    const N: u32 = 12;
    for broker in TestBroker::all() {
        let label = broker.label.clone();
        let vhost = TestVhost::new(&broker, "replay-mt").await;
        let home = Home::new("replay-mt");
        let conn = h::connect(&vhost).await;
        let ch = h::confirm_channel(&conn).await;
        // The message type's exchange feeds two endpoints; replay must reach only one.
        fanout(&ch, MESSAGE_TYPE).await;
        for e in ["shipping-label", "billing"] {
            endpoint(&ch, e).await;
            ch.exchange_bind(
                e.into(),
                MESSAGE_TYPE.into(),
                "".into(),
                ExchangeBindOptions::default(),
                FieldTable::default(),
            )
            .await
            .expect("exchange bind");
        }
        endpoint(&ch, "shipping-label_error").await;
        let sent: Vec<_> = (0..N)
            .map(|i| mt_fault(i, "shipping-label", "fault"))
            .collect();
        for (p, hd, b) in &sent {
            h::publish(&ch, "shipping-label_error", p, hd, b).await;
        }

        let run = warren(
            &vhost,
            &home,
            &["replay", "shipping-label_error", "--dry-run", "--json"],
        )
        .await;
        assert_eq!(run.code, Some(0), "{label}: {run}");
        let plan = run.event("plan");
        let t = &plan["targets"]["shipping-label"];
        assert_eq!(t["exchange"], "shipping-label", "{label}: {plan}");
        assert_eq!(
            t["queues"],
            serde_json::json!(["shipping-label"]),
            "{label}: {plan}"
        );

        let run = warren(
            &vhost,
            &home,
            &["replay", "shipping-label_error", "--yes", "--json"],
        )
        .await;
        assert_eq!(run.code, Some(0), "{label}: {run}");
        assert_eq!(run.summary_u64("moved"), u64::from(N), "{label}: {run}");
        assert_eq!(
            amqp_depth(&conn, "billing").await,
            0,
            "{label}: no other subscriber"
        );
        assert_eq!(amqp_depth(&conn, "shipping-label_error").await, 0);
        let back = read_all(&conn, "shipping-label", N as usize).await;
        assert_eq!(back.len(), N as usize, "{label}");
        for (m, (p, _, b)) in back.iter().zip(&sent) {
            assert_eq!(&m.body, b, "{label}: envelope untouched");
            assert_eq!(&m.properties, p, "{label}");
            assert_eq!(
                header_names(m),
                vec![
                    "MT-OriginalMessageId",
                    "tenant",
                    "warren-replay-count",
                    "warren-replay-id",
                    "warren-replayed-at",
                    "warren-replayed-from"
                ],
                "{label}: fault, redelivery and host headers stripped, ids kept"
            );
            assert_eq!(
                m.headers.get_str("warren-replayed-from"),
                Some("shipping-label_error")
            );
        }

        // Skipped messages: refused unless --to names an endpoint that has the consumer.
        endpoint(&ch, "shipping-label_skipped").await;
        for i in 0..3 {
            let (p, hd, b) = mt_fault(100 + i, "shipping-label", "skip");
            let mut hd = hd;
            hd.retain(|k, _| !k.starts_with("MT-Fault-") || k == "MT-Fault-InputAddress");
            h::publish(&ch, "shipping-label_skipped", &p, &hd, &b).await;
        }
        let run = warren(
            &vhost,
            &home,
            &["replay", "shipping-label_skipped", "--yes", "--json"],
        )
        .await;
        assert_eq!(run.code, Some(1), "{label}: {run}");
        assert!(
            run.stderr.contains("_skipped") && run.stderr.contains("--to"),
            "{label}: {run}"
        );
        assert_eq!(amqp_depth(&conn, "shipping-label_skipped").await, 3);
        let run = warren(
            &vhost,
            &home,
            &[
                "replay",
                "shipping-label_skipped",
                "--yes",
                "--json",
                "--to",
                "billing",
            ],
        )
        .await;
        assert_eq!(run.code, Some(0), "{label}: {run}");
        assert_eq!(amqp_depth(&conn, "billing").await, 3, "{label}");
        assert_eq!(
            amqp_depth(&conn, "shipping-label").await,
            u64::from(N),
            "{label}: only the earlier replay"
        );

        // An endpoint exchange bound to nothing: refused before anything moves.
        fanout(&ch, "unbound").await;
        h::declare(
            &ch,
            "unbound_error",
            QueueType::Classic,
            FieldTable::default(),
        )
        .await;
        let (p, hd, b) = mt_fault(200, "unbound", "fault");
        h::publish(&ch, "unbound_error", &p, &hd, &b).await;
        let run = warren(&vhost, &home, &["replay", "unbound_error", "--yes"]).await;
        assert_eq!(run.code, Some(1), "{label}: {run}");
        assert!(run.stderr.contains("reaches no queue"), "{label}: {run}");
        assert_eq!(amqp_depth(&conn, "unbound_error").await, 1);

        // A target exchange that does not exist: nothing moves.
        h::declare(&ch, "gone_error", QueueType::Classic, FieldTable::default()).await;
        let (p, hd, b) = mt_fault(300, "gone", "fault");
        h::publish(&ch, "gone_error", &p, &hd, &b).await;
        let run = warren(&vhost, &home, &["replay", "gone_error", "--yes"]).await;
        assert_eq!(run.code, Some(1), "{label}: {run}");
        assert!(run.stderr.contains("does not exist"), "{label}: {run}");
        assert_eq!(amqp_depth(&conn, "gone_error").await, 1);

        let _ = conn.close(200, "done".into()).await;
        vhost.cleanup().await;
    }
}

#[tokio::test]
async fn nservicebus_goes_back_to_failedq_with_its_ids() {
    for broker in TestBroker::all() {
        let label = broker.label.clone();
        let vhost = TestVhost::new(&broker, "replay-nsb").await;
        let home = Home::new("replay-nsb");
        let conn = h::connect(&vhost).await;
        let ch = h::confirm_channel(&conn).await;
        h::declare(&ch, "error", QueueType::Classic, FieldTable::default()).await;
        h::declare(&ch, "Sales", QueueType::Classic, FieldTable::default()).await;
        let mut bodies = Vec::new();
        for i in 0..5 {
            let mut hd = Table::new();
            hd.insert(
                "NServiceBus.MessageId",
                HeaderValue::string(format!("nsb-{i}")),
            );
            hd.insert(
                "NServiceBus.CorrelationId",
                HeaderValue::string(format!("corr-{i}")),
            );
            hd.insert(
                "NServiceBus.EnclosedMessageTypes",
                HeaderValue::string("Sales.PlaceOrder, Sales"),
            );
            hd.insert(
                "NServiceBus.FailedQ",
                HeaderValue::string("Sales@MACHINE-1"),
            );
            hd.insert(
                "NServiceBus.ExceptionInfo.ExceptionType",
                HeaderValue::string("System.TimeoutException"),
            );
            hd.insert(
                "NServiceBus.ExceptionInfo.Message",
                HeaderValue::string("db timeout"),
            );
            hd.insert(
                "NServiceBus.ExceptionInfo.StackTrace",
                HeaderValue::string("at Sales.Handler"),
            );
            hd.insert(
                "NServiceBus.TimeOfFailure",
                HeaderValue::string("2024-05-01 10:00:00:000000 Z"),
            );
            hd.insert("NServiceBus.Retries", HeaderValue::string("3"));
            hd.insert(
                "NServiceBus.Retries.Timestamp",
                HeaderValue::string("2024-04-30 10:00:00:000000 Z"),
            );
            hd.insert(
                "NServiceBus.ProcessingEndpoint",
                HeaderValue::string("Sales"),
            );
            let props = Properties {
                message_id: Some(format!("nsb-{i}")),
                content_type: Some("application/json".into()),
                delivery_mode: Some(2),
                ..Properties::default()
            };
            let body = format!(r#"{{"OrderId":{i}}}"#).into_bytes();
            h::publish(&ch, "error", &props, &hd, &body).await;
            bodies.push(body);
        }
        let run = warren(&vhost, &home, &["replay", "error", "--yes", "--json"]).await;
        assert_eq!(run.code, Some(0), "{label}: {run}");
        assert_eq!(run.summary_u64("moved"), 5, "{label}: {run}");
        let back = read_all(&conn, "Sales", 5).await;
        assert_eq!(back.len(), 5, "{label}");
        for (i, m) in back.iter().enumerate() {
            assert_eq!(m.body, bodies[i]);
            assert_eq!(
                header_names(m),
                vec![
                    "NServiceBus.CorrelationId",
                    "NServiceBus.EnclosedMessageTypes",
                    "NServiceBus.MessageId",
                    "NServiceBus.ProcessingEndpoint",
                    "warren-replay-count",
                    "warren-replay-id",
                    "warren-replayed-at",
                    "warren-replayed-from"
                ],
                "{label}"
            );
            assert_eq!(
                m.headers.get_str("NServiceBus.MessageId"),
                Some(format!("nsb-{i}").as_str())
            );
        }
        assert_eq!(amqp_depth(&conn, "error").await, 0);
        let _ = conn.close(200, "done".into()).await;
        vhost.cleanup().await;
    }
}

/// A Celery task as the worker would get it, with `expires` long past and the `expiration`
/// property Celery sets from it.
fn celery_task(i: u32) -> (Properties, Table, Vec<u8>) {
    let id = format!("task-{i}");
    let mut hd = Table::new();
    hd.insert("lang", HeaderValue::string("py"));
    hd.insert("task", HeaderValue::string("app.charge"));
    hd.insert("id", HeaderValue::string(id.clone()));
    hd.insert("root_id", HeaderValue::string(id.clone()));
    hd.insert("retries", HeaderValue::I32(2));
    hd.insert(
        "expires",
        HeaderValue::string("2020-01-01T00:00:00.000000+00:00"),
    );
    hd.insert("argsrepr", HeaderValue::string(format!("[{i}]")));
    let props = Properties {
        correlation_id: Some(id),
        content_type: Some("application/json".into()),
        content_encoding: Some("utf-8".into()),
        expiration: Some("3600000".into()),
        delivery_mode: Some(2),
        ..Properties::default()
    };
    (props, hd, format!("[[{i}], {{}}, {{}}]").into_bytes())
}

#[tokio::test]
async fn celery_tasks_past_their_deadline_stay_until_the_deadline_is_cleared() {
    for broker in TestBroker::all() {
        let label = broker.label.clone();
        let vhost = TestVhost::new(&broker, "replay-celery").await;
        let home = Home::new("replay-celery");
        let conn = h::connect(&vhost).await;
        let ch = h::confirm_channel(&conn).await;
        for q in ["work", "celery.dlq"] {
            h::declare(&ch, q, QueueType::Classic, FieldTable::default()).await;
        }
        for i in 0..3 {
            let (props, hd, body) = celery_task(i);
            h::publish(&ch, "celery.dlq", &props, &hd, &body).await;
        }
        // Every selected task would be discarded unrun: nothing moves, and the refusal says why.
        let run = warren(
            &vhost,
            &home,
            &[
                "replay",
                "celery.dlq",
                "--to",
                "work",
                "--dry-run",
                "--json",
            ],
        )
        .await;
        assert_ne!(run.code, Some(0), "{label}: {run}");
        assert!(
            run.stderr.contains("Celery will discard 3 of 3 on arrival"),
            "{label}: {run}"
        );
        assert!(run.stderr.contains("--clear-expiry"), "{label}: {run}");
        // The run reads nothing first (--to): each task stays as it is taken, and the run is
        // not called complete.
        let run = warren(
            &vhost,
            &home,
            &["replay", "celery.dlq", "--to", "work", "--yes", "--json"],
        )
        .await;
        assert_ne!(run.code, Some(0), "{label}: {run}");
        assert_eq!(run.summary_u64("moved"), 0, "{label}: {run}");
        assert_eq!(run.summary_u64("held_back"), 3, "{label}: {run}");
        assert!(
            run.event("summary")["kept"]
                .to_string()
                .contains("--clear-expiry"),
            "{label}: {run}"
        );
        assert_eq!(amqp_depth(&conn, "celery.dlq").await, 3, "{label}");
        assert_eq!(amqp_depth(&conn, "work").await, 0, "{label}");

        let run = warren(
            &vhost,
            &home,
            &[
                "replay",
                "celery.dlq",
                "--to",
                "work",
                "--yes",
                "--json",
                "--clear-expiry",
            ],
        )
        .await;
        assert_eq!(run.code, Some(0), "{label}: {run}");
        assert_eq!(run.summary_u64("moved"), 3, "{label}: {run}");
        let back = read_all(&conn, "work", 3).await;
        assert_eq!(back.len(), 3, "{label}");
        for (i, m) in back.iter().enumerate() {
            let id = format!("task-{i}");
            assert_eq!(m.headers.get_str("id"), Some(id.as_str()), "{label}");
            assert_eq!(m.properties.correlation_id.as_deref(), Some(id.as_str()));
            assert!(!m.headers.contains_key("expires"), "{label}: deadline gone");
            assert_eq!(m.properties.expiration, None, "{label}: property gone");
            // Set to zero, not removed: Celery's protocol has the header.
            assert_eq!(m.headers.get_i64("retries"), Some(0), "{label}");
            assert_eq!(m.headers.get_str("task"), Some("app.charge"));
        }
        let _ = conn.close(200, "done".into()).await;
        vhost.cleanup().await;
    }
}
