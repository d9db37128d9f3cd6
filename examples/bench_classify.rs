//! What a replay does with each message between reading it and publishing it, without the
//! network: a lapin delivery as the broker sends it (a 1 KiB body, a broker `x-death` and its
//! three summary headers, one header of the app's) is converted, keyed, explained, dated,
//! selected and planned, and its properties encoded for publishing — the steps of
//! `broker::replay::classify`, which is private, called one by one. It measures that work
//! alone: not the broker, lapin's IO thread or the engine (`bench_replay` measures the run).
//!
//! ```sh
//! cargo run --release --example bench_classify
//! BENCH_N=20000 valgrind --tool=callgrind target/release/examples/bench_classify
//! ```
//! The deliveries are built before the clock starts; under callgrind, subtract
//! `bench_classify::delivery` from the total for the pipeline's instructions a message.
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

use lapin::BasicProperties;
use warren::broker::replay::{Action, Job, plan_publish};
use warren::domain::selection::Selection;

#[path = "support/dead_letter.rs"]
mod dead_letter;

fn delivery(i: u64) -> lapin::message::Delivery {
    let h = dead_letter::headers();
    let mut d = lapin::message::Delivery::mock(i, "".into(), "dlq".into(), false, vec![b'a'; 1024]);
    d.properties = BasicProperties::default()
        .with_message_id(format!("bench-{i}").into())
        .with_content_type("application/json".into())
        .with_delivery_mode(2)
        .with_headers(h);
    d
}

fn main() {
    // As the binary runs (`cli::main`).
    warren::tune_allocator();
    let job = Job {
        action: Action::Replay,
        dlq: "dlq".into(),
        selection: Selection::All,
        limit: None,
        rate: None,
        window: 1000,
        keep_attempts: false,
        clear_expiry: false,
        strip_failure_stamp: false,
        to: None,
        allowed_targets: HashSet::from([("".to_string(), "work".to_string())]),
        redirects: BTreeMap::new(),
        endpoint_redirects: Default::default(),
        replays: HashMap::new(),
        first_seen: HashMap::new(),
        quorum: warren::domain::quorum::BrowsePolicy::unrestricted(),
        settle_lag: std::time::Duration::ZERO,
        conventions: Default::default(),
        run_id: Some("run-1".into()),
        message_bytes: None,
        checks: None,
        backlog: None,
        edits: None,
        amqp10: None,
    };
    let n: u64 = std::env::var("BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let deliveries: Vec<_> = (0..n).map(delivery).collect();
    let t = Instant::now();
    let mut ok = 0u64;
    for (i, d) in deliveries.into_iter().enumerate() {
        let msg = warren::broker::amqp::dead_letter_from_delivery("dlq", i as u64, d, usize::MAX);
        let key = warren::domain::identity::message_key(&msg);
        let exp = warren::domain::explain::explain_for_replay(&msg, &job.conventions, 0);
        let _age = warren::domain::arrival::Arrival::of(&exp.deaths, exp.failed_at, None)
            .age_secs(jiff::Timestamp::now());
        if job.selection.selects(&msg, &exp, &key, None) && plan_publish(&job, &msg, &exp).is_ok() {
            ok += 1;
        }
    }
    let el = t.elapsed();
    println!(
        "{n} deliveries, {ok} planned for publishing: {:.2} µs a message",
        el.as_secs_f64() * 1e6 / n as f64
    );
}
