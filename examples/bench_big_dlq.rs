//! The TUI on a big dead-letter queue, the way the operator reads it: a real broker holding
//! N × 1 KiB dead letters, the worker's real browse (`:limit N`, Enter), every report through
//! the TUI's `update`, then a session's keys. Printed for each page size: time to read all,
//! peak resident memory of the process (worker and TUI together, as in `warren`), the spill
//! file's size, and key press → frame (`update` plus a full `view` into ratatui's
//! `TestBackend` at 160×48), with the sorts and a filter timed on their own.
//!
//! ```sh
//! cargo run --release --example bench_big_dlq                         # 1,000,000 published; reads 100,000 and 1,000,000
//! cargo run --release --example bench_big_dlq -- 20000 5000,20000     # publish 20,000; read 5,000 then 20,000
//! ```
//!
//! The messages are published once into a vhost of their own, which is deleted at the end; each
//! read runs in a child process of its own (this example again, with `--measure`), so that its
//! peak memory is the read's alone, not the publishing's. Env: `BENCH_AMQP` (default
//! `amqp://guest:guest@127.0.0.1:5672`), `BENCH_MGMT` (default `http://127.0.0.1:15672`),
//! `BENCH_USER` / `BENCH_PASS` (guest), `BENCH_BODY` (bytes per message, 1024), `BENCH_KEEP` (keep
//! the vhost, for more reads with `--measure VHOST N`; delete it after).

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldArray, FieldTable, LongString};
use lapin::{BasicProperties, Connection};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use warren::config::Overrides;
use warren::tui::{Event, State, Theme, update, view};

const QUEUE: &str = "orders.dlq";

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn enc(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

fn key(c: KeyCode) -> Event {
    Event::Key(KeyEvent::new(c, KeyModifiers::NONE))
}

/// The process's peak resident memory, from the kernel (`getrusage`), in MiB.
fn peak_mib() -> f64 {
    // SAFETY: getrusage only writes into the struct it is given.
    let kib = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru.ru_maxrss
    };
    kib as f64 / 1024.0
}

/// The resident size now, and glibc's heap (`mallinfo2`, every arena: bytes handed out and
/// bytes the arenas hold, in MiB). Warren's own allocations go through mimalloc (lib.rs), so
/// glibc's heap is only what C code (SQLite) and the C library take directly; the rest of the
/// resident size is mimalloc's.
fn heap_now() -> String {
    // SAFETY: mallinfo2 only reads the allocator's counters.
    let m = unsafe { libc::mallinfo2() };
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: f64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0.0);
    let mib = |b: usize| b as f64 / 1024.0 / 1024.0;
    format!(
        "resident {:.0} MiB; glibc heap in use {:.0} MiB, arenas {:.0} MiB (free in them {:.0}), mmapped {:.0} MiB",
        pages * 4096.0 / 1024.0 / 1024.0,
        mib(m.uordblks + m.hblkhd),
        mib(m.arena),
        mib(m.fordblks),
        mib(m.hblkhd)
    )
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).copied().unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

struct Broker {
    amqp: String,
    mgmt: String,
    user: String,
    pass: String,
    vhost: String,
    http: reqwest::Client,
}

impl Broker {
    fn from_env(vhost: String) -> Broker {
        Broker {
            amqp: env_or("BENCH_AMQP", "amqp://guest:guest@127.0.0.1:5672"),
            mgmt: env_or("BENCH_MGMT", "http://127.0.0.1:15672"),
            user: env_or("BENCH_USER", "guest"),
            pass: env_or("BENCH_PASS", "guest"),
            vhost,
            http: reqwest::Client::new(),
        }
    }

    async fn vhost(&self, method: reqwest::Method) -> Result<()> {
        let url = format!(
            "{}/api/vhosts/{}",
            self.mgmt.trim_end_matches('/'),
            enc(&self.vhost)
        );
        let r = self
            .http
            .request(method, &url)
            .basic_auth(&self.user, Some(&self.pass))
            .send()
            .await
            .with_context(|| url.clone())?;
        if !r.status().is_success() {
            bail!("{url}: {}", r.status());
        }
        Ok(())
    }

    fn amqp_url(&self) -> String {
        format!("{}/{}", self.amqp.trim_end_matches('/'), enc(&self.vhost))
    }

