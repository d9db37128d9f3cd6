//! The place's queues for the worker: discovery (a snapshot's, every context's or the broker's),
//! depth refreshes and the depths the store keeps, and the local archive listed beside them.

use super::snapshot::{snapshot_heads, snapshot_overview};
use super::*;

/// The place's queues: from the snapshot files, every context's, or the broker's with the
/// depths the store remembers.
pub(super) async fn discover_on(backend: &Backend, ticket: Ticket, ops: &Ops) -> Vec<Report> {
    match backend {
        Backend::Snapshot(snapshots) => vec![
            Report::QueuesLoaded {
                overview: snapshot_overview(snapshots),
                discovery: snapshot_discovery(snapshots),
                ticket,
            },
            // The snapshot holds every message: each queue is dated from them at once,
            // as a read would date it, without one.
            Report::DepthHistory {
                samples: HashMap::new(),
                heads: snapshot_heads(snapshots),
                ticket,
            },
        ],
        Backend::Broker(ss) => {
            let loaded = discover(ss, ticket, ops).await;
            let mut reports = Vec::new();
            if let Report::QueuesLoaded { discovery, .. } = &loaded {
                let history = depth_history(ss.main(), discovery, ticket);
                reports.push(loaded);
                reports.extend(history);
            } else {
                reports.push(loaded);
            }
            reports
        }
        Backend::Contexts(cs) => contexts::discover(cs, ticket, ops).await,
    }
}

/// The queues' depths again (a snapshot's do not change).
pub(super) async fn refresh_on(backend: &Backend, ticket: Ticket) -> Vec<Report> {
    match backend {
        Backend::Broker(ss) => match listing(ss).await {
            Ok(qs) => {
                record_depths(ss.main(), &qs);
                let depths = qs
                    .into_iter()
                    .map(|(vhost, q)| (QueueRef::new(&vhost, &q.name), q.messages))
                    .collect();
                vec![Report::DepthsRefreshed { depths, ticket }]
            }
            Err(e) => vec![Report::Connection(ConnectionState::Disconnected(
                e.to_string(),
            ))],
        },
        Backend::Contexts(cs) => vec![contexts::refresh(cs, ticket).await],
        // The plan refuses these for a snapshot before they start.
        Backend::Snapshot(_) => Vec::new(),
    }
}

/// What the store remembers of the place's dead-letter queues (the last hour of depths, the
/// last reads), with this listing's depths recorded, each vhost under its own key; nothing
/// without a store.
pub(super) fn depth_history(s: &Session, d: &Discovery, ticket: Ticket) -> Option<Report> {
    let st = Store::open_default().ok()?;
    let now = jiff::Timestamp::now();
    let mut samples = HashMap::new();
    let mut heads = HashMap::new();
    for (vhost, depths) in by_vhost(
        d.dead_letter_queues
            .iter()
            .map(|q| (&q.vhost, (q.name.clone(), q.depth))),
    ) {
        let depths: Vec<(String, u64)> = depths
            .into_iter()
            .filter_map(|(name, depth)| Some((name, depth?)))
            .collect();
        let key = s.handle.memory_key_of(vhost);
        let of_vhost = |name: String| QueueRef::new(vhost, &name);
        for (name, kept) in st.depth_history(&key, &depths, now).ok()? {
            samples.insert(of_vhost(name), kept);
        }
        for (name, head) in st.read_heads(&key).unwrap_or_default() {
            heads.insert(of_vhost(name), head);
        }
    }
    s.depths_recorded(now);
    Some(Report::DepthHistory {
        samples,
        heads,
        ticket,
    })
}

