//! `bench_replay --archive` and `--cli`: the archive round, `warren replay` as a process, and
//! with `--raw` the bare mover as a process too (a module of `examples/bench_replay.rs`).

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use lapin::Connection;
use warren::broker::session::{ReplaySpec, Session};
use warren::config::{self, Config, Overrides};
use warren::store::{AuditStart, Store};

use super::movers::raw_round;
use super::{Bench, Figures, Rig, Way, depth, print_row, rate, record_outcome};

impl Rig<'_> {
    /// `--cli`: `warren replay` as a process on a fresh fill, after Warren's round in this one.
    pub(crate) async fn cli_turn(&self, round: usize, way: Way, f: &mut Figures) -> Result<()> {
        let n = self.o.n;
        self.refill().await?;
        let c0 = self.broker_cpu();
        let (t, cpu) = cli_round(self.b, &self.cli_dir, n).await?;
        let brk = (self.broker_cpu() - c0) * 1e6 / f64::from(n);
        let cli = cpu * 1e6 / f64::from(n);
        print_row(
            round,
            way,
            "warren replay (the CLI, both audits)",
            (t, n),
            cli,
            brk,
        );
        f.cli.push(rate(n, t));
        f.cli_cpu.push(cli);
        f.broker_cpu_cli.push(brk);
        Ok(())
    }

    /// `--archive`: the same messages archived on a fresh fill; `replay_rate` is this round's
    /// replay (whole), which the archive's rate is set against.
    pub(crate) async fn archive_turn(
        &self,
        round: usize,
        way: Way,
        f: &mut Figures,
        replay_rate: f64,
    ) -> Result<()> {
        let n = self.o.n;
        self.refill().await?;
        let a = archive_round(self.b, &self.conn, &self.store, n).await?;
        println!(
            "{round:<6} {:<34} {:<36} {:>8.3} {:>9.0}",
            way.label(),
            "warren archive (engine + audit)",
            a.as_secs_f64(),
            rate(n, a)
        );
        f.archive.push(rate(n, a));
        f.archive_vs_replay.push(rate(n, a) / replay_rate);
        Ok(())
    }
}

/// `warren archive dlq` as the CLI runs it (the engine with the archive action, and the audit)
/// into a fresh `warren.archive` stream; the time of the run, as for the replay.
async fn archive_round(b: &Bench, conn: &Connection, store: &Store, n: u32) -> Result<Duration> {
    use warren::broker::replay::Action;
    use warren::broker::session::Work;
    let overrides = Overrides {
        amqp_url: Some(b.amqp_url()),
        management_url: Some(b.mgmt.to_string()),
        vhost: Some(b.vhost.clone()),
        ..Default::default()
    };
    let target = config::resolve(&Config::default(), &overrides, &|_| None)?;
    let session = Session::open(target).await?;
    let stream = session.handle.target.archive.stream.clone();
    let ch = conn.create_channel().await?;
    let _ = ch
        .queue_delete(stream.as_str().into(), Default::default())
        .await;
    let _ = ch.close(200, "ok".into()).await;
    session
        .handle
        .create_archive()
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let spec = ReplaySpec::all_of("dlq", session.handle.target.settings.replay.window);
    let t = Instant::now();
    let id = store.begin_operation(
        warren::store::Operation::Archive,
        &AuditStart {
            run_id: warren::broker::audit::new_run_id(jiff::Timestamp::now()),
            at: jiff::Timestamp::now(),
            os_user: warren::store::current_os_user(),
            broker_user: session.handle.whoami.name.clone(),
            context: session.handle.target.context.clone(),
            vhost: b.vhost.clone(),
            from_queue: "dlq".into(),
            targets: vec![stream.clone()],
            filter: None,
            group: None,
            requested_limit: None,
            dry_run: false,
            keep_attempts: false,
            clear_expiry: false,
            strip_failure_stamp: false,
        },
    )?;
    let work = Work {
        action: Action::Archive {
            stream: stream.clone(),
            stamp: warren::domain::archive::Stamp {
                from: "dlq".into(),
                by: "bench@guest".into(),
                reason: "benchmark".into(),
            },
            user_id: session.handle.target.credentials.username.clone(),
        },
        limit: u64::from(n),
        allowed_targets: [(String::new(), stream.clone())].into_iter().collect(),
        redirects: Default::default(),
        endpoint_redirects: Default::default(),
        replays: Default::default(),
        first_seen: Default::default(),
        planned_unread: false,
        check_as_met: false,
        bytes: 0,
        rest_queues: Vec::new(),
        carrier: Default::default(),
        carrier_by_head: false,
    };
    let (_tx, rx) = tokio::sync::watch::channel(false);
    let summary = session.run_job(&spec, work, rx, |_| {}).await?;
    record_outcome(store, id, &summary)?;
    let took = t.elapsed();
    if summary.progress.moved != u64::from(n) {
        bail!(
            "warren archived {} of {n}: {:?}",
            summary.progress.moved,
            summary.stop
        );
    }
    Ok(took)
}

