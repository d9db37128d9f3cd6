//! 10,000 queues in one vhost are listed and classified: half of them work queues that
//! dead-letter into the other half. Timings are printed, not asserted. The other versions get
//! 1,000 (their listing is the same code; 30,000 declares and deletes took a fifth of the
//! suite's broker time for nothing more).

use crate::common;

use std::time::Instant;

use common::{TestBroker, TestVhost};
use futures_util::{StreamExt, stream};
use lapin::options::QueueDeclareOptions;
use lapin::types::{AMQPValue, FieldTable};
use warren::broker::discover;
use warren::broker::management::Management;
use warren::config::{self, Config, Overrides};
use warren::domain::discovery::{self, Convention};

const PAIRS: usize = 5_000;

#[tokio::test]
async fn ten_thousand_queues_are_listed_and_classified() {
    // The brokers are independent: one at a time took most of the suite's wall time.
    let brokers = TestBroker::all().into_iter().enumerate();
    futures_util::future::join_all(
        brokers.map(|(i, b)| at_scale(b, if i == 0 { PAIRS } else { 500 })),
    )
    .await;
}

async fn at_scale(broker: TestBroker, pairs: usize) {
    let vh = TestVhost::new(&broker, "scale").await;
    let conn = lapin::Connection::connect(&vh.amqp_url(), lapin::ConnectionProperties::default())
        .await
        .expect("amqp connect");
    let ch = conn.create_channel().await.expect("channel");

    let started = Instant::now();
    // Pipelined on one channel: many declares in flight at once.
    let declared: Vec<Result<(), String>> = stream::iter(0..pairs * 2)
        .map(|n| {
            let ch = ch.clone();
            async move {
                let i = n / 2;
                let work = format!("w-{i:05}");
                let (name, args) = if n.is_multiple_of(2) {
                    let mut a = FieldTable::default();
                    a.insert(
                        "x-dead-letter-exchange".into(),
                        AMQPValue::LongString("".into()),
                    );
                    a.insert(
                        "x-dead-letter-routing-key".into(),
                        AMQPValue::LongString(format!("{work}.dlq").into()),
                    );
                    (work, a)
                } else {
                    (format!("{work}.dlq"), FieldTable::default())
                };
                ch.queue_declare(
                    name.as_str().into(),
                    QueueDeclareOptions {
                        durable: true,
                        ..Default::default()
                    },
                    args,
                )
                .await
                .map(|_| ())
                .map_err(|e| format!("{name}: {e}"))
            }
        })
        .buffer_unordered(500)
        .collect()
        .await;
    let failures: Vec<&String> = declared.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(
        failures.is_empty(),
        "declare failures: {:?}",
        failures.iter().take(3).collect::<Vec<_>>()
    );
    println!(
        "RabbitMQ {}: declared {} queues in {:?}",
        broker.label,
        pairs * 2,
        started.elapsed()
    );

    let over = Overrides {
        management_url: Some(broker.mgmt_url_with_creds()),
        vhost: Some(vh.name.clone()),
        ..Default::default()
    };
    let target = config::resolve(&Config::default(), &over, &|_: &str| None).expect("target");
    let mgmt = Management::new(&target).expect("client");

    let t = Instant::now();
    let queues = mgmt.queues(&vh.name).await.expect("list queues");
    let listed = t.elapsed();
    assert_eq!(queues.len(), pairs * 2);

    let t = Instant::now();
    let topo = discover::topology(&mgmt, &vh.name).await.expect("topology");
    let gathered = t.elapsed();
    let features = mgmt.overview().await.expect("overview").features;
    let t = Instant::now();
    let d = discovery::discover(&topo, &features, &[]);
    let classified = t.elapsed();
    println!(
        "RabbitMQ {}: listed {} queues in {listed:?}; queues+exchanges+bindings+policies in {gathered:?}; classified in {classified:?}",
        broker.label,
        queues.len()
    );

    assert_eq!(d.dead_letter_queues.len(), pairs);
    assert_eq!(d.other_queues.len(), pairs);
    assert!(d.retry_loops.is_empty());
    for dlq in &d.dead_letter_queues {
        let work = dlq
            .name
            .strip_suffix(".dlq")
            .expect("every DLQ is a w-N.dlq");
        assert_eq!(dlq.feeders, vec![work.to_string()]);
        assert_eq!(dlq.convention, Convention::Broker);
    }

    let _ = conn.close(200, "done".into()).await;
    vh.cleanup().await;
}
