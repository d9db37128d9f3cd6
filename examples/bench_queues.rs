//! Queue-list benchmark: a refresh of a 10,000-queue vhost (5,000 work queues dead-lettering
//! into 5,000 DLQs) in the TUI's `update`, before (every reported depth searched for in both
//! lists: the pairwise loop `update` had) and after (one map, one pass over each list, the
//! urgency figures and the sort), plus a full frame of the queue list at 160×48 and 80×24;
//! then the same 10,000 queues spread over 10 vhosts, listed all at once (`:vhost *`), where a
//! queue is known by its vhost and name. A refresh is one listing (`GET /api/queues/{vhost}`,
//! or `GET /api/queues` for every vhost) either way; this measures what Warren does with it.
//!
//! `cargo run --release --example bench_queues`

use std::time::{Duration, Instant};

use jiff::Timestamp;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::json;
use warren::domain::discovery::{self, BrokerFeatures, Discovery, QueueInfo, QueueRef, Topology};
use warren::tui::{Overview, Report, State, Theme, update, view};

const PAIRS: usize = 5_000;
const ROUNDS: usize = 20;

/// Every vhost: the pairs spread over this many vhosts.
const VHOSTS: usize = 10;

fn topology() -> Topology {
    topology_of(0..PAIRS)
}

fn topology_of(pairs: std::ops::Range<usize>) -> Topology {
    let mut t = Topology::default();
    for i in pairs {
        t.queues.push(
            QueueInfo::named(format!("work.{i:05}"))
                .with_arg("x-dead-letter-exchange", json!(""))
                .with_arg(
                    "x-dead-letter-routing-key",
                    json!(format!("work.{i:05}.dlq")),
                )
                .with_messages(0),
        );
        t.queues
            .push(QueueInfo::named(format!("work.{i:05}.dlq")).with_messages(i as u64 % 7));
    }
    t
}

