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
use super::groups;
use super::{Failure, exit};
use crate::broker::session::{self, ReadConsent, Session};
use crate::config;
use crate::domain::discovery::stuck::Stuck;
use crate::domain::discovery::{BrokerVersion, Discovery, DlqInfo};
use crate::domain::sanitize::one_line;
use crate::domain::urgency::{self, Figures, History, ReadHead, Sample, SortBy};
use crate::domain::watch::{GroupLook, Look, Threshold, Watcher};
use crate::store::Store;

/// One vhost's dead-letter queues with their figures.
struct Place {
    /// The context, with `--context '*'` (else empty).
    context: String,
    version: Option<BrokerVersion>,
    vhost: String,
    discovery: Discovery,
    figures: Vec<Figures>,
}

/// `--vhost '*'`: every vhost of the context.
fn every_vhost(c: &ConnArgs) -> bool {
    commands::overrides(c).every_vhost()
}

/// `--context '*'`: every context of the config file, each its own listing.
fn every_context(c: &ConnArgs) -> bool {
    commands::overrides(c).every_context()
}

/// The scopes to look at: with `--context '*'` one per context of the config file (named),
/// else the one the command line gives (`None`).
fn scopes_of(c: &ConnArgs) -> Result<Vec<(Option<String>, ConnArgs)>, Failure> {
    if !every_context(c) {
        return Ok(vec![(None, c.clone())]);
    }
    let names = config::Config::read(c.config.as_deref())
        .and_then(|cfg| cfg.every_context())
        .map_err(|e| Failure::usage(e.to_string()))?;
    Ok(names
        .into_iter()
        .map(|name| {
            let mut one = c.clone();
            one.context = Some(name.clone());
            (Some(name), one)
        })
        .collect())
}

/// Says that a context could not be looked at (the others are shown).
fn say_unreached(context: &str, why: &str, json: bool) {
    if json {
        commands::print_line(&json!({"event": "unreachable", "context": context, "reason": why}));
    }
    crate::errln!(
        "warren: context '{}' not shown: {}",
        one_line(context, 60),
        one_line(why, 600)
    );
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
    let every = every_vhost(c);
    let contexts = every_context(c);
    let now = Timestamp::now();
    let st = Store::open_default().ok();
    let mut places = Vec::new();
    let scopes = scopes_of(c)?;
    let mut unreached: Vec<Failure> = Vec::new();
    for (context, c) in &scopes {
        let looked = async {
            let s = open_scope(c).await?;
            let found = discover(&s, every).await?;
            Ok::<_, Failure>((s, found))
        }
        .await;
        let (s, found) = match (looked, context) {
            (Ok(l), _) => l,
            (Err(f), None) => return Err(f),
            (Err(f), Some(name)) => {
                say_unreached(name, &f.message, json);
                unreached.push(f);
                continue;
            }
        };
        for (vhost, d) in found {
            let key = s.handle.memory_key_of(&vhost);
            let mut kept = HashMap::new();
            histories(st.as_ref(), &key, &d, &mut kept, now);
            let figures = urgency::dlq_figures(&d, &kept, &heads(st.as_ref(), &key), now);
            places.push(Place {
                context: context.clone().unwrap_or_default(),
                version: s.handle.overview.features.version,
                vhost,
                discovery: d,
                figures,
            });
        }
    }
    if unreached.len() == scopes.len() {
        return Err(Failure::broker(format!(
            "no context could be reached ({}): check the brokers, or name one with --context NAME",
            unreached.len()
        )));
    }
    print_queues(&places, json, all, every, contexts, sort, now);
    Ok(exit::OK)
}

