//! Memory is bounded by what Warren keeps, not by the size of what the broker sends: a queue
//! listing of tens of megabytes (applications' own queue arguments) read through the real binary
//! from a real broker. Before, the whole reply was parsed into one JSON tree and every argument
//! was kept: the peak grew with the listing's size many times over.

use crate::common;
use crate::replay_util;

use common::{TestBroker, TestVhost};
use lapin::options::QueueDeclareOptions;
use lapin::types::{AMQPValue, FieldTable, LongString, ShortString};
use replay_util::{Home, command};

const QUEUES: usize = 600;
const ARGUMENTS: usize = 500;

/// `QUEUES` queues, each with `ARGUMENTS` arguments of its application's own (about 18 MB of
/// listing), and one real dead-letter queue among them.
async fn heavy_vhost(vhost: &TestVhost) {
    let conn = common::amqp::connect(vhost).await;
    let ch = conn.create_channel().await.expect("channel");
    let pad = "p".repeat(40);
    let mut args = FieldTable::default();
    for a in 0..ARGUMENTS {
        let value = AMQPValue::LongString(LongString::from(format!("{pad}{a}")));
        args.insert(ShortString::from(format!("x-app-{a:03}")), value);
    }
    let opts = QueueDeclareOptions {
        durable: true,
        ..Default::default()
    };
    // Pipelined: one declare after another took most of a minute.
    for chunk in (0..QUEUES).collect::<Vec<_>>().chunks(100) {
        let declares = chunk.iter().map(|q| {
            let mut args = args.clone();
            if *q == 0 {
                let dlx = AMQPValue::LongString(LongString::from(""));
                args.insert("x-dead-letter-exchange".into(), dlx);
                let key = AMQPValue::LongString(LongString::from("heavy.dlq"));
                args.insert("x-dead-letter-routing-key".into(), key);
            }
            let name = format!("heavy.{q:04}");
            let ch = &ch;
            async move {
                ch.queue_declare(name.as_str().into(), opts, args)
                    .await
                    .expect("declare")
            }
        });
        futures_util::future::join_all(declares).await;
    }
    let opts = QueueDeclareOptions {
        durable: true,
        ..Default::default()
    };
    ch.queue_declare("heavy.dlq".into(), opts, FieldTable::default())
        .await
        .expect("declare the dlq");
    let _ = conn.close(200, "declared".into()).await;
}

/// The peak resident memory, in MiB, of the children this test process waited for (each test
/// runs in a process of its own under nextest, and this one runs one child).
fn children_peak_mib() -> f64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct it is given.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    assert_eq!(rc, 0, "getrusage");
    usage.ru_maxrss as f64 / 1024.0
}

#[tokio::test]
async fn a_listing_of_tens_of_megabytes_costs_what_warren_keeps() {
    let broker = TestBroker::default_broker();
    let vhost = TestVhost::new(&broker, "listing-mem").await;
    heavy_vhost(&vhost).await;
    let size = vhost
        .api(
            reqwest::Method::GET,
            &format!("/api/queues/{}", common::enc(&vhost.name)),
            None,
        )
        .await
        .bytes()
        .await
        .expect("the listing");
    let home = Home::new("listing-mem");
    let out = command(&vhost, &home, &["queues", "--json"])
        .output()
        .await
        .expect("run warren");
    let peak = children_peak_mib();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!(
        "listing of {QUEUES} queues: {:.1} MB; warren queues peak memory {peak:.0} MiB",
        size.len() as f64 / 1e6
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("heavy.dlq"),
        "the dead-letter queue is found: {stdout}"
    );
    // Measured on 3.10 with 30 MB: 276 MiB when the listing was read whole into a JSON tree
    // and every argument kept; 140 MiB read entry by entry and bounded.
    assert!(
        peak < 4.0 * size.len() as f64 / 1e6 + 60.0,
        "peak {peak:.0} MiB for a {:.1} MB listing",
        size.len() as f64 / 1e6
    );
    vhost.cleanup().await;
}
