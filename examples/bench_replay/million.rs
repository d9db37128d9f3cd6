//! `bench_replay --million`: the `warren` binary replays a million messages as a process of its
//! own, and its peak resident memory is printed (a module of `examples/bench_replay.rs`).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::cli_archive::warren_bin;
use super::{Bench, declare, depth, fill, load, purge, rate, version};

/// Peak resident memory of the `warren` binary replaying `n` messages: fills the DLQ (confirms
/// in batches, transient messages to spare the disk), runs `warren replay dlq --yes` as a child,
/// and prints its VmHWM (polled from /proc while it runs, and the kernel's figure for the
/// finished child).
pub(crate) async fn million(b: &Bench, n: u32, body: usize) -> Result<()> {
    let bin = warren_bin()?;
    let conn = b.connect().await?;
    declare(&conn).await?;
    println!(
        "RabbitMQ {} — {n} dead letters × {body} B through {}; {}",
        version(b).await?,
        bin.display(),
        load()
    );
    let t = Instant::now();
    fill(&conn, n, body, false).await?;
    println!(
        "filled in {:.1} s ({:.0} msg/s)",
        t.elapsed().as_secs_f64(),
        rate(n, t.elapsed())
    );
    let dir = std::env::temp_dir().join(format!("warren-bench-million-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    // `BENCH_AUDIT=1`: the run writes the broker's audit stream too (created for it), so its
    // outcome — every moved id — is part of what is measured.
    let audit = std::env::var("BENCH_AUDIT").is_ok_and(|v| v == "1");
    let mut args = b.warren_args();
    args.extend(["replay".to_string(), "dlq".to_string(), "--yes".to_string()]);
    if audit {
        args.push("--create-audit-stream".to_string());
        println!("with the broker audit stream");
    }
    let t = Instant::now();
    let (status, hwm_seen) = replay_watched(&bin, &args, &dir).await?;
    let took = t.elapsed();
    let err = std::fs::read_to_string(dir.join("stderr.txt")).unwrap_or_default();
    // SAFETY: getrusage only writes into the struct it is given.
    let maxrss_kib = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru);
        ru.ru_maxrss
    };
    let moved = depth(&conn, "work").await?;
    let left = depth(&conn, "dlq").await?;
    let last = err
        .rsplit(['\r', '\n'])
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_string();
    println!(
        "warren replay: exit {}, {:.1} s ({:.0} msg/s), moved {moved}, left in the DLQ {left}: {last}",
        status.code().unwrap_or(-1),
        took.as_secs_f64(),
        rate(moved, took)
    );
    println!(
        "peak resident memory (VmHWM): {:.1} MiB (kernel's maxrss of the child {:.1} MiB; goal < 100 MiB); {}",
        hwm_seen as f64 / 1024.0,
        maxrss_kib as f64 / 1024.0,
        load()
    );
    if audit {
        read_back(b, &bin, &dir, &err)?;
    }
    let _ = std::fs::remove_dir_all(&dir);
    purge(&conn).await?;
    let _ = conn.close(200, "bench done".into()).await;
    if moved != n || !status.success() {
        bail!("the replay did not move every message:\n{err}");
    }
    Ok(())
}

/// `warren` with `args` as a child (its store, log and stderr in `dir`), its VmHWM polled every
/// 50 ms until it exits: how it exited, and the highest VmHWM seen (KiB).
async fn replay_watched(
    bin: &Path,
    args: &[String],
    dir: &Path,
) -> Result<(std::process::ExitStatus, u64)> {
    let mut child = std::process::Command::new(bin)
        .args(args)
        .env("WARREN_STORE", dir.join("warren.db"))
        .env("WARREN_LOG_DIR", dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        // A file, not a pipe: progress lines would fill a pipe nobody reads until the end.
        .stderr(std::fs::File::create(dir.join("stderr.txt"))?)
        .spawn()
        .context("starting warren")?;
    let pid = child.id();
    let mut hwm_seen = 0u64;
    let status = loop {
        if let Some(kib) = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmHWM:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|v| v.parse::<u64>().ok())
            })
        {
            hwm_seen = hwm_seen.max(kib);
        }
        if let Some(st) = child.try_wait()? {
            break st;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    Ok((status, hwm_seen))
}

/// `BENCH_AUDIT=1`: what another machine reads of the run (`err`: what the run printed).
fn read_back(b: &Bench, bin: &Path, dir: &Path, err: &str) -> Result<()> {
    // `warren audit --json` with a store of its own, so only the broker's record of the run is
    // seen, its moved ids joined from the stream.
    let t = Instant::now();
    let out = std::process::Command::new(bin)
        .args(b.warren_args())
        .args(["audit", "--json"])
        .env("WARREN_STORE", dir.join("other.db"))
        .env("WARREN_LOG_DIR", dir)
        .stdin(std::process::Stdio::null())
        .output()
        .context("warren audit")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let ids = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["kind"] == "replay" && v["seen"]["broker"] == true)
        .map(|v| v["message_ids"].as_array().map_or(0, Vec::len))
        .sum::<usize>();
    println!(
        "warren audit on another store read the run back from the stream in {:.1} s: {ids} moved ids{}",
        t.elapsed().as_secs_f64(),
        if err.contains("audit record was not written") {
            " — the run said its broker record was NOT written"
        } else {
            ""
        }
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !stderr.trim().is_empty() {
        println!("warren audit said: {}", stderr.trim());
    }
    Ok(())
}
