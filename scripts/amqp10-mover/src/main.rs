//! A bare AMQP 1.0 mover against the bare AMQP 0.9.1 mover on one RabbitMQ 4.x broker: rate
//! and the broker's CPU per moved message, in alternating rounds, with the cores shared and
//! with the broker pinned to one core (see README.md).

mod amqp091;
mod amqp10;
mod host;

use anyhow::{Result, bail};
use std::time::Duration;

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

#[derive(Clone, Copy, PartialEq)]
enum Way {
    Shared,
    Pinned,
}

#[derive(Clone, Copy, PartialEq)]
enum Mover {
    V091,
    V10,
    /// The broker's own local shovel (4.2+): no protocol at all, the floor.
    Local,
}

impl Mover {
    fn label(self) -> &'static str {
        match self {
            Mover::V091 => "AMQP 0.9.1 (lapin)",
            Mover::V10 => "AMQP 1.0 (fe2o3-amqp)",
            Mover::Local => "local shovel (floor)",
        }
    }
}

#[derive(Clone)]
struct Opts {
    amqp: String,
    mgmt: String,
    user: String,
    pass: String,
    n: u32,
    rounds: usize,
    body: usize,
    window: u32,
    /// `BENCH_REWRITE=1`: the 0.9.1 mover rewrites the headers as Warren's replay does.
    rewrite: bool,
    /// `BENCH_FILL=10`: fill over AMQP 1.0 (stored natively) instead of 0.9.1.
    fill10: bool,
    ways: Vec<Way>,
    movers: Vec<Mover>,
}

fn opts() -> Result<Opts> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let has = |a: &str| args.iter().any(|x| x == a);
    let mut ways = Vec::new();
    if !has("--pinned") {
        ways.push(Way::Shared);
    }
    if !has("--shared") {
        ways.push(Way::Pinned);
    }
    let mut movers = vec![Mover::V091, Mover::V10];
    if has("--local-shovel") {
        movers.push(Mover::Local);
    }
    if has("--only-10") {
        movers = vec![Mover::V10];
    } else if has("--only-091") {
        movers = vec![Mover::V091];
    }
    Ok(Opts {
        amqp: env_or("BENCH_AMQP", "amqp://guest:guest@127.0.0.1:5674"),
        mgmt: env_or("BENCH_MGMT", "http://127.0.0.1:15674"),
        user: env_or("BENCH_USER", "guest"),
        pass: env_or("BENCH_PASS", "guest"),
        n: env_or("BENCH_N", "20000").parse()?,
        rounds: env_or("BENCH_ROUNDS", "3").parse()?,
        body: env_or("BENCH_BODY", "1024").parse()?,
        window: env_or("BENCH_WINDOW", "1000").parse()?,
        rewrite: env_or("BENCH_REWRITE", "0") == "1",
        fill10: match env_or("BENCH_FILL", "091").as_str() {
            "091" => false,
            "10" => true,
            other => bail!("BENCH_FILL is 091 or 10, not {other}"),
        },
        ways,
        movers,
    })
}

fn amqp_port(url: &str) -> u16 {
    url.rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches('/').parse().ok())
        .unwrap_or(5672)
}

fn main() -> Result<()> {
    // As Warren's CLI and bench_replay run: a multi-threaded runtime.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(bench())
}

async fn bench() -> Result<()> {
    let o = opts()?;
    let vhost = format!("amqp10-bench-{}", std::process::id());
    let path = format!("/api/vhosts/{vhost}");
    host::api(&o.mgmt, &o.user, &o.pass, "PUT", &path, "{}")?;
    let perms = format!("/api/permissions/{vhost}/{}", o.user);
    let all = r#"{"configure":".*","write":".*","read":".*"}"#;
    let result = match host::api(&o.mgmt, &o.user, &o.pass, "PUT", &perms, all) {
        Ok(()) => run(&o, &vhost).await,
        Err(e) => Err(e),
    };
    let _ = host::api(&o.mgmt, &o.user, &o.pass, "DELETE", &path, "");
    result
}

/// Figures of one (way, mover): rate, the broker's and this process's CPU per message.
#[derive(Default)]
struct Figures {
    rate: Vec<f64>,
    broker_us: Vec<f64>,
    client_us: Vec<f64>,
    segs_out: Vec<f64>,
}

