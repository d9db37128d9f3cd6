//! TUI benchmark: with 100,000 messages browsed, how long from a key press to the frame drawn
//! (goal p99 < 16 ms), how many frames an idle Warren draws in 10 s (goal 0), and peak memory
//! (goal ≤ 150 MiB, the page handed over included: packed, in memory).
//!
//! What it skips: the page is built here and handed straight to `update` as one
//! `MessagesLoaded`, so no broker, no worker and no spill file are measured (a live read sends
//! its page in chunks whose messages are in a file). The path the operator takes, from a real
//! broker through the worker, is `examples/bench_big_dlq.rs`.
//!
//! `cargo run --release --example bench_tui`
//!
//! The key-to-frame time is `update` plus a full `view` into ratatui's `TestBackend` at 160×48,
//! i.e. everything but the terminal's own write. Above 10,000 messages the filter narrows the
//! list when typing pauses; that narrowing is timed separately. Idle frames are counted by running the real
//! loop's rule (draw only when `take_dirty()`) over 10 s of the loop's tick events.

use std::time::{Duration, Instant};

use jiff::Timestamp;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use warren::domain::discovery::Discovery;
use warren::domain::message::{DeadLetter, Delivery, Properties};
use warren::domain::packed::Packed;
use warren::domain::snapshot::SnapshotHeader;
use warren::domain::value::{HeaderValue, Table};
use warren::tui::{Event, Overview, Report, State, Theme, update, view};

const N: usize = 100_000;

fn message(i: usize) -> DeadLetter {
    let mut headers = Table::new();
    match i % 3 {
        0 => {
            let mut death = Table::new();
            death.insert("count", HeaderValue::I64(3));
            death.insert("reason", HeaderValue::string("rejected"));
            death.insert("queue", HeaderValue::string("orders.process"));
            death.insert("time", HeaderValue::Timestamp(1_759_042_215));
            death.insert("exchange", HeaderValue::string("orders"));
            death.insert(
                "routing-keys",
                HeaderValue::Array(vec![HeaderValue::string("order.created")]),
            );
            headers.insert(
                "x-death",
                HeaderValue::Array(vec![HeaderValue::Table(death)]),
            );
            headers.insert("x-first-death-queue", HeaderValue::string("orders.process"));
            headers.insert("x-first-death-reason", HeaderValue::string("rejected"));
        }
        1 => {
            headers.insert("MT-Reason", HeaderValue::string("fault"));
            headers.insert(
                "MT-Fault-ExceptionType",
                HeaderValue::string("Shop.Shipping.CarrierUnavailableException"),
            );
            headers.insert(
                "MT-Fault-Message",
                HeaderValue::string(format!("Carrier DHL unavailable (request {i})")),
            );
            headers.insert(
                "MT-Fault-ConsumerType",
                HeaderValue::string("Shop.Shipping.CreateShippingLabelConsumer"),
            );
            headers.insert("MT-Fault-RetryCount", HeaderValue::I32(3));
            headers.insert(
                "MT-Fault-InputAddress",
                HeaderValue::string("rabbitmq://localhost/shipping-label"),
            );
        }
        _ => {
            headers.insert(
                "x-exception-message",
                HeaderValue::string(format!("Stock for SKU-{i} is negative")),
            );
            headers.insert(
                "x-exception-stacktrace",
                HeaderValue::string("java.lang.IllegalStateException: Stock is negative\n\tat com.shop.Inventory.reserve(Inventory.java:42)"),
            );
            headers.insert("x-original-exchange", HeaderValue::string("inventory"));
            headers.insert(
                "x-original-routingKey",
                HeaderValue::string("inventory.reserve"),
            );
        }
    }
    // Exactly as long as it is, as a body read from the broker is (`format!` leaves spare
    // capacity that a real delivery does not have).
    let body = format!(
        "{{\"orderId\":{i},\"sku\":\"A-{}\",\"qty\":1,\"pad\":\"{}\"}}",
        i % 97,
        "x".repeat(900)
    )
    .as_bytes()
    .to_vec();
    DeadLetter {
        queue: "orders.dlq".into(),
        position: i as u64,
        properties: Properties {
            message_id: Some(format!("order-{i}")),
            content_type: Some("application/json".into()),
            ..Default::default()
        },
        headers,
        body_size: body.len() as u64,
        body,
        delivery: Delivery {
            exchange: String::new(),
            routing_key: "orders.dlq".into(),
            ..Default::default()
        },
    }
}

fn key(c: KeyCode) -> Event {
    Event::Key(KeyEvent::new(c, KeyModifiers::NONE))
}

fn peak_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(str::to_string)
        })
        .and_then(|l| {
            l.split_whitespace()
                .nth(1)
                .and_then(|k| k.parse::<f64>().ok())
        })
        .map_or(0.0, |kib| kib / 1024.0)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).copied().unwrap_or_default()
}