    fn mgmt_url(&self) -> String {
        let mut u = url::Url::parse(&self.mgmt).expect("BENCH_MGMT is a URL");
        let _ = u.set_username(&self.user);
        let _ = u.set_password(Some(&self.pass));
        u.to_string()
    }
}

/// `n` dead letters of `body` bytes as the broker writes them (an `x-death` record), with three
/// reasons, one to five deaths and a day of death times, so that sorts and groups have work.
async fn fill(conn: &Connection, n: u32, body: usize) -> Result<()> {
    let ch = conn.create_channel().await?;
    ch.confirm_select(ConfirmSelectOptions::default()).await?;
    ch.queue_declare(
        QUEUE.into(),
        QueueDeclareOptions {
            durable: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await?;
    let reasons = ["rejected", "expired", "maxlen"];
    let mut pending = Vec::with_capacity(2000);
    for i in 0..n {
        let reason = reasons[i as usize % 3];
        let mut death = FieldTable::default();
        death.insert("count".into(), AMQPValue::LongLongInt(1 + i64::from(i % 5)));
        death.insert("reason".into(), AMQPValue::LongString(reason.into()));
        death.insert("queue".into(), AMQPValue::LongString("orders".into()));
        death.insert("exchange".into(), AMQPValue::LongString("".into()));
        death.insert(
            "routing-keys".into(),
            AMQPValue::FieldArray(FieldArray::from(vec![AMQPValue::LongString(
                LongString::from("orders"),
            )])),
        );
        let when = 1_764_000_000 + u64::from((i.wrapping_mul(7919)) % 86_400);
        death.insert("time".into(), AMQPValue::Timestamp(when));
        let mut h = FieldTable::default();
        h.insert(
            "x-death".into(),
            AMQPValue::FieldArray(FieldArray::from(vec![AMQPValue::FieldTable(death)])),
        );
        h.insert(
            "x-first-death-queue".into(),
            AMQPValue::LongString("orders".into()),
        );
        h.insert(
            "x-first-death-reason".into(),
            AMQPValue::LongString(reason.into()),
        );
        let props = BasicProperties::default()
            .with_message_id(format!("order-{i:08}").into())
            .with_content_type("application/json".into())
            .with_delivery_mode(2)
            .with_headers(h);
        let mut payload = format!("{{\"order\": {i}, \"note\": \"").into_bytes();
        payload.resize(body.saturating_sub(2), b'x');
        payload.extend_from_slice(b"\"}");
        pending.push(
            ch.basic_publish(
                "".into(),
                QUEUE.into(),
                BasicPublishOptions::default(),
                &payload,
                props,
            )
            .await?,
        );
        if pending.len() >= 2000 {
            for c in pending.drain(..) {
                c.await?;
            }
        }
    }
    for c in pending {
        c.await?;
    }
    let _ = ch.close(200, "filled".into()).await;
    Ok(())
}

fn main() -> Result<()> {
    // As the binary runs (`cli::main`).
    warren::tune_allocator();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rt = tokio::runtime::Runtime::new()?;
    if args.first().map(String::as_str) == Some("--measure") {
        let vhost = args.get(1).context("--measure VHOST LIMIT")?.clone();
        let limit: usize = args.get(2).context("--measure VHOST LIMIT")?.parse()?;
        return rt.block_on(measure(Broker::from_env(vhost), limit));
    }
    let n: u32 = args.first().map_or(Ok(1_000_000), |a| a.parse())?;
    let limits: Vec<usize> = match args.get(1) {
        Some(l) => l.split(',').map(str::parse).collect::<Result<_, _>>()?,
        None => vec![100_000, 1_000_000],
    };
    let body: usize = env_or("BENCH_BODY", "1024").parse()?;
    let b = Broker::from_env(format!("warren-bench-bigdlq-{}", std::process::id()));
    rt.block_on(async {
        b.vhost(reqwest::Method::PUT).await?;
        let result = publish_and_read(&b, n, body, &limits).await;
        if std::env::var_os("BENCH_KEEP").is_some() {
            // For more reads of the same messages: `bench_big_dlq --measure VHOST N`.
            println!("kept {} (BENCH_KEEP): delete it when done", b.vhost);
            return result;
        }
        // Right after a read of a million, the broker (busy requeuing it) has closed the
        // connection under the DELETE ("connection closed before message completed", twice
        // here); a minute later the same DELETE took 43 ms. So: tried again for two minutes.
        let mut deleted = b.vhost(reqwest::Method::DELETE).await;
        for _ in 0..24 {
            if deleted.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_secs(5)).await;
            deleted = Broker::from_env(b.vhost.clone())
                .vhost(reqwest::Method::DELETE)
                .await;
        }
        let deleted = deleted.with_context(|| format!("delete the vhost {} by hand", b.vhost));
        result.and(deleted)
    })
}

async fn publish_and_read(b: &Broker, n: u32, body: usize, limits: &[usize]) -> Result<()> {
    let conn =
        warren::broker::amqp::connect(&[b.amqp_url()], &b.vhost, &b.user, &b.pass, None).await?;
    let t = Instant::now();
    fill(&conn, n, body).await?;
    let _ = conn.close(200, "filled".into()).await;
    println!(
        "published {n} dead letters × {body} B into {} in {:.0} s",
        b.vhost,
        t.elapsed().as_secs_f64()
    );
    for &limit in limits {
        let st = std::process::Command::new(std::env::current_exe()?)
            .args(["--measure", &b.vhost, &limit.to_string()])
            .status()?;
        if !st.success() {
            bail!("the read of {limit} failed");
        }
    }
    Ok(())
}

/// The TUI over the worker, as `warren` runs it: its state, a 160×48 test terminal, and the
/// channels to and from the worker.
struct Tui {
    st: State,
    term: Terminal<TestBackend>,
    cmd_tx: tokio::sync::mpsc::Sender<warren::tui::Command>,
    ev_rx: tokio::sync::mpsc::Receiver<warren::tui::Report>,
}

/// What one read and the keys after it measured; printed by [`Figures::print`].
struct Figures {
    limit: usize,
    rows: usize,
    read: Duration,
    frames: usize,
    after_read: f64,
    spilled: u64,
    times: Vec<Duration>,
    ahead: Vec<Duration>,
    sorts: Vec<String>,
    filters: Vec<String>,
    pager: Duration,
}

/// One read of `limit` messages, as the operator does it, then the keys; prints the figures.
async fn measure(b: Broker, limit: usize) -> Result<()> {
    let dir = std::env::temp_dir().join(format!("warren-bench-bigdlq-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    // SAFETY: set before the worker (the only other reader of the environment) starts.
    unsafe {
        std::env::set_var("WARREN_STORE", dir.join("warren.db"));
        std::env::set_var(warren::local::spill::CACHE_ENV, &dir);
    }
    std::fs::write(dir.join("config.toml"), "")?;
    let overrides = Overrides {
        config_path: Some(dir.join("config.toml")),
        amqp_url: Some(b.amqp_url()),
        management_url: Some(b.mgmt_url()),
        vhost: Some(b.vhost.clone()),
        ..Default::default()
    };
    let (cmd_tx, cmd_rx) = tokio::sync::mpsc::channel(64);
    let (ev_tx, ev_rx) = tokio::sync::mpsc::channel(256);
    let worker = tokio::spawn(warren::worker::run(
        warren::worker::Source::Broker(overrides),
        cmd_rx,
        ev_tx,
    ));
    let mut tui = Tui {
        st: State::new(jiff::Timestamp::now(), true, Theme::color()),
        term: Terminal::new(TestBackend::new(160, 48))?,
        cmd_tx,
        ev_rx,
    };
    tui.load_queues().await?;
    let (read, frames) = tui.read_all(limit).await?;
    let rows = tui.st.msgs.browse.as_ref().map_or(0, |b| b.rows.len());
    let spilled = std::fs::read_dir(warren::local::spill::dir())
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum::<u64>()
        })
        .unwrap_or(0);
    let after_read = peak_mib();
    let ahead = tui.orders_ahead()?;
    eprintln!(
        "  after the read: {}; a row is {} B inline (its brief {} B)",
        heap_now(),
        std::mem::size_of::<warren::tui::state::Row>(),
        std::mem::size_of::<warren::domain::brief::Brief>()
    );
    let (times, sorts) = tui.session_keys()?;
    let filters = tui.filters()?;
    let pager = tui.pager()?;
    let figures = Figures {
        limit,
        rows,
        read,
        frames,
        after_read,
        spilled,
        times,
        ahead,
        sorts,
        filters,
        pager,
    };
    figures.print(tui.st.msgs.browse.as_ref().map_or("", |b| b.stop.as_str()));
    let Tui { st, cmd_tx, .. } = tui;
    drop(cmd_tx);
    let _ = tokio::time::timeout(Duration::from_secs(10), worker).await;
    drop(st);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

impl Tui {
    /// Draws a frame if the last step changed what is shown, as the loop does.
    fn draw_if_dirty(&mut self) -> Result<bool> {
        if !self.st.take_dirty() {
            return Ok(false);
        }
        self.term.draw(|f| view(&self.st, f))?;
        Ok(true)
    }

    /// The queue list first, as the operator sees it (the TUI asks for it first), and the
    /// cursor on the benchmark's queue.
    async fn load_queues(&mut self) -> Result<()> {
        self.cmd_tx.send(warren::tui::Command::LoadQueues).await?;
        while !self.st.queues.loaded {
            let r = tokio::time::timeout(Duration::from_secs(60), self.ev_rx.recv())
                .await
                .context("no queue list within 60 s")?
                .context("the worker ended")?;
            match &r {
                warren::tui::Report::Error(f) => bail!("{f}"),
                warren::tui::Report::Connection(c) => eprintln!("connection: {c:?}"),
                _ => {}
            }
            for c in update(&mut self.st, r) {
                self.cmd_tx.send(c).await?;
            }
        }
        let at = self
            .st
            .queue_rows()
            .iter()
            .position(|r| r.name() == QUEUE)
            .context("the queue is not listed")?;
        self.st.queues.cursor = at;
        Ok(())
    }

    /// `:limit N`, then Enter, and every report until the page is read: how long, and how many
    /// frames were drawn meanwhile.
    async fn read_all(&mut self, limit: usize) -> Result<(Duration, usize)> {
        self.st.settings.browse_limit = limit;
        let t = Instant::now();
        for c in update(&mut self.st, key(KeyCode::Enter)) {
            self.cmd_tx.send(c).await?;
        }
        let mut frames = 0;
        while self.st.msgs.loading.is_some()
            || self
                .st
                .msgs
                .browse
                .as_ref()
                .is_none_or(|b| b.rows.is_empty())
        {
            let r = tokio::time::timeout(Duration::from_secs(600), self.ev_rx.recv())
                .await
                .context("no report for 10 minutes")?
                .context("the worker ended")?;
            if let warren::tui::Report::Error(f) = &r {
                bail!("the read failed: {f}");
            }
            if matches!(r, warren::tui::Report::MessagesLoaded { .. }) {
                eprintln!(
                    "  before the last part: peak {:.0} MiB; {}",
                    peak_mib(),
                    heap_now()
                );
            }
            for c in update(&mut self.st, r) {
                self.cmd_tx.send(c).await?;
            }
            if self.draw_if_dirty()? {
                frames += 1;
            }
        }
        Ok((t.elapsed(), frames))
    }

    /// The loop's idle moments after the page is shown: its three orders made ahead, each
    /// step's time (sorted).
    fn orders_ahead(&mut self) -> Result<Vec<Duration>> {
        let mut ahead = Vec::new();
        while self.st.has_idle_work() {
            let t = Instant::now();
            update(&mut self.st, Event::Idle);
            self.draw_if_dirty()?;
            ahead.push(t.elapsed());
        }
        ahead.sort();
        Ok(ahead)
    }

    /// A session's keys: moving, paging, jumping, selecting, groups, the four orders. Each key
    /// press -> frame (sorted), and the sort keys' own.
    fn session_keys(&mut self) -> Result<(Vec<Duration>, Vec<String>)> {
        let mut script: Vec<Event> = Vec::new();
        script.extend((0..200).map(|_| key(KeyCode::Char('j'))));
        script.extend((0..50).map(|_| key(KeyCode::PageDown)));
        script.extend([key(KeyCode::Char('G')), key(KeyCode::Char('g'))]);
        script.extend((0..100).map(|_| key(KeyCode::Char(' '))));
        script.push(key(KeyCode::Char('f')));
        script.extend((0..20).map(|_| key(KeyCode::Char('j'))));
        script.push(key(KeyCode::Char('f')));
        for _ in 0..2 {
            for c in ['2', '2', '3', '3', '4', '4', '1'] {
                script.push(key(KeyCode::Char(c)));
                script.extend((0..10).map(|_| key(KeyCode::Char('j'))));
            }
        }
        script.extend((0..100).map(|_| key(KeyCode::Char('k'))));
        let mut times = Vec::with_capacity(script.len());
        let mut sorts = Vec::new();
        for ev in script {
            let sort = matches!(&ev, Event::Key(k) if matches!(k.code, KeyCode::Char('1'..='4')));
            let label = match &ev {
                Event::Key(k) => format!("{}", k.code),
                _ => String::new(),
            };
            let t = Instant::now();
            update(&mut self.st, ev);
            self.draw_if_dirty()?;
            times.push(t.elapsed());
            if sort {
                sorts.push(format!("{label} {:.1}", ms(t.elapsed())));
            }
        }
        times.sort();
        Ok((times, sorts))
    }

    /// A filter once typing pauses: on what the list keeps, then on the body (read back).
    fn filters(&mut self) -> Result<Vec<String>> {
        let mut filters = Vec::new();
        for text in ["reason:expired", "body:4242,"] {
            update(&mut self.st, key(KeyCode::Char('/')));
            update(
                &mut self.st,
                Event::Key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL)),
            );
            for c in text.chars() {
                update(&mut self.st, key(KeyCode::Char(c)));
            }
            // The settle starts the view; the loop's idle moments make it, a slice each, a frame
            // drawn after each: the slowest of those is what a key pressed meanwhile waits for.
            let t = Instant::now();
            let mut steps = vec![];
            let mut ev = Event::FilterSettle;
            loop {
                let s = Instant::now();
                update(&mut self.st, ev);
                self.draw_if_dirty()?;
                steps.push(s.elapsed());
                if self
                    .st
                    .msgs
                    .browse
                    .as_ref()
                    .is_none_or(|b| b.updating().is_none())
                {
                    break;
                }
                ev = Event::Idle;
            }
            steps.sort();
            let shown = self.st.msgs.browse.as_ref().map_or(0, |b| b.visible.len());
            filters.push(format!(
                "`{text}` whole in {:.0} ms over {} slices (slice -> frame p99 {:.1} ms, max {:.1} ms; {shown} shown)",
                ms(t.elapsed()),
                steps.len(),
                ms(percentile(&steps, 0.99)),
                ms(steps.last().copied().unwrap_or_default())
            ));
            update(&mut self.st, key(KeyCode::Enter));
        }
        Ok(filters)
    }

    /// Opening a message reads it back from the spill file: the detail of the one under the
    /// cursor, and the pager on its body.
    fn pager(&mut self) -> Result<Duration> {
        let t = Instant::now();
        update(&mut self.st, key(KeyCode::Char('v')));
        self.draw_if_dirty()?;
        let pager = t.elapsed();
        update(&mut self.st, key(KeyCode::Char('q')));
        Ok(pager)
    }
}