async fn run(o: &Opts, vhost: &str) -> Result<()> {
    let uri091 = format!("{}/{vhost}", o.amqp.trim_end_matches('/'));
    let conn = amqp091::connect(&uri091).await?;
    amqp091::declare(&conn).await?;
    let broker = host::listener_pid(amqp_port(&o.amqp))?;
    if std::env::args().any(|a| a == "--check") {
        return check(o, vhost, &conn, broker).await;
    }
    let mut pinning = host::Pinning::new(broker)?;
    println!(
        "RabbitMQ {} (beam pid {broker}) — {} × {} B filled over {}, window {}, {} rounds alternating; {}",
        host::version(&o.mgmt, &o.user, &o.pass),
        o.n,
        o.body,
        if o.fill10 { "AMQP 1.0" } else { "AMQP 0.9.1" },
        o.window,
        o.rounds,
        host::load()
    );
    println!(
        "{:<6} {:<8} {:<24} {:>8} {:>9} {:>10} {:>10} {:>7} {:>7}",
        "round", "way", "mover", "seconds", "msgs/s", "brk µs/m", "cli µs/m", "seg→/m", "seg←/m"
    );
    let mut figs: Vec<((bool, Mover), Figures)> = Vec::new();
    for round in 1..=o.rounds {
        for &way in &o.ways {
            let pinned = way == Way::Pinned;
            if pinned {
                pinning.pin()?;
            } else {
                pinning.unpin();
            }
            // Alternate who goes first, so both see the same drift in the machine's load.
            let mut order = o.movers.clone();
            if round % 2 == 0 {
                order.reverse();
            }
            for mover in order {
                amqp091::purge(&conn).await?;
                fill(o, vhost, &conn).await?;
                let m = one_move(o, vhost, &conn, mover, broker).await?;
                let (brk, cli) = (m.broker_us, m.client_us);
                let rate = f64::from(o.n) / m.took.as_secs_f64();
                let way_s = if pinned { "pinned" } else { "shared" };
                let per = |k: u64| k as f64 / f64::from(o.n);
                println!(
                    "{round:<6} {way_s:<8} {:<24} {:>8.3} {rate:>9.0} {brk:>10.1} {cli:>10.1} {:>7.2} {:>7.2}   ({})",
                    mover.label(),
                    m.took.as_secs_f64(),
                    per(m.segs_out),
                    per(m.segs_in),
                    host::load()
                );
                let i = match figs.iter().position(|(k, _)| *k == (pinned, mover)) {
                    Some(i) => i,
                    None => {
                        figs.push(((pinned, mover), Figures::default()));
                        figs.len() - 1
                    }
                };
                let f = &mut figs[i].1;
                f.rate.push(rate);
                f.broker_us.push(brk);
                f.client_us.push(cli);
                f.segs_out.push(per(m.segs_out));
            }
        }
    }
    pinning.unpin();
    amqp091::purge(&conn).await?;
    let _ = conn.close(200, "bench done".into()).await;
    summary(&figs);
    Ok(())
}

async fn fill(o: &Opts, vhost: &str, conn: &lapin::Connection) -> Result<()> {
    if !o.fill10 {
        return amqp091::fill(conn, o.n, o.body).await;
    }
    let mut link = amqp10::Link::open(&o.amqp, vhost, "bench-fill").await?;
    let r = amqp10::fill(&mut link, o.n, o.body).await;
    link.close().await;
    r
}

/// One move's figures: its duration, the broker's and this process's CPU per message (µs),
/// and the TCP data segments this process sent to and received from the broker.
struct Measure {
    took: Duration,
    broker_us: f64,
    client_us: f64,
    segs_out: u64,
    segs_in: u64,
}

/// A snapshot of the counters a move is measured by.
struct Counters {
    broker: f64,
    client: f64,
    segs: (u64, u64),
}

impl Counters {
    fn now(broker: &str, port: u16) -> Counters {
        Counters {
            broker: host::cpu_seconds(broker),
            client: host::cpu_seconds("self"),
            segs: host::segments(port),
        }
    }

    fn since(&self, start: &Counters, took: Duration, n: u32) -> Measure {
        let per = |s: f64| s * 1e6 / f64::from(n);
        Measure {
            took,
            broker_us: per(self.broker - start.broker),
            client_us: per(self.client - start.client),
            segs_out: self.segs.0.saturating_sub(start.segs.0),
            segs_in: self.segs.1.saturating_sub(start.segs.1),
        }
    }
}

