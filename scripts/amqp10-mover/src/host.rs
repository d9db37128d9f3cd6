//! The machine side of the bench: the broker's process, its CPU time, CPU pinning and the
//! management API. The same method as Warren's `examples/bench_replay.rs`.

use anyhow::{Context, Result, bail};
use std::process::{Command, Stdio};

/// User + system CPU of a process (`"self"` or a PID), in seconds, from `/proc/PID/stat`:
/// the process's figure, which sums every thread.
pub fn cpu_seconds(pid: &str) -> f64 {
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

pub fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| {
            let v: Vec<&str> = l.split_whitespace().take(3).collect();
            format!("load {}", v.join(" "))
        })
        .unwrap_or_else(|_| "load ?".into())
}

/// The PID of the process listening on `port` (the broker's beam.smp), from `ss`.
pub fn listener_pid(port: u16) -> Result<u32> {
    let out = Command::new("ss")
        .args(["-ltnpH", &format!("sport = :{port}")])
        .output()
        .context("running ss to find the broker's process")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let pid = text
        .split("pid=")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|p| p.parse().ok());
    pid.with_context(|| format!("no process listening on port {port} (ss needs root to show it)"))
}

fn affinity(pid: u32) -> Result<String> {
    let out = Command::new("taskset")
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
    let st = Command::new("taskset")
        .args(["-a", "-p", mask, &pid.to_string()])
        .stdout(Stdio::null())
        .status()
        .context("running taskset")?;
    if !st.success() {
        bail!("taskset -a -p {mask} {pid} failed");
    }
    Ok(())
}

/// The broker on CPU 0 and this process on CPU 1 while pinned; every thread's mask as it was
/// otherwise, and always when this is dropped (the brokers are shared).
pub struct Pinning {
    broker: u32,
    broker_mask: String,
    own_mask: String,
    pinned: bool,
}

impl Pinning {
    pub fn new(broker: u32) -> Result<Pinning> {
        Ok(Pinning {
            broker,
            broker_mask: affinity(broker)?,
            own_mask: affinity(std::process::id())?,
            pinned: false,
        })
    }

    pub fn pin(&mut self) -> Result<()> {
        self.pinned = true;
        set_affinity(self.broker, "1")?;
        // `-a`: the runtime's worker threads exist already and keep their own masks.
        set_affinity(std::process::id(), "2")
    }

    pub fn unpin(&mut self) {
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

/// One management API call with `curl` (keeps this crate's dependencies to the two clients).
pub fn api(mgmt: &str, user: &str, pass: &str, method: &str, path: &str, body: &str) -> Result<()> {
    let url = format!("{}{path}", mgmt.trim_end_matches('/'));
    let mut cmd = Command::new("curl");
    // A DELETE of what may be gone already is quiet (`-S` would print the 404).
    let flags = if method == "DELETE" { "-fs" } else { "-fsS" };
    cmd.args([
        flags,
        "-o",
        "/dev/null",
        "-X",
        method,
        "-u",
        &format!("{user}:{pass}"),
    ]);
    if !body.is_empty() {
        cmd.args(["-H", "content-type: application/json", "-d", body]);
    }
    let st = cmd.arg(&url).status().context("running curl")?;
    if !st.success() {
        bail!("{method} {url} failed");
    }
    Ok(())
}

/// The broker's version, from the management API's overview.
pub fn version(mgmt: &str, user: &str, pass: &str) -> String {
    let url = format!("{}/api/overview", mgmt.trim_end_matches('/'));
    let out = Command::new("curl")
        .args(["-fsS", "-u", &format!("{user}:{pass}"), &url])
        .output();
    let text = out
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    text.split("\"rabbitmq_version\":\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap_or("?")
        .to_string()
}

/// TCP data segments this process sent to and received from `port` so far, over its open
/// connections (`ss -tinp`): how many writes reached the broker as separate packets.
pub fn segments(port: u16) -> (u64, u64) {
    let Ok(out) = Command::new("ss")
        .args(["-tinpH", &format!("dport = :{port}")])
        .output()
    else {
        return (0, 0);
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let me = format!("pid={},", std::process::id());
    let field = |line: &str, name: &str| -> u64 {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let (mut sent, mut received) = (0, 0);
    let mut mine = false;
    for line in text.lines() {
        if line.starts_with(char::is_whitespace) {
            if mine {
                sent += field(line, "data_segs_out:");
                received += field(line, "data_segs_in:");
            }
        } else {
            mine = line.contains(&me);
        }
    }
    (sent, received)
}