/// The view a big page makes in the loop's idle moments, made whole, a frame after each slice
/// (the loop draws after each pass).
fn made_in_idle(st: &mut State, term: &mut Terminal<TestBackend>) {
    while st
        .msgs
        .browse
        .as_ref()
        .is_some_and(|b| b.updating().is_some())
    {
        update(st, Event::Idle);
        if st.take_dirty() {
            term.draw(|f| view(st, f)).expect("draw");
        }
    }
}

fn main() {
    // As the binary runs (`cli::main`).
    warren::tune_allocator();
    let now = Timestamp::now();
    let discovery = discovery();
    // The page as the worker hands it over: each message packed as it is read.
    let messages: Vec<Packed> = (0..N).map(|i| Packed::pack(message(i))).collect();
    let page_bytes: usize = messages.iter().map(Packed::heap_bytes).sum();
    let page_mib = peak_mib();

    let mut st = State::new(now, false, Theme::color());
    let load = load_page(&mut st, now, discovery, messages);
    let after_load = peak_mib();

    let mut term = Terminal::new(TestBackend::new(160, 48)).expect("test backend");
    term.draw(|f| view(&st, f)).expect("draw");
    st.take_dirty();

    let (times, settle) = run_script(&mut st, &mut term, script());
    let idle_frames = idle_frames(&mut st, now);
    let (header_settle, header_matches) = header_filter(&mut st, &mut term);
    let regroup = regroup(&mut st, &mut term);
    Figures {
        page_bytes,
        page_mib,
        after_load,
        load,
        times,
        settle,
        header_settle,
        header_matches,
        idle_frames,
        regroup,
    }
    .print();
}

/// The benchmark's one queue, as a snapshot of `N` messages is discovered.
fn discovery() -> Discovery {
    let header = SnapshotHeader {
        queue: "orders.dlq".into(),
        vhost: "/".into(),
        exported_at: String::new(),
        source: "bench".into(),
    };
    let mut discovery = warren::worker::snapshot_discovery(&[(header, Vec::new())]);
    for q in &mut discovery.dead_letter_queues {
        q.depth = Some(N as u64);
    }
    discovery
}

/// The queue list, Enter on the queue, and the page handed over as one `MessagesLoaded`: how
/// long that last `update` (explaining and loading every message) took.
fn load_page(
    st: &mut State,
    now: Timestamp,
    discovery: Discovery,
    messages: Vec<Packed>,
) -> Duration {
    update(
        st,
        Report::QueuesLoaded {
            overview: Overview {
                context: "bench".into(),
                ..Default::default()
            },
            discovery,
            ticket: Default::default(),
        },
    );
    update(st, key(KeyCode::Enter));
    let t = Instant::now();
    let first_seen = vec![Some(now); N];
    update(
        st,
        Report::MessagesLoaded {
            vhost: String::new(),
            queue: "orders.dlq".into(),
            messages,
            first_seen,
            replays: Vec::new(),
            authors: Default::default(),
            stop: "bench".into(),
            ticket: Default::default(),
        },
    );
    t.elapsed()
}

/// A session's worth of keys: moving, paging, jumping, selecting, opening groups, filtering.
fn script() -> Vec<Event> {
    let mut v = Vec::new();
    for _ in 0..200 {
        v.push(key(KeyCode::Char('j')));
    }
    for _ in 0..50 {
        v.push(key(KeyCode::PageDown));
    }
    v.push(key(KeyCode::Char('G')));
    v.push(key(KeyCode::Char('g')));
    for _ in 0..100 {
        v.push(key(KeyCode::Char(' ')));
    }
    v.push(key(KeyCode::Char('f')));
    for _ in 0..20 {
        v.push(key(KeyCode::Char('j')));
    }
    v.push(key(KeyCode::Char('f')));
    v.push(key(KeyCode::Char('/')));
    for c in "exception:carrier".chars() {
        v.push(key(KeyCode::Char(c)));
    }
    v.push(Event::FilterSettle);
    v.push(key(KeyCode::Enter));
    for _ in 0..100 {
        v.push(key(KeyCode::Char('k')));
    }
    v
}

/// Each key press -> frame drawn (sorted), and the filter's narrowing once typing pauses.
fn run_script(
    st: &mut State,
    term: &mut Terminal<TestBackend>,
    script: Vec<Event>,
) -> (Vec<Duration>, Duration) {
    let mut times = Vec::with_capacity(script.len());
    let mut settle = Duration::ZERO;
    for ev in script {
        let is_key = matches!(ev, Event::Key(_));
        let t = Instant::now();
        update(st, ev);
        if st.take_dirty() {
            term.draw(|f| view(st, f)).expect("draw");
        }
        if !is_key {
            // The settle starts the view; the loop's idle moments make it (`tui::refresh`).
            made_in_idle(st, term);
        }
        if is_key {
            times.push(t.elapsed());
        } else {
            settle = t.elapsed();
        }
    }
    times.sort();
    (times, settle)
}