/// The refresh as `update` did it before: each reported depth looked for in both lists.
fn before(state: &mut State, depths: &[(String, Option<u64>)]) -> bool {
    let mut changed = false;
    for (name, depth) in depths {
        if let Some(d) = state
            .queues
            .discovery
            .dead_letter_queues
            .iter_mut()
            .find(|d| &d.name == name)
        {
            changed |= d.depth != *depth;
            d.depth = *depth;
        } else if let Some(q) = state
            .queues
            .discovery
            .other_queues
            .iter_mut()
            .find(|q| &q.name == name)
        {
            changed |= q.depth != *depth;
            q.depth = *depth;
        }
    }
    changed
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let topo = topology();
    let features = BrokerFeatures::from_version("4.0.9");
    let mut d = discovery::discover(&topo, &features, &[]);
    d.set_vhost("/");
    assert_eq!(d.dead_letter_queues.len(), PAIRS);
    let now = Timestamp::now();
    let mut st = State::new(now, false, Theme::color());
    update(
        &mut st,
        Report::QueuesLoaded {
            overview: Overview {
                context: "bench".into(),
                ..Default::default()
            },
            discovery: d,
            ticket: Default::default(),
        },
    );
    // Depths as the listing reports them, in the broker's (name) order, some grown.
    let depths_at = |round: usize| -> Vec<(QueueRef, Option<u64>)> {
        topo.queues
            .iter()
            .enumerate()
            .map(|(i, q)| {
                let grown = if i % 10 == 1 { round as u64 } else { 0 };
                (QueueRef::new("/", &q.name), q.messages.map(|m| m + grown))
            })
            .collect()
    };

    let mut old = st.clone();
    let mut t_before = Vec::new();
    for r in 0..ROUNDS {
        let depths: Vec<(String, Option<u64>)> =
            depths_at(r).into_iter().map(|(q, d)| (q.name, d)).collect();
        let t = Instant::now();
        std::hint::black_box(before(&mut old, &depths));
        t_before.push(t.elapsed());
    }
    let t_after = refreshes(&mut st, now, depths_at);
    let mut frames = Vec::new();
    for (w, h) in [(160, 48), (80, 24)] {
        frames.push(((w, h), frame(&st, w, h)));
    }
    let top = st.queue_name_at_cursor().unwrap_or_default();

    // The same queues in 10 vhosts, from one listing of every vhost.
    let per = PAIRS / VHOSTS;
    let vhosts: Vec<(String, Topology)> = (0..VHOSTS)
        .map(|v| (format!("vhost-{v}"), topology_of(v * per..(v + 1) * per)))
        .collect();
    let parts: Vec<Discovery> = vhosts
        .iter()
        .map(|(v, t)| {
            let mut d = discovery::discover(t, &features, &[]);
            d.set_vhost(v);
            d
        })
        .collect();
    let mut every = State::new(now, false, Theme::color());
    update(
        &mut every,
        Report::QueuesLoaded {
            overview: Overview {
                context: "bench".into(),
                vhost: "*".into(),
                ..Default::default()
            },
            discovery: Discovery::merged(parts),
            ticket: Default::default(),
        },
    );
    assert_eq!(every.queues.discovery.dead_letter_queues.len(), PAIRS);
    let every_depths = |round: usize| -> Vec<(QueueRef, Option<u64>)> {
        vhosts
            .iter()
            .flat_map(|(v, t)| t.queues.iter().map(move |q| (v, q)))
            .enumerate()
            .map(|(i, (v, q))| {
                let grown = if i % 10 == 1 { round as u64 } else { 0 };
                (QueueRef::new(v, &q.name), q.messages.map(|m| m + grown))
            })
            .collect()
    };
    let t_every = refreshes(&mut every, now, every_depths);
    let every_frame = frame(&every, 160, 48);
    let every_top = every
        .queue_at_cursor()
        .map(|q| format!("{}/{}", q.vhost, q.name))
        .unwrap_or_default();
    println!(
        "queues: {} ({} dead-letter queues)",
        topo.queues.len(),
        PAIRS
    );
    println!(
        "refresh before (pairwise search), median of {ROUNDS}: {:.1} ms",
        median(t_before).as_secs_f64() * 1e3
    );
    println!(
        "refresh after (map + urgency + sort, all in update), median of {ROUNDS}: {:.1} ms",
        median(t_after).as_secs_f64() * 1e3
    );
    for ((w, h), t) in frames {
        println!(
            "full frame {w}x{h} with the queue list: {:.2} ms",
            t.as_secs_f64() * 1e3
        );
    }
    println!("top of the list (growing): {top}");
    println!(
        "every vhost ({VHOSTS} vhosts, the same {} queues), refresh median of {ROUNDS}: {:.1} ms; full frame 160x48: {:.2} ms; top: {every_top}",
        topo.queues.len(),
        median(t_every).as_secs_f64() * 1e3,
        every_frame.as_secs_f64() * 1e3
    );
}

/// `ROUNDS` depth refreshes through `update`, each a few seconds after the last (as the TUI's
/// tick asks for them), timed.
fn refreshes(
    st: &mut State,
    now: Timestamp,
    depths_at: impl Fn(usize) -> Vec<(QueueRef, Option<u64>)>,
) -> Vec<Duration> {
    let mut t_after = Vec::new();
    for r in 0..ROUNDS {
        let depths = depths_at(r);
        // Each refresh a few seconds after the last, as the TUI's tick asks for them.
        update(
            st,
            warren::tui::Event::Tick(
                Timestamp::from_second(now.as_second() + 5 * (r as i64 + 1)).unwrap(),
            ),
        );
        let t = Instant::now();
        update(
            st,
            Report::DepthsRefreshed {
                depths,
                ticket: Default::default(),
            },
        );
        t_after.push(t.elapsed());
    }
    t_after
}

/// The median time of a full frame at `w`×`h`.
fn frame(st: &State, w: u16, h: u16) -> Duration {
    let mut term = Terminal::new(TestBackend::new(w, h)).expect("test backend");
    let mut times = Vec::new();
    for _ in 0..ROUNDS {
        let t = Instant::now();
        term.draw(|f| view(st, f)).expect("draw");
        times.push(t.elapsed());
    }
    median(times)
}
