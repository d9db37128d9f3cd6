//! Which queue first, and a watch that can wake someone: `warren queues` with its urgency
//! columns and `warren watch`. The figures come from `domain::urgency`, the alerts and the
//! Prometheus text from `domain::watch`; here are only the listings, the store and the output.

use std::collections::HashMap;
use std::io::Write as _;
use std::time::Duration;

use jiff::Timestamp;
use serde_json::json;

use super::args::{ConnArgs, WatchArgs, WatchFormat};
use super::commands::{self, open};
use super::{Failure, exit};
use crate::broker::config;
use crate::broker::session::{self, ReadConsent, Session};
use crate::domain::discovery::{BrokerVersion, Discovery, DlqInfo};
use crate::domain::sanitize::one_line;
use crate::domain::urgency::{self, Figures, History, ReadHead, Sample, SortBy};
use crate::domain::watch::{GroupLook, Look, Threshold, Watcher};
use crate::store::Store;

/// `--vhost '*'`: every vhost of the context.
pub const EVERY_VHOST: &str = "*";

/// One vhost's dead-letter queues with their figures.
struct Place {
    vhost: String,
    discovery: Discovery,
    figures: Vec<Figures>,
}

fn every_vhost(c: &ConnArgs) -> bool {
    c.vhost.as_deref() == Some(EVERY_VHOST)
}

/// The discovery of the scope: the session's vhost, or every vhost from one listing of each
/// kind.
async fn discover(s: &Session, all: bool) -> Result<Vec<(String, Discovery)>, Failure> {
    if all {
        s.discover_all().await.map_err(commands::broker_failure)
    } else {
        let d = s.discover().await.map_err(commands::broker_failure)?;
        Ok(vec![(s.vhost().to_string(), d)])
    }
}

/// The session for the scope. With `--vhost '*'` the management session is opened for the
/// default vhost (listings name every vhost; reads open a session per vhost, see `Sessions`).
async fn open_scope(c: &ConnArgs) -> Result<Session, Failure> {
    if every_vhost(c) {
        let mut c = c.clone();
        c.vhost = None;
        open(&c).await
    } else {
        open(c).await
    }
}

/// Histories of a place's dead-letter queues: the store's last hour (on the first look), this
/// listing's depths added (and recorded in the store, thinned).
fn histories(
    st: Option<&Store>,
    key: &str,
    d: &Discovery,
    kept: &mut HashMap<String, History>,
    now: Timestamp,
) {
    let depths = urgency::dlq_depths(d);
    if let Some(st) = st {
        match st.depth_history(key, &depths, now) {
            Ok(samples) if kept.is_empty() => {
                for (q, s) in samples {
                    kept.insert(q, History::from_samples(s));
                }
            }
            Ok(_) => {}
            Err(e) => crate::errln!("warren: {}", one_line(&e.to_string(), 400)),
        }
    }
    for (q, depth) in depths {
        kept.entry(q).or_default().record(Sample { at: now, depth });
    }
}

fn heads(st: Option<&Store>, key: &str) -> HashMap<String, ReadHead> {
    st.and_then(|st| st.read_heads(key).ok())
        .unwrap_or_default()
}

/// `warren queues`: every dead-letter queue of the scope with its urgency, most urgent first.
pub async fn queues(c: &ConnArgs, json: bool, all: bool, sort: SortBy) -> Result<i32, Failure> {
    let s = open_scope(c).await?;
    let every = every_vhost(c);
    let now = Timestamp::now();
    let st = Store::open_default().ok();
    let mut places = Vec::new();
    for (vhost, d) in discover(&s, every).await? {
        let key = s.memory_key_of(&vhost);
        let mut kept = HashMap::new();
        histories(st.as_ref(), &key, &d, &mut kept, now);
        let figures = urgency::dlq_figures(&d, &kept, &heads(st.as_ref(), &key), now);
        places.push(Place {
            vhost,
            discovery: d,
            figures,
        });
    }
    print_queues(
        &places,
        s.overview.features.version,
        json,
        all,
        every,
        sort,
        now,
    );
    Ok(exit::OK)
}