/// Idle: 10 s of the loop's 5-second ticks with nothing else happening; the frames it would draw.
fn idle_frames(st: &mut State, now: Timestamp) -> usize {
    let mut idle_frames = 0;
    for s in [5, 10] {
        update(st, Event::Tick(now + jiff::SignedDuration::from_secs(s)));
        if st.take_dirty() {
            idle_frames += 1;
        }
    }
    idle_frames
}

/// A filter on a header: the headers are decoded from the packed rows when it is applied. How
/// long once typing pauses, and how many match.
fn header_filter(st: &mut State, term: &mut Terminal<TestBackend>) -> (Duration, usize) {
    update(st, key(KeyCode::Char('/')));
    update(
        st,
        Event::Key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL)),
    );
    for c in "header:MT-Fault-RetryCount=3".chars() {
        update(st, key(KeyCode::Char(c)));
    }
    let t = Instant::now();
    update(st, Event::FilterSettle);
    made_in_idle(st, term);
    let header_settle = t.elapsed();
    let header_matches = st.msgs.browse.as_ref().map_or(0, |b| b.visible.len());
    update(st, key(KeyCode::Enter));
    (header_settle, header_matches)
}

/// The group view over every message: `b` regroups the whole list under the next grouping,
/// each grouping's time (and its frame's).
fn regroup(st: &mut State, term: &mut Terminal<TestBackend>) -> Vec<String> {
    st.filtering.filter = None;
    st.filtering.text.clear();
    st.refresh_view_now();
    update(st, key(KeyCode::Char('f')));
    let mut regroup = Vec::new();
    for _ in 0..warren::domain::grouping::GroupBy::ALL.len() {
        let t = Instant::now();
        update(st, key(KeyCode::Char('b')));
        if st.take_dirty() {
            term.draw(|f| view(st, f)).expect("draw");
        }
        made_in_idle(st, term);
        regroup.push(format!(
            "{} {:.0} ms",
            st.msgs.group_by,
            t.elapsed().as_secs_f64() * 1000.0
        ));
    }
    regroup
}

/// What the run measured, printed by [`Figures::print`].
struct Figures {
    page_bytes: usize,
    page_mib: f64,
    after_load: f64,
    load: Duration,
    times: Vec<Duration>,
    settle: Duration,
    header_settle: Duration,
    header_matches: usize,
    idle_frames: usize,
    regroup: Vec<String>,
}

impl Figures {
    fn print(&self) {
        let Figures {
            page_bytes,
            page_mib,
            after_load,
            load,
            ref times,
            settle,
            header_settle,
            header_matches,
            idle_frames,
            ref regroup,
        } = *self;
        println!("TUI with {N} messages browsed (release build, 160x48 TestBackend)");
        println!(
            "  the page as handed over: {:.1} MiB on the heap packed ({:.0} B a message), peak so far {page_mib:.0} MiB",
            page_bytes as f64 / 1024.0 / 1024.0,
            page_bytes as f64 / N as f64
        );
        println!(
            "  rows: {} B each inline besides the packed message; peak after loading {after_load:.0} MiB",
            std::mem::size_of::<warren::tui::state::Row>()
        );
        println!(
            "  explaining and loading {N} messages: {:.0} ms",
            load.as_secs_f64() * 1000.0
        );
        println!(
            "  key press -> frame drawn over {} keys: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (goal p99 < 16 ms)",
            times.len(),
            percentile(times, 0.5).as_secs_f64() * 1000.0,
            percentile(times, 0.99).as_secs_f64() * 1000.0,
            times.last().copied().unwrap_or_default().as_secs_f64() * 1000.0
        );
        println!(
            "  filter narrowing {N} messages once typing pauses: {:.0} ms (after a {} ms pause)",
            settle.as_secs_f64() * 1000.0,
            warren::tui::update::FILTER_SETTLE.as_millis()
        );
        println!(
            "  filter on a header ({header_matches} match) once typing pauses: {:.0} ms",
            header_settle.as_secs_f64() * 1000.0
        );
        println!("  frames drawn while idle for 10 s: {idle_frames} (goal 0)");
        println!(
            "  b in the group view, regrouping {N} messages (and drawing): {}",
            regroup.join(", ")
        );
        println!(
            "  peak memory (VmHWM): {:.0} MiB (goal <= 150 MiB)",
            peak_mib()
        );
    }
}
