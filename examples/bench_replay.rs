//! Replay throughput: Warren's whole replay (session, plan, header rewrite, confirms, batched
//! acks, audit) against the management UI's "Move messages" (a dynamic shovel with the UI's
//! settings) on the same broker, in alternating rounds, two ways: as the machine is (client and
//! broker share every core) and pinned (`taskset`: the broker's beam process on one core, this
//! process on the other — closer to a broker on a machine of its own). Figures are printed, not
//! asserted. And `--million`: the `warren` binary replays 1,000,000 messages and its peak
//! resident memory (VmHWM) is printed.
//!
//! ```sh
//! cargo run --release --example bench_replay                # 20,000 × 1 KiB, 3 rounds, both ways
//! cargo run --release --example bench_replay -- --short     # 5,000, 3 rounds: a quick look
//! cargo build --release && cargo run --release --example bench_replay -- --million
//! ```
//!
//! Options: `--short`, `--shared` / `--pinned` (one way only), `--raw` (also a bare pipelined
//! lapin mover), `--naive` (also the one-at-a-time get/publish/ack loop), `--million [N]`,
//! `--warren-only` (no shovel: to run under a profiler), `--archive` (also archive the same
//! messages after each replay round: archive against replay), `--cli` (also `warren replay` as
//! a process after each Warren round: the operator's whole path, both audits written; needs
//! `cargo build --release` for the binary; with `--raw`, the bare mover runs as a process too,
//! spawn to exit, as the like-for-like yardstick for it).
//! Env: `BENCH_AMQP` (default `amqp://guest:guest@127.0.0.1:5672`), `BENCH_MGMT` (default
//! `http://guest:guest@127.0.0.1:15672`), `BENCH_N` (20000), `BENCH_ROUNDS` (3), `BENCH_BODY`
//! (bytes per message, 1024), `BENCH_NAIVE_N` (5000), `BENCH_WARREN` (the binary for
//! `--million` and `--cli`; default `target/release/warren` beside this example), `BENCH_AUDIT=1` (with
//! `--million`: the run writes the broker's audit stream too), `BENCH_PERSISTENT=0` (transient
//! messages: the rounds without the broker's disk writes, the largest source of their spread),
//! `WARREN_LOG_DIR` (with `--cli`: where
//! the `warren` child logs; `WARREN_LOG=warren=debug` adds each step's time before and after the
//! move).
//!
//! Beside this file, in `examples/bench_replay/`: the movers Warren is set against
//! (`movers.rs`), the `--archive` and `--cli` rounds (`cli_archive.rs`) and `--million`
//! (`million.rs`).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use lapin::options::{
    BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions, QueuePurgeOptions,
};
use lapin::types::{AMQPValue, FieldTable, LongString};
use lapin::{BasicProperties, Connection};
use warren::broker::session::{ReplaySpec, Session};
use warren::config::{self, Config, Overrides};
use warren::store::{AuditOutcome, AuditStart, Store};

#[path = "bench_replay/cli_archive.rs"]
mod cli_archive;
#[path = "support/dead_letter.rs"]
mod dead_letter;
#[path = "bench_replay/million.rs"]
mod million;
#[path = "bench_replay/movers.rs"]
mod movers;

use movers::{naive_round, raw_round, shovel_round};

