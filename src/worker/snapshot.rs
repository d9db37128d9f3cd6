//! A snapshot file as the worker's place: its overview, its queues and their heads.

use super::*;

pub(super) fn snapshot_overview(snapshots: &[(SnapshotHeader, Vec<DeadLetter>)]) -> Overview {
    let first = snapshots.first().map(|(h, _)| h);
    Overview {
        context: "snapshot".into(),
        broker_version: first
            .map(|h| h.source.trim_start_matches("RabbitMQ ").to_string())
            .unwrap_or_default(),
        user: String::new(),
        tags: Vec::new(),
        vhost: first.map(|h| h.vhost.clone()).unwrap_or_default(),
        read_only: true,
        read_only_reason: "replay is disabled: a snapshot is read-only (no broker)".into(),
        color: None,
        label: None,
        contexts: Vec::new(),
        snapshot: true,
        archive_question: None,
    }
}

/// Each snapshot's queue dated as a read of it at its export would be: its oldest and newest
/// arrival, from its messages.
pub(super) fn snapshot_heads(
    snapshots: &[(SnapshotHeader, Vec<DeadLetter>)],
) -> HashMap<QueueRef, crate::domain::urgency::ReadHead> {
    snapshots
        .iter()
        .filter_map(|(h, messages)| {
            let at: jiff::Timestamp = h.exported_at.parse().ok()?;
            let arrivals = messages.iter().map(|m| {
                let e = crate::domain::explain::explain(m);
                crate::domain::arrival::Arrival::of(&e.deaths, e.failed_at, None)
            });
            let head = crate::domain::urgency::ReadHead::of(at, arrivals);
            Some((QueueRef::new(&h.vhost, &h.queue), head))
        })
        .collect()
}

/// Each snapshot holds one queue: present them as the dead-letter queues of one vhost.
pub fn snapshot_discovery(snapshots: &[(SnapshotHeader, Vec<DeadLetter>)]) -> Discovery {
    let mut dead_letter_queues: Vec<DlqInfo> = snapshots
        .iter()
        .map(|(h, messages)| {
            let named = discovery::classify_name(&h.queue, &[]);
            DlqInfo {
                context: String::new(),
                vhost: h.vhost.clone(),
                name: h.queue.clone(),
                kind: named.map_or(DlqKind::DeadLetter, |m| m.kind),
                convention: named.map_or(Convention::Broker, |m| m.convention),
                depth: Some(messages.len() as u64),
                messages_ready: Some(messages.len() as u64),
                messages_unacknowledged: Some(0),
                consumers: Some(0),
                queue_type: QueueType::Classic,
                feeders: Vec::new(),
                feeders_uncertain: false,
                by_topology: false,
                by_name: named.is_some(),
                guessed: false,
                delivery_limit: None,
                delivery_limit_arg: None,
                dead_letter_exchange: None,
            }
        })
        .collect();
    dead_letter_queues.sort_by(|a, b| b.depth.cmp(&a.depth).then(a.name.cmp(&b.name)));
    Discovery {
        dead_letter_queues,
        retry_loops: Vec::new(),
        other_queues: Vec::new(),
        stuck: Vec::new(),
    }
}