#[allow(clippy::too_many_arguments)]
fn print_queues(
    places: &[Place],
    version: Option<BrokerVersion>,
    json: bool,
    all: bool,
    every: bool,
    sort: SortBy,
    now: Timestamp,
) {
    // Every vhost's queues in one order.
    let rows: Vec<(&Place, &DlqInfo, Figures)> = places
        .iter()
        .flat_map(|p| {
            p.discovery
                .dead_letter_queues
                .iter()
                .zip(p.figures.iter().copied())
                .map(move |(q, f)| (p, q, f))
        })
        .collect();
    let names: Vec<String> = rows
        .iter()
        .map(|(p, q, _)| {
            if every {
                format!("{}/{}", p.vhost, q.name)
            } else {
                q.name.clone()
            }
        })
        .collect();
    // Every vhost: the vhost in a column of its own, as wide as the longest needs.
    let vhost_w = if every {
        places
            .iter()
            .map(|p| one_line(&p.vhost, 60).chars().count())
            .max()
            .unwrap_or(0)
    } else {
        0
    };
    let vhost_cell = |v: &str| {
        if every {
            format!("{:<vhost_w$} ", one_line(v, 60))
        } else {
            String::new()
        }
    };
    let keyed: Vec<(&str, Figures)> = rows
        .iter()
        .zip(&names)
        .map(|((_, _, f), n)| (n.as_str(), *f))
        .collect();
    let order = urgency::order(&keyed, sort, false);
    if !json && !rows.is_empty() {
        let mark = |s: SortBy| if s == sort { "▼" } else { "" };
        crate::outln!(
            "{}{:<40} {:<8} {:<12} {:>7} {:>10} {:>6} {:>6} {:>9}  from",
            vhost_cell("vhost"),
            format!("name{}", mark(SortBy::Name)),
            "kind",
            "convention",
            format!("depth{}", mark(SortBy::Depth)),
            // Urgency is growth first.
            format!(
                "growth{}",
                if sort == SortBy::Urgency {
                    "▼"
                } else {
                    mark(SortBy::Growth)
                }
            ),
            format!("age{}", mark(SortBy::Age)),
            format!("last{}", mark(SortBy::LastArrival)),
            "consumers",
        );
    }
    for i in order {
        let (p, q, f) = &rows[i];
        if json {
            commands::print_line(&json!({
                "vhost": p.vhost,
                "name": q.name,
                "kind": q.kind.label(),
                "convention": q.convention.as_str(),
                "depth": q.depth,
                "queue_type": q.queue_type.as_str(),
                "feeders": q.feeders,
                "delivery_limit": q.delivery_limit,
                "browsing_spends_deliveries": q.limit_applies(version),
                "growth_per_min": f.growth_per_min,
                "oldest_age_secs": f.oldest.map(|o| o.age_secs(now)),
                "oldest_is_lower_bound": f.oldest.map(|o| o.is_lower_bound()),
                "last_arrival": f.last_arrival.map(|t| t.to_string()),
                "origin_consumers": f.origin_consumers,
            }));
        } else {
            let from = if q.feeders.is_empty() {
                String::new()
            } else {
                format!("from {}", q.feeders.join(", "))
            };
            let marker = if q.limit_applies(version) {
                format!(
                    "  [quorum, delivery limit {}]",
                    q.delivery_limit.unwrap_or(0)
                )
            } else {
                String::new()
            };
            crate::outln!(
                "{}{:<40} {:<8} {:<12} {:>7} {:>10} {:>6} {:>6} {:>9}  {}{}",
                vhost_cell(&p.vhost),
                one_line(&q.name, 40),
                q.kind.label(),
                q.convention.as_str(),
                q.depth.map_or("?".to_string(), |d| d.to_string()),
                urgency::growth_text(f.growth_per_min),
                urgency::age_text(f.oldest, now),
                urgency::last_text(f.last_arrival, now),
                f.origin_consumers
                    .map_or("?".to_string(), |n| n.to_string()),
                one_line(&from, 120),
                marker
            );
        }
    }
    if all {
        for p in places {
            commands::print_other_queues(&p.discovery, json, every.then_some(p.vhost.as_str()));
        }
    }
    if !json && rows.is_empty() {
        crate::outln!(
            "no dead-letter queues in {}",
            if every { "any vhost" } else { "this vhost" }
        );
    }
}

/// Sessions for reading, one per vhost, opened on first need.
struct Sessions<'a> {
    c: &'a ConnArgs,
    main: &'a Session,
    others: HashMap<String, Result<Session, String>>,
}

impl Sessions<'_> {
    async fn of(&mut self, vhost: &str) -> Result<&Session, String> {
        if vhost == self.main.vhost() {
            return Ok(self.main);
        }
        if !self.others.contains_key(vhost) {
            let mut o = commands::overrides(self.c);
            o.vhost = Some(vhost.to_string());
            let opened = match config::load(&o) {
                Ok((_, target)) => Session::open(target).await.map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            self.others.insert(vhost.to_string(), opened);
        }
        match self.others.get(vhost) {
            Some(Ok(s)) => Ok(s),
            Some(Err(e)) => Err(e.clone()),
            None => Err("no session".into()),
        }
    }
}