/// The bare mover as a process of its own (`BENCH_RAW_CHILD`, started by [`raw_process_round`]):
/// it starts, opens its two connections side by side, moves, closes — what `warren replay` as a
/// process pays around its own move, without anything Warren does besides.
pub(crate) async fn raw_child() -> Result<()> {
    let var = |k: &str| std::env::var(k).with_context(|| format!("{k} not set"));
    let (url, vhost, user, pass) = (
        var("BENCH_RAW_URL")?,
        var("BENCH_RAW_VHOST")?,
        var("BENCH_RAW_USER")?,
        var("BENCH_RAW_PASS")?,
    );
    let n: u32 = var("BENCH_RAW_CHILD")?.parse()?;
    let connect =
        || warren::broker::amqp::connect(std::slice::from_ref(&url), &vhost, &user, &pass, None);
    let (c, p) = tokio::join!(connect(), connect());
    let (c, p) = (c?, p?);
    raw_round(&c, &p, n).await?;
    let _ = tokio::join!(c.close(200, "done".into()), p.close(200, "done".into()));
    Ok(())
}

/// `--cli` with `--raw`: [`raw_child`] timed from spawn to exit, as [`cli_round`] times `warren
/// replay`; its CPU.
pub(crate) async fn raw_process_round(b: &Bench, n: u32) -> Result<(Duration, f64)> {
    let c0 = children_cpu();
    let t = Instant::now();
    let out = tokio::process::Command::new(std::env::current_exe()?)
        .env("BENCH_RAW_CHILD", n.to_string())
        .env("BENCH_RAW_URL", b.amqp_url())
        .env("BENCH_RAW_VHOST", &b.vhost)
        .env("BENCH_RAW_USER", &b.user)
        .env("BENCH_RAW_PASS", &b.pass)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .context("starting the bare mover")?;
    let took = t.elapsed();
    if !out.status.success() {
        bail!(
            "the bare mover failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    all_moved(b, n, "the bare mover", "").await?;
    Ok((took, children_cpu() - c0))
}

/// The `warren` binary beside this bench's directory (`target/release/warren`), or `BENCH_WARREN`.
pub(crate) fn warren_bin() -> Result<std::path::PathBuf> {
    let bin = match std::env::var_os("BENCH_WARREN") {
        Some(p) => std::path::PathBuf::from(p),
        None => std::env::current_exe()?
            .parent()
            .and_then(|p| p.parent())
            .map(|p| p.join("warren"))
            .context("where is the warren binary? set BENCH_WARREN")?,
    };
    if !bin.exists() {
        bail!(
            "{} not found: `cargo build --release` first (or set BENCH_WARREN)",
            bin.display()
        );
    }
    Ok(bin)
}

/// `--cli`: `warren replay dlq --yes` as the operator runs it — a process of its own, its
/// store (kept across rounds, as an operator's is), the broker's audit stream written at the
/// start and with every moved id at the end. Timed from spawn to exit; its CPU and the broker's.
async fn cli_round(b: &Bench, dir: &std::path::Path, n: u32) -> Result<(Duration, f64)> {
    let bin = warren_bin()?;
    let c0 = children_cpu();
    let t = Instant::now();
    let out = tokio::process::Command::new(&bin)
        .args(b.warren_args())
        .args(["--create-audit-stream", "replay", "dlq", "--yes"])
        .env("WARREN_STORE", dir.join("warren.db"))
        // A log directory given to the bench is the child's too (its step timings at
        // `WARREN_LOG=warren=debug`); the rounds' scratch one otherwise.
        .env(
            "WARREN_LOG_DIR",
            std::env::var_os("WARREN_LOG_DIR").unwrap_or_else(|| dir.as_os_str().to_owned()),
        )
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .context("starting warren")?;
    let took = t.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!("warren replay failed ({}): {err}", out.status);
    }
    if err.contains("not written") || err.contains("NOT COMPLETE") {
        bail!("warren replay's audit was not all written: {err}");
    }
    all_moved(b, n, "warren replay", &err).await?;
    Ok((took, children_cpu() - c0))
}

/// Fails unless `work` holds all `n` messages that `who` moved (`said`: what it printed).
async fn all_moved(b: &Bench, n: u32, who: &str, said: &str) -> Result<()> {
    let conn = b.connect().await?;
    let moved = depth(&conn, "work").await?;
    let _ = conn.close(200, "counted".into()).await;
    if moved != n {
        bail!("{who} moved {moved} of {n}: {said}");
    }
    Ok(())
}

/// CPU seconds of this process's children that have been waited for.
fn children_cpu() -> f64 {
    // SAFETY: getrusage only writes into the struct it is given.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru);
        ru
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(ru.ru_utime) + secs(ru.ru_stime)
}
