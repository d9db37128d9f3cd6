//! The broker's audit stream: what one recorded entry costs a run (a confirmed publish, awaited
//! on its own as a replay does at its start and at its end), and how long `warren audit` takes to
//! read and merge a stream holding many runs.
//!
//! `cargo run --release --example bench_audit` — figures are printed, not asserted.
//! Env: `BENCH_AMQP` (default `amqp://guest:guest@127.0.0.1:5672`), `BENCH_MGMT` (default
//! `http://guest:guest@127.0.0.1:15672`), `BENCH_RUNS` (5000: each writes a start and an outcome
//! listing 20 moved ids).

use std::time::{Duration, Instant};

use anyhow::Result;
use warren::broker::audit::{self, AuditStream, Consent};
use warren::broker::session::Session;
use warren::config::{self, Config, Overrides};
use warren::store::{AuditOutcome, AuditStart};

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn enc(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).copied().unwrap_or_default()
}

async fn run(amqp: &str, mgmt: &str, vhost: &str, runs: usize) -> Result<()> {
    let overrides = Overrides {
        amqp_url: Some(amqp.to_string()),
        management_url: Some(mgmt.to_string()),
        vhost: Some(vhost.to_string()),
        ..Default::default()
    };
    let target = config::resolve(&Config::default(), &overrides, &|_| None)?;
    let s = Session::open(target).await?;
    let t = Instant::now();
    let stream = AuditStream::open(&s, Consent::Create)
        .await
        .map_err(anyhow::Error::msg)?;
    println!(
        "create the stream and open a confirm channel: {:.1} ms",
        t.elapsed().as_secs_f64() * 1000.0
    );
    let mut each = Vec::with_capacity(runs * 2);
    let all = Instant::now();
    for n in 0..runs {
        let run_id = audit::new_run_id(jiff::Timestamp::now());
        let start = AuditStart {
            run_id: run_id.clone(),
            at: jiff::Timestamp::now(),
            os_user: "bench".into(),
            broker_user: "guest".into(),
            context: "default".into(),
            vhost: vhost.to_string(),
            from_queue: format!("q{}.dlq", n % 7),
            targets: vec![format!("q{}", n % 7)],
            filter: None,
            group: None,
            requested_limit: None,
            dry_run: false,
            keep_attempts: false,
            clear_expiry: false,
            strip_failure_stamp: false,
        };
        let out = AuditOutcome {
            canary: None,
            edits: Vec::new(),
            targets: Vec::new(),
            at: jiff::Timestamp::now(),
            moved: 20,
            returned: 0,
            failed: 0,
            remaining: 0,
            message_ids: (0..20).map(|i| format!("id:order-{n}-{i}")).collect(),
            duplicated: 0,
            duplicate_ids: Vec::new(),
            outcome: warren::domain::outcome::RunOutcome::Completed,
        };
        let t = Instant::now();
        stream
            .append("replay", "start", &run_id, &start)
            .await
            .map_err(anyhow::Error::msg)?;
        each.push(t.elapsed());
        let t = Instant::now();
        stream
            .append("replay", "outcome", &run_id, &out)
            .await
            .map_err(anyhow::Error::msg)?;
        each.push(t.elapsed());
    }
    let total = all.elapsed();
    each.sort();
    println!(
        "{} entries appended one at a time, each confirmed: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({:.0} entries/s)",
        each.len(),
        percentile(&each, 0.5).as_secs_f64() * 1000.0,
        percentile(&each, 0.99).as_secs_f64() * 1000.0,
        each.last().copied().unwrap_or_default().as_secs_f64() * 1000.0,
        each.len() as f64 / total.as_secs_f64()
    );
    for round in 1..=3 {
        let t = Instant::now();
        let entries = audit::read(&s).await.map_err(anyhow::Error::msg)?;
        let read = t.elapsed();
        let t = Instant::now();
        let merged = warren::store::merge(Vec::new(), Vec::new(), &entries);
        let merge = t.elapsed();
        println!(
            "round {round}: read {} entries by offset in {:.0} ms (finding the tail included), merged into {} runs in {:.1} ms",
            entries.len(),
            read.as_secs_f64() * 1000.0,
            merged.replays.len(),
            merge.as_secs_f64() * 1000.0
        );
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    let runs: usize = env_or("BENCH_RUNS", "5000").parse()?;
    let amqp = env_or("BENCH_AMQP", "amqp://guest:guest@127.0.0.1:5672");
    let mgmt = env_or("BENCH_MGMT", "http://guest:guest@127.0.0.1:15672");
    let vhost = format!("warren-bench-audit-{}", std::process::id());
    let http = reqwest::Client::new();
    let base = url::Url::parse(&mgmt)?;
    let mut plain = base.clone();
    let _ = plain.set_username("");
    let _ = plain.set_password(None);
    let api = |path: String| format!("{}{path}", plain.as_str().trim_end_matches('/'));
    let (user, pass) = (
        if base.username().is_empty() {
            "guest".to_string()
        } else {
            base.username().to_string()
        },
        base.password().unwrap_or("guest").to_string(),
    );
    http.put(api(format!("/api/vhosts/{}", enc(&vhost))))
        .basic_auth(&user, Some(&pass))
        .json(&serde_json::json!({}))
        .send()
        .await?
        .error_for_status()?;
    http.put(api(format!(
        "/api/permissions/{}/{}",
        enc(&vhost),
        enc(&user)
    )))
    .basic_auth(&user, Some(&pass))
    .json(&serde_json::json!({"configure": ".*", "write": ".*", "read": ".*"}))
    .send()
    .await?
    .error_for_status()?;
    let result = run(&amqp, &mgmt, &vhost, runs).await;
    let _ = http
        .delete(api(format!("/api/vhosts/{}", enc(&vhost))))
        .basic_auth(&user, Some(&pass))
        .send()
        .await;
    result
}