/// Reads `q` for its failure groups where a read is free, and records what the read found.
/// `Err`: why it was not read.
async fn read_groups(
    s: &Session,
    st: Option<&Store>,
    q: &DlqInfo,
    limit: usize,
    now: Timestamp,
) -> Result<(Vec<GroupLook>, ReadHead), String> {
    if q.limit_applies(s.overview.features.version) {
        return Err(format!(
            "not read: a {} queue with a delivery limit of {}, where every read spends deliveries (`warren protect {}` makes it free to read)",
            q.queue_type.as_str(),
            q.delivery_limit.unwrap_or(0),
            one_line(&q.name, 80)
        ));
    }
    let page = s
        .browse(&q.name, limit, ReadConsent::Reuse)
        .await
        .map_err(|e| e.to_string())?;
    let messages = session::into_messages(page);
    let keys: Vec<String> = messages
        .iter()
        .map(crate::domain::identity::message_key)
        .collect();
    let remembered = st
        .and_then(|st| s.remember(st, &q.name, &keys, now).ok())
        .unwrap_or_default();
    let explained = session::explain_all(messages, &remembered, &s.target.settings.conventions);
    let head = head_of(&explained, now);
    if let Some(st) = st {
        let _ = st.record_read_head(&s.memory_key(), &q.name, &head);
    }
    // Watch's new-group alert is about failures: the fingerprint, whatever `--by` a view uses.
    let groups = commands::group(
        &explained,
        crate::domain::grouping::GroupBy::Fingerprint,
        &crate::domain::grouping::WaitQueues::default(),
    )
    .into_iter()
    .map(|g| GroupLook {
        fingerprint: g.first.explanation.fingerprint.key.clone(),
        summary: g.first.explanation.fingerprint.summary.clone(),
        count: g.count,
        // No message of it had been seen before this look.
        // (the store keeps milliseconds).
        new: g
            .first_seen
            .is_some_and(|t| t.as_millisecond() >= now.as_millisecond()),
    })
    .collect();
    Ok((groups, head))
}

/// What a read found: its oldest and newest dead letter as Warren dates them.
fn head_of(explained: &[session::Explained], now: Timestamp) -> ReadHead {
    let since: Vec<Timestamp> = explained.iter().filter_map(session::dead_since).collect();
    ReadHead {
        at: now,
        oldest: since.iter().min().copied(),
        newest: since.iter().max().copied(),
    }
}

/// Remembers what a read of `queue` found (best effort), so `warren queues` can date the
/// queue's oldest dead letter without reading it.
pub fn remember_head(s: &Session, queue: &str, explained: &[session::Explained], now: Timestamp) {
    if let Ok(st) = Store::open_default() {
        let _ = st.record_read_head(&s.memory_key(), queue, &head_of(explained, now));
    }
}