/// The run's outcome in the local audit, its moved ids read from the run's spool.
fn record_outcome(store: &Store, id: i64, summary: &warren::broker::replay::Summary) -> Result<()> {
    let out = AuditOutcome {
        canary: None,
        edits: Vec::new(),
        targets: Vec::new(),
        at: jiff::Timestamp::now(),
        moved: summary.progress.moved,
        returned: summary.progress.returned,
        failed: summary.progress.failed,
        remaining: summary.progress.remaining,
        message_ids: Vec::new(),
        duplicated: summary.counts.duplicated,
        duplicate_ids: summary.counts.duplicate_ids.clone(),
        outcome: warren::domain::outcome::RunOutcome::Completed,
    };
    let mut unread = None;
    store.finish_replay_with(id, &out, |put| {
        unread = summary.moved_ids.for_each(put).err();
    })?;
    match unread {
        Some(why) => bail!("moved ids not recorded: {why}"),
        None => Ok(()),
    }
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn enc(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

struct Bench {
    amqp: String,
    mgmt: url::Url,
    vhost: String,
    http: reqwest::Client,
    user: String,
    pass: String,
}

impl Bench {
    async fn api(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> Result<()> {
        let mut base = self.mgmt.clone();
        let _ = base.set_username("");
        let _ = base.set_password(None);
        let url = format!("{}{}", base.as_str().trim_end_matches('/'), path);
        let mut req = self
            .http
            .request(method, &url)
            .basic_auth(&self.user, Some(&self.pass));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req
            .send()
            .await
            .with_context(|| format!("management API {url}"))?;
        if !r.status().is_success() {
            bail!("{url}: {}", r.status());
        }
        Ok(())
    }

    fn amqp_url(&self) -> String {
        format!("{}/{}", self.amqp.trim_end_matches('/'), enc(&self.vhost))
    }

    /// The `warren` binary's arguments for this broker and vhost, before its command.
    fn warren_args(&self) -> Vec<String> {
        vec![
            "--amqp-url".into(),
            self.amqp_url(),
            "--management-url".into(),
            self.mgmt.to_string(),
            "--vhost".into(),
            self.vhost.clone(),
        ]
    }

    async fn connect(&self) -> Result<Connection> {
        Ok(warren::broker::amqp::connect(
            &[self.amqp_url()],
            &self.vhost,
            &self.user,
            &self.pass,
            None,
        )
        .await?)
    }
}

async fn depth(conn: &Connection, queue: &str) -> Result<u32> {
    let ch = conn.create_channel().await?;
    let q = ch
        .queue_declare(
            queue.into(),
            QueueDeclareOptions {
                passive: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await?;
    let _ = ch.close(200, "ok".into()).await;
    Ok(q.message_count())
}

/// `n` dead letters of `body_size` bytes with a broker-style death record (rejected in `work`), pipelined.
async fn fill(conn: &Connection, n: u32, body_size: usize, persistent: bool) -> Result<()> {
    let ch = conn.create_channel().await?;
    ch.confirm_select(ConfirmSelectOptions::default()).await?;
    let mut pending = Vec::with_capacity(1000);
    for i in 0..n {
        let h = dead_letter::headers();
        let props = BasicProperties::default()
            .with_message_id(format!("bench-{i}").into())
            .with_content_type("application/json".into())
            .with_delivery_mode(if persistent { 2 } else { 1 })
            .with_headers(h);
        let body: Vec<u8> = (0..body_size)
            .map(|j| b'a' + ((i as usize + j) % 26) as u8)
            .collect();
        pending.push(
            ch.basic_publish(
                "".into(),
                "dlq".into(),
                BasicPublishOptions::default(),
                &body,
                props,
            )
            .await?,
        );
        if pending.len() >= 1000 {
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

async fn purge(conn: &Connection) -> Result<()> {
    let ch = conn.create_channel().await?;
    for q in ["dlq", "work"] {
        ch.queue_purge(q.into(), QueuePurgeOptions::default())
            .await?;
    }
    let _ = ch.close(200, "purged".into()).await;
    Ok(())
}

/// One Warren replay as a user runs it, timed whole: the session (management overview, cluster
/// check), the plan, the audit record, the run and the audit's outcome.
struct WarrenRun {
    whole: Duration,
    preview: Duration,
    examined: u64,
    /// CPU this process spent (user + system), seconds.
    cpu: f64,
    /// The replay alone (`Session::replay`, no session, plan or audit).
    run: Duration,
    /// Opening the session, and recording the outcome (the moved ids) in the local audit.
    session: Duration,
    outcome: Duration,
    /// The broker's CPU (seconds) before the replay (session, plan, audit record) and during it.
    broker_setup: f64,
    broker_run: f64,
}

async fn warren_round(
    b: &Bench,
    store: &Store,
    n: u32,
    broker_cpu: &dyn Fn() -> f64,
) -> Result<WarrenRun> {
    let cpu0 = cpu_seconds("self");
    let broker0 = broker_cpu();
    let t0 = Instant::now();
    let overrides = Overrides {
        amqp_url: Some(b.amqp_url()),
        management_url: Some(b.mgmt.to_string()),
        vhost: Some(b.vhost.clone()),
        ..Default::default()
    };
    let target = config::resolve(&Config::default(), &overrides, &|_| None)?;
    let session = Session::open(target).await?;
    let session_time = t0.elapsed();
    let spec = ReplaySpec::all_of("dlq", session.handle.target.settings.replay.window);
    let tp = Instant::now();
    let preview = session
        .preview_to_run(&spec, |_| Default::default())
        .await?;
    if !preview.refusals.is_empty() {
        bail!("refused: {:?}", preview.refusals);
    }
    let preview_time = tp.elapsed();
    let id = store.begin_replay(&AuditStart {
        run_id: warren::broker::audit::new_run_id(jiff::Timestamp::now()),
        at: jiff::Timestamp::now(),
        os_user: warren::store::current_os_user(),
        broker_user: session.handle.whoami.name.clone(),
        context: session.handle.target.context.clone(),
        vhost: b.vhost.clone(),
        from_queue: "dlq".into(),
        targets: preview.targets.keys().cloned().collect(),
        filter: None,
        group: None,
        requested_limit: None,
        dry_run: false,
        keep_attempts: false,
        clear_expiry: false,
        strip_failure_stamp: false,
    })?;
    let (_tx, rx) = tokio::sync::watch::channel(false);
    let mut events = 0u64;
    let (broker1, t_run) = (broker_cpu(), Instant::now());
    let summary = session
        .replay(&spec, &preview, HashMap::new(), rx, |_| events += 1)
        .await?;
    let (broker2, run) = (broker_cpu(), t_run.elapsed());
    let t_outcome = Instant::now();
    record_outcome(store, id, &summary)?;
    let outcome = t_outcome.elapsed();
    let whole = t0.elapsed();
    if summary.progress.moved != u64::from(n) {
        bail!(
            "warren moved {} of {n}: {:?}",
            summary.progress.moved,
            summary.stop
        );
    }
    Ok(WarrenRun {
        whole,
        preview: preview_time,
        examined: preview.examined,
        cpu: cpu_seconds("self") - cpu0,
        run,
        session: session_time,
        outcome,
        broker_setup: broker1 - broker0,
        broker_run: broker2 - broker1,
    })
}

/// One round's line: its time and rate for `n` messages, and CPU µs a message (client, broker).
fn print_row(round: usize, way: Way, mover: &str, (t, n): (Duration, u32), cli: f64, brk: f64) {
    println!(
        "{round:<6} {:<34} {mover:<36} {:>8.3} {:>9.0} {cli:>9.1} {brk:>9.1}",
        way.label(),
        t.as_secs_f64(),
        rate(n, t),
    );
}

fn rate(n: u32, d: Duration) -> f64 {
    f64::from(n) / d.as_secs_f64()
}

/// Waits (up to 10 s) until the broker has used under a quarter of a core for 250 ms: the
/// persistent fill and the last run's clean-up (its message store's compaction, its disk
/// writes) are over, so no run is charged with the one before it. It did not narrow the spread
/// measured with persistent fills (the broker's CPU per message 65–107 µs between runs of one
/// mover, with it); transient fills (`BENCH_PERSISTENT=0`) did.
async fn quiet(broker_cpu: &dyn Fn() -> f64) {
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        let c0 = broker_cpu();
        tokio::time::sleep(Duration::from_millis(250)).await;
        if broker_cpu() - c0 < 0.0625 {
            return;
        }
    }
}

/// User + system CPU of a process (`"self"` or a PID), in seconds, from `/proc/PID/stat`.
fn cpu_seconds(pid: &str) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // The command name is in parentheses and may hold spaces: count fields after it.
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    (ticks(11) + ticks(12)) / 100.0
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| {
            let v: Vec<&str> = l.split_whitespace().take(3).collect();
            format!("load {}", v.join(" "))
        })
        .unwrap_or_else(|_| "load ?".into())
}

/// The PID of the process listening on `port` (the broker's beam.smp), from `ss`.
fn listener_pid(port: u16) -> Result<u32> {
    let out = std::process::Command::new("ss")
        .args(["-ltnpH", &format!("sport = :{port}")])
        .output()
        .context("running ss to find the broker's process")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let pid = text
        .split("pid=")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|p| p.parse().ok());
    pid.with_context(|| {
        format!("no process found listening on port {port} (ss needs root to show it)")
    })
}

fn affinity(pid: u32) -> Result<String> {
    let out = std::process::Command::new("taskset")
        .args(["-p", &pid.to_string()])
        .output()
        .context("running taskset")?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.rsplit(':')
        .next()
        .map(|m| m.trim().to_string())
        .filter(|m| !m.is_empty())
        .with_context(|| format!("taskset -p {pid} said: {text}"))
}

/// Sets the CPU mask of every thread of `pid` (`taskset -a -p MASK PID`).
fn set_affinity(pid: u32, mask: &str) -> Result<()> {
    let st = std::process::Command::new("taskset")
        .args(["-a", "-p", mask, &pid.to_string()])
        .stdout(std::process::Stdio::null())
        .status()
        .context("running taskset")?;
    if !st.success() {
        bail!("taskset -a -p {mask} {pid} failed");
    }
    Ok(())
}

/// The broker on CPU 0 and this process on CPU 1 while pinned; every thread's mask as it was
/// otherwise, and always when this is dropped (the brokers are shared).
struct Pinning {
    broker: u32,
    broker_mask: String,
    own_mask: String,
    pinned: bool,
}

impl Pinning {
    fn new(amqp_port: u16) -> Result<Pinning> {
        let broker = listener_pid(amqp_port)?;
        Ok(Pinning {
            broker,
            broker_mask: affinity(broker)?,
            own_mask: affinity(std::process::id())?,
            pinned: false,
        })
    }

    fn pin(&mut self) -> Result<()> {
        self.pinned = true;
        set_affinity(self.broker, "1")?;
        set_affinity(std::process::id(), "2")
    }

    fn unpin(&mut self) {
        if std::mem::take(&mut self.pinned) {
            let _ = set_affinity(self.broker, &self.broker_mask);
            let _ = set_affinity(std::process::id(), &self.own_mask);
        }
    }
}

impl Drop for Pinning {
    fn drop(&mut self) {
        self.unpin();
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Way {
    Shared,
    Pinned,
}

impl Way {
    fn label(self) -> &'static str {
        match self {
            Way::Shared => "shared cores",
            Way::Pinned => "pinned (broker cpu0, warren cpu1)",
        }
    }
}

struct Opts {
    n: u32,
    rounds: usize,
    body: usize,
    ways: Vec<Way>,
    raw: bool,
    naive: Option<u32>,
    million: Option<u32>,
    /// `--warren-only`: no shovel rounds (for a profiler).
    warren_only: bool,
    /// `--archive`: also archive (`warren archive`) after each replay round.
    archive: bool,
    /// `--cli`: also run `warren replay` as a process after each replay round
    /// ([`cli_archive::cli_round`]).
    cli: bool,
    /// `BENCH_PERSISTENT=0`: transient messages, no disk in the broker's path.
    persistent: bool,
}

fn opts() -> Result<Opts> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let has = |a: &str| args.iter().any(|x| x == a);
    let short = has("--short");
    let mut ways = Vec::new();
    if !has("--pinned") || has("--shared") {
        ways.push(Way::Shared);
    }
    if !has("--shared") || has("--pinned") {
        ways.push(Way::Pinned);
    }
    let million = args.iter().position(|a| a == "--million").map(|i| {
        args.get(i + 1)
            .and_then(|v| v.parse().ok())
            .unwrap_or(1_000_000)
    });
    Ok(Opts {
        n: env_or("BENCH_N", if short { "5000" } else { "20000" }).parse()?,
        rounds: env_or("BENCH_ROUNDS", "3").parse()?,
        body: env_or("BENCH_BODY", "1024").parse()?,
        ways,
        raw: has("--raw"),
        naive: has("--naive")
            .then(|| env_or("BENCH_NAIVE_N", "5000").parse())
            .transpose()?,
        million,
        warren_only: has("--warren-only"),
        archive: has("--archive"),
        cli: has("--cli"),
        persistent: env_or("BENCH_PERSISTENT", "1") != "0",
    })
}

fn main() -> Result<()> {
    // As the binary runs (`cli::main`).
    warren::tune_allocator();
    if std::env::var_os("BENCH_RAW_CHILD").is_some() {
        return tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?
            .block_on(cli_archive::raw_child());
    }
    // As the CLI runs it (`cli::main`): a multi-threaded runtime; `BENCH_RUNTIME=current` runs
    // the replay on one thread with the reactor instead.
    let runtime = match env_or("BENCH_RUNTIME", "multi").as_str() {
        "current" => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?,
        _ => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?,
    };
    runtime.block_on(bench())
}

async fn bench() -> Result<()> {
    let o = opts()?;
    let mgmt = url::Url::parse(&env_or("BENCH_MGMT", "http://guest:guest@127.0.0.1:15672"))?;
    let user = percent_encoding::percent_decode_str(mgmt.username())
        .decode_utf8_lossy()
        .into_owned();
    let pass = percent_encoding::percent_decode_str(mgmt.password().unwrap_or("guest"))
        .decode_utf8_lossy()
        .into_owned();
    let b = Bench {
        amqp: env_or("BENCH_AMQP", "amqp://guest:guest@127.0.0.1:5672"),
        vhost: format!("warren-bench-{}", std::process::id()),
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()?,
        mgmt,
        user: if user.is_empty() {
            "guest".into()
        } else {
            user
        },
        pass,
    };
    b.api(
        reqwest::Method::PUT,
        &format!("/api/vhosts/{}", enc(&b.vhost)),
        Some(serde_json::json!({})),
    )
    .await?;
    b.api(
        reqwest::Method::PUT,
        &format!("/api/permissions/{}/{}", enc(&b.vhost), enc(&b.user)),
        Some(serde_json::json!({"configure": ".*", "write": ".*", "read": ".*"})),
    )
    .await?;
    let result = match o.million {
        Some(m) => million::million(&b, m, o.body).await,
        None => run(&b, &o).await,
    };
    let _ = b
        .api(
            reqwest::Method::DELETE,
            &format!("/api/vhosts/{}", enc(&b.vhost)),
            None,
        )
        .await;
    result
}

/// `dlq`, fed by `work`'s dead-lettering (so discovery knows where its messages come from, as
/// on a real broker), and `work`.
async fn declare(conn: &Connection) -> Result<()> {
    let ch = conn.create_channel().await?;
    ch.queue_declare(
        "dlq".into(),
        QueueDeclareOptions {
            durable: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await?;
    let mut args = FieldTable::default();
    args.insert(
        "x-dead-letter-exchange".into(),
        AMQPValue::LongString(LongString::from("")),
    );
    args.insert(
        "x-dead-letter-routing-key".into(),
        AMQPValue::LongString(LongString::from("dlq")),
    );
    ch.queue_declare(
        "work".into(),
        QueueDeclareOptions {
            durable: true,
            ..Default::default()
        },
        args,
    )
    .await?;
    let _ = ch.close(200, "declared".into()).await;
    Ok(())
}

async fn version(b: &Bench) -> Result<String> {
    let mut u = b.mgmt.clone();
    let _ = u.set_username("");
    let _ = u.set_password(None);
    let overview: serde_json::Value = b
        .http
        .get(format!("{u}api/overview"))
        .basic_auth(&b.user, Some(&b.pass))
        .send()
        .await?
        .json()
        .await?;
    Ok(overview["rabbitmq_version"]
        .as_str()
        .unwrap_or("?")
        .to_string())
}

fn amqp_port(b: &Bench) -> u16 {
    url::Url::parse(&b.amqp)
        .ok()
        .and_then(|u| u.port())
        .unwrap_or(5672)
}

/// Median, and the spread (max − min) as a share of the median.
fn stats(v: &[f64]) -> (f64, f64, f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let med = s.get(s.len() / 2).copied().unwrap_or(0.0);
    let (lo, hi) = (
        s.first().copied().unwrap_or(0.0),
        s.last().copied().unwrap_or(0.0),
    );
    (med, lo, hi, if med > 0.0 { (hi - lo) / med } else { 0.0 })
}

/// `a[i] / b[i]` for each round: "median× (min–max×)".
fn ratio_line(a: &[f64], b: &[f64]) -> String {
    let r: Vec<f64> = a
        .iter()
        .zip(b)
        .filter(|(_, y)| **y > 0.0)
        .map(|(x, y)| x / y)
        .collect();
    let (m, lo, hi, _) = stats(&r);
    format!("{m:.2}× ({lo:.2}–{hi:.2}×)")
}

#[derive(Default)]
struct Figures {
    warren: Vec<f64>,
    shovel: Vec<f64>,
    raw: Vec<f64>,
    /// Per moved message, µs of CPU: this process during Warren's run, the broker during
    /// Warren's and during the shovel's.
    warren_cpu: Vec<f64>,
    broker_cpu_warren: Vec<f64>,
    broker_cpu_shovel: Vec<f64>,
    /// `--raw`: the broker's CPU per message under the plain lapin mover.
    broker_cpu_raw: Vec<f64>,
    /// Warren's replay alone (no session, plan or audit): rate, and the broker's CPU per message.
    warren_run: Vec<f64>,
    broker_cpu_warren_run: Vec<f64>,
    /// `--archive`: the same engine archiving, right after each replay round, and its rate
    /// over that round's replay rate.
    archive: Vec<f64>,
    archive_vs_replay: Vec<f64>,
    /// `--cli`: the `warren` process's rate, its CPU and the broker's per message.
    cli: Vec<f64>,
    cli_cpu: Vec<f64>,
    broker_cpu_cli: Vec<f64>,
    /// `--cli --raw`: the bare mover as a process ([`cli_archive::raw_process_round`]): rate,
    /// broker CPU.
    raw_process: Vec<f64>,
    broker_cpu_raw_process: Vec<f64>,
}

/// What every round uses: the broker, the options, the connection the fills and checks go over,
/// the local audit and the CLI's scratch directory, and the broker's process (for its CPU).
struct Rig<'a> {
    b: &'a Bench,
    o: &'a Opts,
    conn: Connection,
    store: Store,
    store_path: std::path::PathBuf,
    cli_dir: std::path::PathBuf,
    broker_pid: Option<u32>,
}

impl<'a> Rig<'a> {
    async fn open(b: &'a Bench, o: &'a Opts) -> Result<Rig<'a>> {
        let conn = b.connect().await?;
        declare(&conn).await?;
        let store_path =
            std::env::temp_dir().join(format!("warren-bench-{}.db", std::process::id()));
        let store = Store::open(&store_path)?;
        let cli_dir = std::env::temp_dir().join(format!("warren-bench-cli-{}", std::process::id()));
        std::fs::create_dir_all(&cli_dir)?;
        Ok(Rig {
            b,
            o,
            conn,
            store,
            store_path,
            cli_dir,
            broker_pid: listener_pid(amqp_port(b)).ok(),
        })
    }

    /// The broker's CPU seconds so far; 0 when its process is not known.
    fn broker_cpu(&self) -> f64 {
        self.broker_pid.map_or(0.0, |p| cpu_seconds(&p.to_string()))
    }

    /// `n` fresh dead letters for the next mover, once the broker is quiet again.
    async fn refill(&self) -> Result<()> {
        purge(&self.conn).await?;
        fill(&self.conn, self.o.n, self.o.body, self.o.persistent).await?;
        quiet(&|| self.broker_cpu()).await;
        Ok(())
    }

    /// One round one way: Warren and the shovel (who goes first alternates), and with `--raw`
    /// the bare movers.
    async fn round(&self, round: usize, way: Way, f: &mut Figures) -> Result<()> {
        let o = self.o;
        // Alternate who goes first, so both see the same drift in the machine's load.
        let order: [bool; 2] = if round % 2 == 1 {
            [true, false]
        } else {
            [false, true]
        };
        if o.raw && round.is_multiple_of(2) {
            self.raw_rounds(round, way, f).await?;
        }
        for warren_turn in order {
            if o.warren_only && !warren_turn {
                continue;
            }
            if warren_turn {
                self.warren_turn(round, way, f).await?;
            } else {
                self.shovel_turn(round, way, f).await?;
            }
        }
        // The bare movers go last in odd rounds and first in even ones: the figures are
        // compared round by round, and neither side always follows the other's backlog.
        if o.raw && round % 2 == 1 {
            self.raw_rounds(round, way, f).await?;
        }
        Ok(())
    }

    /// Warren's replay in this process, timed whole and in parts; then, each on a fresh fill,
    /// `--cli`'s process and `--archive`'s archive.
    async fn warren_turn(&self, round: usize, way: Way, f: &mut Figures) -> Result<()> {
        let n = self.o.n;
        self.refill().await?;
        let c0 = self.broker_cpu();
        let w = warren_round(self.b, &self.store, n, &|| self.broker_cpu()).await?;
        let brk = (self.broker_cpu() - c0) * 1e6 / f64::from(n);
        let cli = w.cpu * 1e6 / f64::from(n);
        println!(
            "{round:<6} {:<34} {:<36} {:>8.3} {:>9.0} {:>9.1} {:>9.1}   (plan {:.3} s, {} read first; the replay alone {:.3} s = {:.0} msg/s, broker {:.1} µs/m; before it {:.1} µs/m; session {:.3} s, outcome {:.3} s)",
            way.label(),
            "warren replay (whole, audit on)",
            w.whole.as_secs_f64(),
            rate(n, w.whole),
            cli,
            brk,
            w.preview.as_secs_f64(),
            w.examined,
            w.run.as_secs_f64(),
            rate(n, w.run),
            w.broker_run * 1e6 / f64::from(n),
            w.broker_setup * 1e6 / f64::from(n),
            w.session.as_secs_f64(),
            w.outcome.as_secs_f64()
        );
        f.warren_run.push(rate(n, w.run));
        f.broker_cpu_warren_run
            .push(w.broker_run * 1e6 / f64::from(n));
        f.warren.push(rate(n, w.whole));
        f.warren_cpu.push(cli);
        f.broker_cpu_warren.push(brk);
        if self.o.cli {
            self.cli_turn(round, way, f).await?;
        }
        if self.o.archive {
            self.archive_turn(round, way, f, rate(n, w.whole)).await?;
        }
        Ok(())
    }

    /// The management UI's "Move messages" (a shovel) on a fresh fill.
    async fn shovel_turn(&self, round: usize, way: Way, f: &mut Figures) -> Result<()> {
        let n = self.o.n;
        self.refill().await?;
        let c0 = self.broker_cpu();
        let s = shovel_round(self.b, &self.conn, round, n).await?;
        let brk = (self.broker_cpu() - c0) * 1e6 / f64::from(n);
        println!(
            "{round:<6} {:<34} {:<36} {:>8.3} {:>9.0} {:>9} {:>9.1}",
            way.label(),
            "shovel (UI \"Move messages\")",
            s.as_secs_f64(),
            rate(n, s),
            "-",
            brk
        );
        f.shovel.push(rate(n, s));
        f.broker_cpu_shovel.push(brk);
        Ok(())
    }

    /// `--raw`: the bare mover in this process, and with `--cli` as a process of its own, each on
    /// a fresh fill; their figures go into `f` beside Warren's of the same round.
    async fn raw_rounds(&self, round: usize, way: Way, f: &mut Figures) -> Result<()> {
        let (b, conn, n) = (self.b, &self.conn, self.o.n);
        self.refill().await?;
        let pconn = b.connect().await?;
        let cpu0 = cpu_seconds("self");
        let c0 = self.broker_cpu();
        let t = raw_round(conn, &pconn, n).await?;
        let brk = (self.broker_cpu() - c0) * 1e6 / f64::from(n);
        let cli = (cpu_seconds("self") - cpu0) * 1e6 / f64::from(n);
        let _ = pconn.close(200, "done".into()).await;
        print_row(
            round,
            way,
            "plain lapin, pipelined (no rewrite)",
            (t, n),
            cli,
            brk,
        );
        f.raw.push(rate(n, t));
        f.broker_cpu_raw.push(brk);
        if self.o.cli {
            self.refill().await?;
            let c0 = self.broker_cpu();
            let (t, cpu) = cli_archive::raw_process_round(b, n).await?;
            let brk = (self.broker_cpu() - c0) * 1e6 / f64::from(n);
            print_row(
                round,
                way,
                "plain lapin as a process (spawn→exit)",
                (t, n),
                cpu * 1e6 / f64::from(n),
                brk,
            );
            f.raw_process.push(rate(n, t));
            f.broker_cpu_raw_process.push(brk);
        }
        Ok(())
    }

    /// `--naive`: the one-at-a-time loop over `naive_n` messages, once, on shared cores.
    async fn naive(&self, naive_n: u32) -> Result<()> {
        purge(&self.conn).await?;
        fill(&self.conn, naive_n, self.o.body, self.o.persistent).await?;
        let t = naive_round(&self.conn, naive_n).await?;
        println!(
            "{:<6} {:<34} {:<36} {:>8.3} {:>9.0}   ({naive_n} messages)",
            "1",
            Way::Shared.label(),
            "one-at-a-time get/publish/ack",
            t.as_secs_f64(),
            rate(naive_n, t)
        );
        Ok(())
    }

    /// The local audit and the CLI's scratch directory removed, the connection closed.
    async fn close(self) {
        drop(self.store);
        let _ = std::fs::remove_file(&self.store_path);
        let _ = std::fs::remove_dir_all(&self.cli_dir);
        let _ = self.conn.close(200, "bench done".into()).await;
    }
}

async fn run(b: &Bench, o: &Opts) -> Result<()> {
    let rig = Rig::open(b, o).await?;
    let mut pinning = if o.ways.contains(&Way::Pinned) {
        Some(Pinning::new(amqp_port(b))?)
    } else {
        None
    };
    print_header(b, o).await?;
    let mut figs: HashMap<&'static str, Figures> = HashMap::new();
    for round in 1..=o.rounds {
        for &way in &o.ways {
            match (way, pinning.as_mut()) {
                (Way::Pinned, Some(p)) => p.pin()?,
                (_, Some(p)) => p.unpin(),
                _ => {}
            }
            let f = figs.entry(way.label()).or_default();
            rig.round(round, way, f).await?;
        }
    }
    if let Some(p) = pinning.as_mut() {
        p.unpin();
    }
    if let Some(naive_n) = o.naive {
        rig.naive(naive_n).await?;
    }
    purge(&rig.conn).await?;
    print_medians(&o.ways, &figs);
    rig.close().await;
    Ok(())
}

/// The broker, the fill and the machine's load, and the rounds' column heads.
async fn print_header(b: &Bench, o: &Opts) -> Result<()> {
    println!(
        "RabbitMQ {} — {} {} dead letters × {} B, {} rounds alternating; {}",
        version(b).await?,
        o.n,
        if o.persistent {
            "persistent"
        } else {
            "transient"
        },
        o.body,
        o.rounds,
        load()
    );
    println!(
        "{:<6} {:<34} {:<36} {:>8} {:>9} {:>9} {:>9}",
        "round", "way", "mover", "seconds", "msgs/s", "cli µs/m", "brk µs/m"
    );
    Ok(())
}

/// Each way's medians over the rounds, and Warren's against the others.
fn print_medians(ways: &[Way], figs: &HashMap<&'static str, Figures>) {
    println!("\nmedians (min–max, spread); {}", load());
    for &way in ways {
        let Some(f) = figs.get(way.label()) else {
            continue;
        };
        let (w, wl, wh, ws) = stats(&f.warren);
        let (s, sl, sh, ss) = stats(&f.shovel);
        println!(
            "  {:<34} warren {w:.0} msg/s ({wl:.0}–{wh:.0}, {:.0}%), shovel {s:.0} msg/s ({sl:.0}–{sh:.0}, {:.0}%)",
            way.label(),
            ws * 100.0,
            ss * 100.0
        );
        if !f.raw.is_empty() {
            print_raw_medians(f, w);
        }
        println!(
            "  {:<34} CPU per message: warren {:.1} µs; broker {:.1} µs under warren, {:.1} µs under the shovel",
            "",
            stats(&f.warren_cpu).0,
            stats(&f.broker_cpu_warren).0,
            stats(&f.broker_cpu_shovel).0
        );
        if !f.archive.is_empty() {
            let (a, al, ah, _) = stats(&f.archive);
            let (r, rl, rh, _) = stats(&f.archive_vs_replay);
            println!(
                "  {:<34} archive {a:.0} msg/s ({al:.0}–{ah:.0}); archive / replay per round {r:.2}× ({rl:.2}–{rh:.2}; goal within 10%)",
                ""
            );
        }
        let goal = if way == Way::Pinned { 1.5 } else { 1.25 };
        println!(
            "  {:<34} warren / shovel = {:.2}× (goal ≥ {goal}×)",
            "",
            w / s
        );
    }
}

/// `--raw`'s medians: Warren (`w`, its whole replay's median) and its parts against the bare
/// mover, in this process and with `--cli` as processes.
fn print_raw_medians(f: &Figures, w: f64) {
    let (r, rl, rh, _) = stats(&f.raw);
    let (wr, wrl, wrh, _) = stats(&f.warren_run);
    println!(
        "  {:<34} plain lapin {r:.0} msg/s ({rl:.0}–{rh:.0}); warren / plain lapin = {:.2}×; broker CPU per message under plain lapin {:.1} µs",
        "",
        w / r,
        stats(&f.broker_cpu_raw).0
    );
    println!(
        "  {:<34} warren's replay alone {wr:.0} msg/s ({wrl:.0}–{wrh:.0}), {:.2}× plain lapin; broker {:.1} µs per message during it",
        "",
        wr / r,
        stats(&f.broker_cpu_warren_run).0
    );
    if !f.cli.is_empty() {
        let (c, cl, ch, _) = stats(&f.cli);
        println!(
            "  {:<34} `warren replay` (the CLI, both audits) {c:.0} msg/s ({cl:.0}–{ch:.0}), {:.2}× plain lapin; its CPU {:.1} µs, the broker's {:.1} µs per message",
            "",
            c / r,
            stats(&f.cli_cpu).0,
            stats(&f.broker_cpu_cli).0
        );
    }
    // Round by round: each ratio is of two runs minutes apart, not of two medians
    // taken across a drifting machine.
    println!(
        "  {:<34} per round (median, min–max): warren whole / plain lapin {}; replay alone / plain lapin {}",
        "",
        ratio_line(&f.warren, &f.raw),
        ratio_line(&f.warren_run, &f.raw)
    );
    if !f.raw_process.is_empty() && !f.cli.is_empty() {
        println!(
            "  {:<34} per round (median, min–max): `warren replay` / plain lapin as a process {}; broker CPU per message, warren's over the process's {}",
            "",
            ratio_line(&f.cli, &f.raw_process),
            ratio_line(&f.broker_cpu_cli, &f.broker_cpu_raw_process)
        );
        let (rp, rpl, rph, _) = stats(&f.raw_process);
        println!(
            "  {:<34} plain lapin as a process {rp:.0} msg/s ({rpl:.0}–{rph:.0}); `warren replay` / it = {:.2}×; broker {:.1} µs per message under it",
            "",
            stats(&f.cli).0 / rp,
            stats(&f.broker_cpu_raw_process).0
        );
    }
}