#[allow(clippy::too_many_arguments)]
fn print_queues(
    places: &[Place],
    json: bool,
    all: bool,
    every: bool,
    contexts: bool,
    sort: SortBy,
    now: Timestamp,
) {
    // Every context: each vhost named too (contexts may use different ones).
    let every = every || contexts;
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
            if contexts {
                format!("{}/{}/{}", p.context, p.vhost, q.name)
            } else if every {
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
    let context_w = places
        .iter()
        .map(|p| one_line(&p.context, 60).chars().count())
        .max()
        .unwrap_or(0)
        .max("context".len());
    let vhost_cell = |ctx: &str, v: &str| {
        let mut cell = String::new();
        if contexts {
            cell.push_str(&format!("{:<context_w$} ", one_line(ctx, 60)));
        }
        if every {
            cell.push_str(&format!("{:<vhost_w$} ", one_line(v, 60)));
        }
        cell
    };
    let keyed: Vec<(&str, Figures)> = rows
        .iter()
        .zip(&names)
        .map(|((_, _, f), n)| (n.as_str(), *f))
        .collect();
    let order = urgency::order(&keyed, sort, false);
    if !json && !rows.is_empty() {
        print_queues_header(&vhost_cell("context", "vhost"), sort);
    }
    for i in order {
        let (p, q, f) = &rows[i];
        if json {
            print_queue_json(p, q, f, contexts, now);
        } else {
            print_queue_line(&vhost_cell(&p.context, &p.vhost), p, q, f, now);
        }
    }
    for p in places {
        for s in &p.discovery.stuck {
            print_stuck(p, s, json, contexts, &vhost_cell(&p.context, &p.vhost));
        }
    }
    if all {
        for p in places {
            commands::print_other_queues(&p.discovery, json, every.then_some(p.vhost.as_str()));
        }
    }
    if !json && rows.is_empty() && places.iter().all(|p| p.discovery.stuck.is_empty()) {
        crate::outln!(
            "no dead-letter queues in {}",
            if contexts {
                "any context"
            } else if every {
                "any vhost"
            } else {
                "this vhost"
            }
        );
    }
}

/// The header of `warren queues`, the column it is sorted by marked.
fn print_queues_header(cell: &str, sort: SortBy) {
    let mark = |s: SortBy| if s == sort { "▼" } else { "" };
    crate::outln!(
        "{}{:<40} {:<8} {:<12} {:>7} {:>10} {:>6} {:>6} {:>9}  from",
        cell,
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

/// One dead-letter queue of `warren queues --json`.
fn print_queue_json(p: &Place, q: &DlqInfo, f: &Figures, contexts: bool, now: Timestamp) {
    let version = p.version;
    let mut v = json!({
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
        "consumers": q.consumers,
    });
    if contexts {
        v["context"] = json!(p.context);
    }
    commands::print_line(&v);
}

/// A quorum queue holding dead letters no dead-letter queue takes (at-least-once): listed
/// after the dead-letter queues, whatever the sort, as `stuck`, with how many and why.
fn print_stuck(p: &Place, s: &Stuck, json: bool, contexts: bool, cell: &str) {
    if json {
        let mut v = json!({
            "vhost": p.vhost,
            "name": s.queue,
            "kind": "stuck",
            "queue_type": "quorum",
            "depth": s.depth,
            "stuck_dead_letters": s.count,
            "dead_letter_exchange": s.dead_letter_exchange,
            "why": s.why.code(),
            "why_text": s.explain(),
        });
        if contexts {
            v["context"] = json!(p.context);
        }
        commands::print_line(&v);
        return;
    }
    crate::outln!(
        "{}{:<40} {:<8} {:<12} {:>7}  {} dead letter{} held here, not in a DLQ (at-least-once): {}",
        cell,
        one_line(&s.queue, 40),
        "stuck",
        "broker",
        s.depth.map_or("?".to_string(), |d| d.to_string()),
        s.count,
        if s.count == 1 { "" } else { "s" },
        one_line(&s.explain(), 300)
    );
}

/// One dead-letter queue of `warren queues` as a line; `cell` is its context and vhost columns.
fn print_queue_line(cell: &str, p: &Place, q: &DlqInfo, f: &Figures, now: Timestamp) {
    let version = p.version;
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
        cell,
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

/// Sessions for reading, one per vhost other than the main session's, opened on first need
/// (`Session::open_in`: the main session's connection settings); a failure is kept, so a watch
/// does not try a vhost it cannot open on every look.
struct Sessions {
    /// The scope's command line, for (re)opening its main session.
    c: ConnArgs,
    others: HashMap<String, Result<Session, String>>,
}

impl Sessions {
    async fn of<'a>(&'a mut self, main: &'a Session, vhost: &str) -> Result<&'a Session, String> {
        if vhost == main.vhost() {
            return Ok(main);
        }
        if !self.others.contains_key(vhost) {
            let opened = main.open_in(vhost).await.map_err(|e| e.to_string());
            self.others.insert(vhost.to_string(), opened);
        }
        match self.others.get(vhost) {
            Some(Ok(s)) => Ok(s),
            Some(Err(e)) => Err(e.clone()),
            None => Err("no session".into()),
        }
    }
}

/// What a watch keeps per scope (the one the command line gives, or each context with
/// `--context '*'`): its session once reached, and what it saw.
struct Watched {
    context: Option<String>,
    session: Option<Session>,
    sessions: Sessions,
    kept: HashMap<String, HashMap<String, History>>,
    last_depth: HashMap<(String, String), u64>,
    groups_of: HashMap<(String, String), Vec<GroupLook>>,
    told_not_read: std::collections::HashSet<(String, String)>,
    /// The context's outage was said (said again only after it was reached).
    told_unreached: bool,
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
    if q.limit_applies(s.handle.overview.features.version) {
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
        .and_then(|st| crate::ops::recall(s, st, &q.name, &keys, now).ok())
        .unwrap_or_default();
    let explained =
        session::explain_all(messages, &remembered, &s.handle.target.settings.conventions);
    let head = head_of(&explained, now);
    if let Some(st) = st {
        let _ = st.record_read_head(&s.handle.memory_key(), &q.name, &head);
    }
    // Watch's new-group alert is about failures: the fingerprint, whatever `--by` a view uses.
    let groups = groups::group(
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
    ReadHead::of(now, explained.iter().map(session::arrival))
}

/// Remembers what a read of `queue` found (best effort), so `warren queues` can date the
/// queue's oldest dead letter without reading it.
pub fn remember_head(s: &Session, queue: &str, explained: &[session::Explained], now: Timestamp) {
    if let Ok(st) = Store::open_default() {
        let _ = st.record_read_head(&s.handle.memory_key(), queue, &head_of(explained, now));
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
    let st = Store::open_default().ok();
    let mut scopes: Vec<Watched> = Vec::new();
    for (context, c) in scopes_of(c)? {
        // One scope: not reachable at the start is a failure, as before.
        let session = match &context {
            None => Some(open_scope(&c).await?),
            Some(_) => None,
        };
        scopes.push(Watched {
            context,
            session,
            sessions: Sessions {
                c,
                others: HashMap::new(),
            },
            kept: HashMap::new(),
            last_depth: HashMap::new(),
            groups_of: HashMap::new(),
            told_not_read: Default::default(),
            told_unreached: false,
        });
    }
    let mut watcher = Watcher::new();
    loop {
        let now = Timestamp::now();
        let mut looks = Vec::new();
        let mut stuck = Vec::new();
        let mut failures: Vec<(Option<String>, Failure)> = Vec::new();
        for w in &mut scopes {
            let looked = look_at_scope(w, st.as_ref(), a, every, now, &mut looks, &mut stuck).await;
            if let Err(f) = looked {
                failures.push((w.context.clone(), f));
            }
        }
        if failures.len() == scopes.len() {
            // Nothing reached: one scope's own failure, or every context's.
            let f = match failures.pop() {
                Some((None, f)) => f,
                Some((Some(_), _)) | None => Failure::broker(format!(
                    "no context could be reached ({}): check the brokers, or name one with --context NAME",
                    scopes.len()
                )),
            };
            if a.once {
                return Err(f);
            }
            crate::errln!(
                "warren: {}; trying again in {} s",
                one_line(&f.message, 600),
                a.interval
            );
            tokio::time::sleep(Duration::from_secs(a.interval)).await;
            continue;
        }
        for (context, f) in &failures {
            let Some(name) = context else { continue };
            if let Some(w) = scopes.iter_mut().find(|w| w.context.as_ref() == Some(name))
                && !w.told_unreached
            {
                w.told_unreached = true;
                say_unreached(name, &f.message, a.json);
            }
        }
        let mut changes = watcher.look(&looks, alerts);
        // Always an alert, whatever `--alert` asks for (see `Threshold::Stuck`); but for
        // Prometheus a gauge only, so that a stuck queue does not fail the textfile recipe
        // (`… > warren.prom.tmp && mv …`) just when its figure matters: the scraper alerts.
        if a.format != WatchFormat::Prometheus {
            changes.extend(watcher.look_stuck(&stuck));
        }
        let alerted = changes.iter().any(|ch| ch.alert.is_some());
        if a.format == WatchFormat::Prometheus {
            crate::out!("{}", crate::domain::watch::prometheus(&looks, &stuck));
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

/// One look at a scope (a context, or the one configured): reached again if it was not, its
/// dead-letter queues' figures and failure groups added to `looks`, its queues holding stuck
/// dead letters to `stuck`. `Err`: not reached.
async fn look_at_scope(
    w: &mut Watched,
    st: Option<&Store>,
    a: &WatchArgs,
    every: bool,
    now: Timestamp,
    looks: &mut Vec<Look>,
    stuck: &mut Vec<Stuck>,
) -> Result<(), Failure> {
    if w.session.is_none() {
        w.session = Some(open_scope(&w.sessions.c).await?);
    }
    let Some(s) = w.session.as_ref() else {
        return Ok(());
    };
    let places = discover(s, every).await?;
    w.told_unreached = false;
    let context = w.context.clone().unwrap_or_default();
    let first = looks.len();
    for (vhost, d) in &places {
        stuck.extend(d.stuck.iter().map(|s| Stuck {
            context: context.clone(),
            ..s.clone()
        }));
        let key = s.handle.memory_key_of(vhost);
        let k = w.kept.entry(vhost.clone()).or_default();
        histories(st, &key, d, k, now);
        let heads_now = heads(st, &key);
        let figures = urgency::dlq_figures(d, k, &heads_now, now);
        for (q, mut f) in d.dead_letter_queues.iter().zip(figures) {
            let id = (vhost.clone(), q.name.clone());
            let depth = q.depth.unwrap_or(0);
            // Read again only when something arrived: what was read is still there.
            let arrived = w
                .last_depth
                .insert(id.clone(), depth)
                .is_none_or(|b| depth > b);
            let mut not_read = None;
            if depth > 0 && arrived {
                let read = match w.sessions.of(s, vhost).await {
                    Ok(rs) => read_groups(rs, st, q, a.limit, now).await,
                    Err(e) => Err(format!("not read: {e}")),
                };
                match read {
                    Ok((g, head)) => {
                        w.groups_of.insert(id.clone(), g);
                        f = urgency::figures(
                            k.get(&q.name).unwrap_or(&History::default()),
                            q.depth,
                            Some(head),
                            f.origin_consumers,
                            now,
                        );
                    }
                    Err(why) => {
                        w.groups_of.remove(&id);
                        not_read = Some(why);
                    }
                }
            } else if depth == 0 {
                w.groups_of.remove(&id);
            } else if let Some(g) = w.groups_of.get_mut(&id) {
                // Unchanged since the last read: nothing in it is new any more.
                g.iter_mut().for_each(|g| g.new = false);
            }
            looks.push(Look {
                context: context.clone(),
                vhost: vhost.clone(),
                queue: q.name.clone(),
                figures: f,
                age_secs: f.oldest.map(|o| o.age_secs(now)),
                groups: w.groups_of.get(&id).cloned(),
                not_read,
            });
        }
    }
    say_not_read(w, &looks[first..], a);
    Ok(())
}

/// Says once for each queue that its failure groups could not be read, and why.
fn say_not_read(w: &mut Watched, looks: &[Look], a: &WatchArgs) {
    for l in looks {
        if let Some(why) = &l.not_read
            && w.told_not_read.insert((l.vhost.clone(), l.queue.clone()))
        {
            if a.json {
                let mut v = json!({
                    "event": "not-read", "vhost": l.vhost, "queue": l.queue, "reason": why,
                });
                if !l.context.is_empty() {
                    v["context"] = json!(l.context);
                }
                commands::print_line(&v);
            } else if a.format != WatchFormat::Prometheus {
                crate::errln!(
                    "warren: {}: failure groups {}",
                    one_line(&l.queue, 120),
                    one_line(why, 400)
                );
            }
        }
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