/// `warren watch`.
pub async fn watch(c: &ConnArgs, a: &WatchArgs) -> Result<i32, Failure> {
    if a.format == WatchFormat::Prometheus && !a.once {
        return Err(Failure::usage(
            "--format prometheus prints one reading: use it with --once (e.g. from cron into a node exporter's textfile directory)",
        ));
    }
    let alerts = &a.alert;
    let every = every_vhost(c);
    let s = open_scope(c).await?;
    let st = Store::open_default().ok();
    let mut sessions = Sessions {
        c,
        main: &s,
        others: HashMap::new(),
    };
    let mut watcher = Watcher::new();
    let mut kept: HashMap<String, HashMap<String, History>> = HashMap::new();
    let mut last_depth: HashMap<(String, String), u64> = HashMap::new();
    let mut groups_of: HashMap<(String, String), Vec<GroupLook>> = HashMap::new();
    let mut told_not_read: std::collections::HashSet<(String, String)> = Default::default();
    loop {
        let now = Timestamp::now();
        let places = match discover(&s, every).await {
            Ok(p) => p,
            Err(f) if a.once => return Err(f),
            Err(f) => {
                crate::errln!(
                    "warren: {}; trying again in {} s",
                    one_line(&f.message, 600),
                    a.interval
                );
                tokio::time::sleep(Duration::from_secs(a.interval)).await;
                continue;
            }
        };
        let mut looks = Vec::new();
        for (vhost, d) in &places {
            let key = s.memory_key_of(vhost);
            let k = kept.entry(vhost.clone()).or_default();
            histories(st.as_ref(), &key, d, k, now);
            let heads_now = heads(st.as_ref(), &key);
            let figures = urgency::dlq_figures(d, k, &heads_now, now);
            for (q, mut f) in d.dead_letter_queues.iter().zip(figures) {
                let id = (vhost.clone(), q.name.clone());
                let depth = q.depth.unwrap_or(0);
                // Read again only when something arrived: what was read is still what is there.
                let arrived = last_depth
                    .insert(id.clone(), depth)
                    .is_none_or(|b| depth > b);
                let mut not_read = None;
                if depth > 0 && arrived {
                    let read = match sessions.of(vhost).await {
                        Ok(rs) => read_groups(rs, st.as_ref(), q, a.limit, now).await,
                        Err(e) => Err(format!("not read: {e}")),
                    };
                    match read {
                        Ok((g, head)) => {
                            groups_of.insert(id.clone(), g);
                            f = urgency::figures(
                                k.get(&q.name).unwrap_or(&History::default()),
                                q.depth,
                                Some(head),
                                f.origin_consumers,
                                now,
                            );
                        }
                        Err(why) => {
                            groups_of.remove(&id);
                            not_read = Some(why);
                        }
                    }
                } else if depth == 0 {
                    groups_of.remove(&id);
                } else if let Some(g) = groups_of.get_mut(&id) {
                    // Unchanged since the last read: nothing in it is new any more.
                    g.iter_mut().for_each(|g| g.new = false);
                }
                looks.push(Look {
                    vhost: vhost.clone(),
                    queue: q.name.clone(),
                    figures: f,
                    age_secs: f.oldest.map(|o| o.age_secs(now)),
                    groups: groups_of.get(&id).cloned(),
                    not_read,
                });
            }
        }
        for l in &looks {
            if let Some(why) = &l.not_read
                && told_not_read.insert((l.vhost.clone(), l.queue.clone()))
            {
                if a.json {
                    commands::print_line(&json!({
                        "event": "not-read", "vhost": l.vhost, "queue": l.queue, "reason": why,
                    }));
                } else if a.format != WatchFormat::Prometheus {
                    crate::errln!(
                        "warren: {}: failure groups {}",
                        one_line(&l.queue, 120),
                        one_line(why, 400)
                    );
                }
            }
        }
        let changes = watcher.look(&looks, alerts);
        let alerted = changes.iter().any(|ch| ch.alert.is_some());
        if a.format == WatchFormat::Prometheus {
            crate::out!("{}", crate::domain::watch::prometheus(&looks));
        }
        for ch in &changes {
            if a.json {
                commands::print_line(&ch.json());
            } else if a.format != WatchFormat::Prometheus {
                crate::outln!("{} {}", now.strftime("%H:%M:%S"), one_line(&ch.text(), 600));
            }
            if ch.alert.is_some()
                && let Some(cmd) = &a.exec
            {
                run_exec(cmd, &crate::domain::sanitize::json_line(&ch.json())).await;
            }
        }
        if a.once {
            if !a.json && a.format != WatchFormat::Prometheus && !alerted {
                let total: u64 = looks.iter().filter_map(|l| l.figures.depth).sum();
                crate::outln!(
                    "all clear: {} dead-letter queues, {total} dead letters",
                    looks.len()
                );
            }
            return Ok(if alerted { exit::FAILED } else { exit::OK });
        }
        tokio::time::sleep(Duration::from_secs(a.interval)).await;
    }
}

/// Runs `--exec` with the alert as JSON on its standard input; its failure is said, not fatal.
async fn run_exec(cmd: &str, alert_json: &str) {
    let spawned = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .stdin(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            crate::errln!("warren: cannot run --exec command: {e}");
            return;
        }
    };
    if let Some(mut stdin) = child.stdin.take() {
        use tokio::io::AsyncWriteExt as _;
        let _ = stdin.write_all(alert_json.as_bytes()).await;
        let _ = stdin.write_all(b"\n").await;
    }
    match tokio::time::timeout(Duration::from_secs(60), child.wait()).await {
        Ok(Ok(status)) if status.success() => {}
        Ok(Ok(status)) => crate::errln!("warren: --exec command ended with {status}"),
        Ok(Err(e)) => crate::errln!("warren: --exec command: {e}"),
        Err(_) => crate::errln!("warren: --exec command still running after 60 s; stopped it"),
    }
    let _ = std::io::stdout().flush();
}

/// `--alert` for clap.
pub fn alert(s: &str) -> Result<Threshold, String> {
    Threshold::parse(s)
}

/// `--sort` for clap.
pub fn sort(s: &str) -> Result<SortBy, String> {
    SortBy::parse(s)
}