impl Figures {
    /// The figures of one read; `stop` is why the read stopped where it did (the queue's depth
    /// when it began, the limit, ...).
    fn print(&self, stop: &str) {
        let Figures {
            limit,
            rows,
            read,
            frames,
            after_read,
            spilled,
            ref times,
            ref ahead,
            ref sorts,
            ref filters,
            pager,
        } = *self;
        println!(
            "read {rows} of {limit} requested through the worker into the TUI (release build, 160x48 TestBackend)"
        );
        println!("  stopped: {stop}");
        println!(
            "  time to read all: {:.1} s ({:.0} msg/s), {frames} frames drawn meanwhile",
            read.as_secs_f64(),
            rows as f64 / read.as_secs_f64()
        );
        println!(
            "  peak resident memory (getrusage): {after_read:.0} MiB after the read, {:.0} MiB at the end; spill file {:.0} MiB",
            peak_mib(),
            spilled as f64 / 1024.0 / 1024.0
        );
        println!(
            "  key press -> frame over {} keys: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (goal p99 < 16 ms)",
            times.len(),
            ms(percentile(times, 0.5)),
            ms(percentile(times, 0.99)),
            ms(times.last().copied().unwrap_or_default())
        );
        println!(
            "  the three orders made ahead in {} idle steps of {:.0} ms in all (step -> frame p99 {:.1} ms, max {:.1} ms)",
            ahead.len(),
            ms(ahead.iter().sum()),
            ms(percentile(ahead, 0.99)),
            ms(ahead.last().copied().unwrap_or_default())
        );
        println!("  sort keys (ms, key press -> frame): {}", sorts.join(", "));
        println!("  filter once typing pauses: {}", filters.join("; "));
        println!("  v (pager on a body read back): {:.1} ms", ms(pager));
    }
}