/// One move, measured from the first credit/consume to the last acceptance/ack (connections
/// are opened before and closed after). Checks every message left `dlq` and reached `work`.
async fn one_move(
    o: &Opts,
    vhost: &str,
    conn: &lapin::Connection,
    mover: Mover,
    broker: u32,
) -> Result<Measure> {
    let (pid, port) = (broker.to_string(), amqp_port(&o.amqp));
    let m = match mover {
        Mover::V091 => {
            let uri = format!("{}/{vhost}", o.amqp.trim_end_matches('/'));
            let pconn = amqp091::connect(&uri).await?;
            let start = Counters::now(&pid, port);
            let window = u16::try_from(o.window)?;
            let took = amqp091::mover(conn, &pconn, o.n, window, o.rewrite).await?;
            let m = Counters::now(&pid, port).since(&start, took, o.n);
            let _ = pconn.close(200, "done".into()).await;
            m
        }
        Mover::V10 => {
            let mut src = amqp10::Link::open(&o.amqp, vhost, "bench-mover-src").await?;
            let mut dst = amqp10::Link::open(&o.amqp, vhost, "bench-mover-dst").await?;
            let start = Counters::now(&pid, port);
            let took = amqp10::mover(&mut src.session, &mut dst.session, o.n, o.window).await?;
            let m = Counters::now(&pid, port).since(&start, took, o.n);
            src.close().await;
            dst.close().await;
            m
        }
        Mover::Local => {
            let start = Counters::now(&pid, port);
            let took = local_shovel(o, vhost, conn).await?;
            Counters::now(&pid, port).since(&start, took, o.n)
        }
    };
    let (left, arrived) = (
        amqp091::depth(conn, "dlq").await?,
        amqp091::depth(conn, "work").await?,
    );
    if left != 0 || arrived != o.n {
        bail!(
            "{}: dlq holds {left}, work {arrived} (expected 0 and {})",
            mover.label(),
            o.n
        );
    }
    Ok(m)
}

/// The broker's local shovel (as `bench_replay` makes the classic one, with `local` for both
/// protocols and its own prefetch: a local shovel takes no `src-prefetch-count`), timed from its creation until `dlq` is empty and `work` holds every message.
async fn local_shovel(o: &Opts, vhost: &str, conn: &lapin::Connection) -> Result<Duration> {
    let path = format!("/api/parameters/shovel/{vhost}/bench-local");
    let body = format!(
        r#"{{"component":"shovel","vhost":"{vhost}","name":"bench-local","value":{{
        "src-protocol":"local","src-uri":"amqp:///{vhost}","src-queue":"dlq",
        "src-delete-after":"queue-length",
        "dest-protocol":"local","dest-uri":"amqp:///{vhost}","dest-queue":"work",
        "dest-add-forward-headers":false,"ack-mode":"on-confirm"}}}}"#
    );
    let t = std::time::Instant::now();
    host::api(&o.mgmt, &o.user, &o.pass, "PUT", &path, &body)?;
    while amqp091::depth(conn, "work").await? < o.n || amqp091::depth(conn, "dlq").await? > 0 {
        if t.elapsed() > Duration::from_secs(300) {
            bail!("the local shovel did not finish in 5 minutes");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let took = t.elapsed();
    // With src-delete-after it removes itself; make sure before the next round.
    let _ = host::api(&o.mgmt, &o.user, &o.pass, "DELETE", &path, "");
    Ok(took)
}

/// `--check`: one message as filled, and as it arrives in `work` after each mover, as an
/// AMQP 0.9.1 consumer sees it (what the mover keeps of a message).
async fn check(o: &Opts, vhost: &str, conn: &lapin::Connection, broker: u32) -> Result<()> {
    let one = Opts { n: 1, ..o.clone() };
    amqp091::purge(conn).await?;
    amqp091::fill(conn, 1, 16).await?;
    println!(
        "as filled:\n  {}",
        amqp091::first_properties(conn, "dlq").await?
    );
    let real = std::env::args().any(|a| a == "--dead-lettered");
    for mover in [Mover::V091, Mover::V10] {
        if real {
            amqp091::dead_letter_one(conn).await?;
        } else {
            amqp091::fill(conn, 1, 16).await?;
        }
        one_move(&one, vhost, conn, mover, broker).await?;
        let props = amqp091::first_properties(conn, "work").await?;
        println!("after {}:\n  {props}", mover.label());
    }
    Ok(())
}

/// Median, min and max.
fn stats(v: &[f64]) -> (f64, f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let med = s.get(s.len() / 2).copied().unwrap_or(0.0);
    (
        med,
        s.first().copied().unwrap_or(0.0),
        s.last().copied().unwrap_or(0.0),
    )
}

fn summary(figs: &[((bool, Mover), Figures)]) {
    println!("\nmedians (min–max); {}", host::load());
    for ((pinned, mover), f) in figs {
        let (r, rl, rh) = stats(&f.rate);
        let (b, bl, bh) = stats(&f.broker_us);
        let (c, cl, ch) = stats(&f.client_us);
        let (g, _, _) = stats(&f.segs_out);
        println!(
            "  {:<8} {:<24} {r:>7.0} msg/s ({rl:.0}–{rh:.0})  broker {b:.1} µs/msg ({bl:.1}–{bh:.1})  client {c:.1} µs/msg ({cl:.1}–{ch:.1})  {g:.2} segments sent/msg",
            if *pinned { "pinned" } else { "shared" },
            mover.label()
        );
    }
}