/// Items grouped by their vhost, in the order first seen.
pub(super) fn by_vhost<'a, T>(
    items: impl Iterator<Item = (&'a String, T)>,
) -> Vec<(&'a str, Vec<T>)> {
    let mut groups: Vec<(&'a str, Vec<T>)> = Vec::new();
    let mut at: HashMap<&'a str, usize> = HashMap::new();
    for (vhost, item) in items {
        let i = *at.entry(vhost.as_str()).or_insert_with(|| {
            groups.push((vhost.as_str(), Vec::new()));
            groups.len() - 1
        });
        groups[i].1.push(item);
    }
    groups
}

/// The depth refresh's listing: the vhost's queues, or with every vhost one listing of all.
pub(super) async fn listing(
    ss: &Sessions,
) -> Result<Vec<(String, discovery::QueueInfo)>, crate::broker::management::ManagementError> {
    let s = ss.main();
    if ss.every() {
        return s.handle.mgmt.queues_all().await;
    }
    let qs = s.handle.mgmt.queues(s.vhost()).await?;
    Ok(qs.into_iter().map(|q| (s.vhost().to_string(), q)).collect())
}

/// Records a refresh's depths in the store, at most once per sample gap (the store keeps one
/// sample per gap anyway; this spares it the lookups every tick).
pub(super) fn record_depths(s: &Session, qs: &[(String, discovery::QueueInfo)]) {
    let now = jiff::Timestamp::now();
    if !s.depths_due(now) {
        return;
    }
    let Ok(st) = Store::open_default() else {
        return;
    };
    let dlqs = qs.iter().filter(|(v, q)| s.is_dlq(v, &q.name));
    for (vhost, depths) in by_vhost(dlqs.map(|(v, q)| (v, q))) {
        let depths: Vec<(String, u64)> = depths
            .into_iter()
            .filter_map(|q| Some((q.name.clone(), q.messages?)))
            .collect();
        let _ = st.record_depths(&s.handle.memory_key_of(vhost), &depths, now);
    }
    s.depths_recorded(now);
}

/// The scope's queues: the vhost's, or every vhost's from one listing of each kind (each queue
/// named with its vhost), the archive marked in each vhost that has it.
pub(super) async fn discover(ss: &Sessions, ticket: Ticket, ops: &Ops) -> Report {
    let s = ss.main();
    let stream = &s.handle.target.archive.stream;
    let found = if ss.every() {
        s.discover_all().await.map(|parts| {
            let n = parts.len();
            let parts = parts.into_iter().map(|(vhost, mut d)| {
                d.mark_archive(stream);
                list_local_archive(s, &vhost, &mut d);
                d
            });
            (
                Discovery::merged(parts.collect()),
                format!("every vhost ({n} with queues)"),
            )
        })
    } else {
        s.discover().await.map(|mut d| {
            // The archive is listed with the DLQs, marked, when the vhost has its stream, and
            // so is its local file when something was archived there.
            d.mark_archive(stream);
            list_local_archive(s, s.vhost(), &mut d);
            (d, format!("vhost '{}'", s.vhost()))
        })
    };
    match found {
        Ok((discovery, place)) => {
            let d = &discovery;
            ops.report(
                OperationKind::List,
                format!(
                    "listed {place}: {} queues ({} dead-letter queues, {} retry loops), with bindings and policies",
                    d.dead_letter_queues.len() + d.retry_loops.len() + d.other_queues.len(),
                    d.dead_letter_queues.len(),
                    d.retry_loops.len()
                ),
            )
            .await;
            let read_only_reason = read_only_reason(s, !ss.every()).await.unwrap_or_default();
            let overview = Overview {
                context: s.handle.target.context.clone(),
                broker_version: s.handle.overview.rabbitmq_version.clone(),
                user: s.handle.whoami.name.clone(),
                tags: s.handle.whoami.tags.clone(),
                vhost: if ss.every() {
                    config::VhostScope::EveryVhost.to_string()
                } else {
                    s.vhost().to_string()
                },
                read_only: !read_only_reason.is_empty(),
                read_only_reason,
                color: s.handle.target.color,
                label: s.handle.target.label.clone(),
                contexts: Vec::new(),
                snapshot: false,
                archive_question: (!ss.every())
                    .then(|| archive_question(s, &discovery))
                    .flatten(),
            };
            Report::QueuesLoaded {
                overview,
                discovery,
                ticket,
            }
        }
        Err(e) => Report::Error(Failure::in_generation(e.to_string(), ticket.generation)),
    }
}

/// What an archive here would create and must ask about first (`ops::archive::asks_to_create`,
/// the stream's presence read from the discovery).
pub(super) fn archive_question(s: &Session, d: &Discovery) -> Option<String> {
    let a = &s.handle.target.archive;
    let present = d
        .dead_letter_queues
        .iter()
        .any(|q| q.kind == crate::domain::discovery::DlqKind::Archive && q.name == a.stream);
    crate::ops::archive::asks_to_create(a, false, false, s.handle.streams_supported(), !present)
        .then(|| crate::ops::archive::stream_question(a, s.vhost()))
}

/// Lists `vhost`'s local archive file with its DLQs when it holds anything.
pub(super) fn list_local_archive(s: &Session, vhost: &str, d: &mut Discovery) {
    let Some(store) = Store::default_path() else {
        return;
    };
    let path = keep::local_path(&store, &s.handle.target.context, vhost);
    if let Some(n) = keep::local_entries(&path) {
        d.add_local_archive(vhost, n);
    }
}

/// The session's vhost's local archive file.
pub(super) fn local_archive_path(s: &Session) -> Result<std::path::PathBuf, String> {
    match keep::local_place(s, "the vhost's local archive")? {
        keep::Place::Local(path, _) => Ok(path),
        keep::Place::Stream(name) => Err(format!("'{name}' is a stream, not a local archive")),
    }
}
