//! Merging the local store's audit with the broker stream's entries: one record per run, and
//! which runs the broker does not vouch for.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::*;

/// The run ids of the stream's entries (body, `user_id`) that the broker does not vouch for:
/// a run is vouched for when every entry of it carries, as its `user_id` (which the broker
/// refuses from any other user), the broker user its start names. Entries that do not read are
/// left to [`merge`], which skips them. Pure.
pub fn unvouched_runs(stream: &[(Vec<u8>, Option<String>)]) -> HashSet<String> {
    let mut starter: HashMap<String, String> = HashMap::new();
    let mut signers: Vec<(String, Option<String>)> = Vec::new();
    for (body, user) in stream {
        let Ok(head) = serde_json::from_slice::<AuditEnvelope<serde_json::Value>>(body) else {
            continue;
        };
        if head.event == "start"
            && let Some(u) = head.record.get("broker_user").and_then(|v| v.as_str())
        {
            starter.entry(head.run_id.clone()).or_insert(u.to_string());
        }
        signers.push((head.run_id, user.clone()));
    }
    signers
        .into_iter()
        .filter(|(run, user)| user.is_none() || starter.get(run) != user.as_ref())
        .map(|(run, _)| run)
        .collect()
}

/// The audit as `warren audit` shows it: the local store's records and the broker stream's,
/// one entry per run, newest first.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Merged {
    /// Replays, each with where it was found.
    pub replays: Vec<(AuditRecord, Seen)>,
    /// Protects, each with where it was found.
    pub protects: Vec<(ProtectRecord, Seen)>,
    /// Group notes from the broker stream (the store keeps only the current note), newest first.
    pub notes: Vec<NoteEntry>,
    /// Redirects set and removed (`domain::redirect`; the redirect stream holds the ones in
    /// force), newest first: (event, record).
    pub redirects: Vec<(String, crate::domain::redirect::RedirectRecord)>,
    /// Other kinds (operations this Warren does not know, e.g. from a newer one): the raw entry.
    pub other: Vec<serde_json::Value>,
    /// Stream entries that could not be read, in words.
    pub skipped: Vec<String>,
}

/// Merges the local records with the broker stream's entries (message bodies, in stream order):
/// the same run seen in both is one record (by its run id; the local one wins, as it has the
/// local number), a start without an outcome reads "interrupted" in both. Pure.
pub fn merge(
    local: Vec<AuditRecord>,
    local_protects: Vec<ProtectRecord>,
    stream: &[Vec<u8>],
) -> Merged {
    let mut m = Merged::default();
    let read = read_stream(stream, &mut m);
    merge_runs(&mut m, local, read.starts, read.outcomes, read.id_parts);
    merge_protects(&mut m, local_protects, read.protects);
    m.notes.sort_by_key(|n| std::cmp::Reverse(n.note.at));
    m.redirects.sort_by_key(|(_, r)| std::cmp::Reverse(r.at));
    m
}

/// What the broker stream holds of runs and protects, by run id, before it is merged.
#[derive(Default)]
struct StreamRead {
    /// Broker-side replays by run id, in first-start order.
    starts: Vec<(String, RunKind, AuditStart)>,
    outcomes: HashMap<String, (AuditOutcome, u32)>,
    /// `outcome-ids` entries by run id and part number: the first of each part counts.
    id_parts: HashMap<String, BTreeMap<u32, Vec<String>>>,
    protects: Vec<ProtectRecord>,
}

/// Reads the stream's entries: runs and protects are returned for merging, notes and unknown
/// kinds go straight into `m`, and what does not read is said in `m.skipped`.
fn read_stream(stream: &[Vec<u8>], m: &mut Merged) -> StreamRead {
    let mut read = StreamRead::default();
    let StreamRead {
        starts,
        outcomes,
        id_parts,
        protects,
    } = &mut read;
    for (n, body) in stream.iter().enumerate() {
        let v: serde_json::Value = match serde_json::from_slice(body) {
            Ok(v) => v,
            Err(e) => {
                m.skipped.push(format!("entry {n}: not JSON ({e})"));
                continue;
            }
        };
        let head: AuditEnvelope<serde_json::Value> = match serde_json::from_value(v.clone()) {
            Ok(h) => h,
            Err(e) => {
                m.skipped
                    .push(format!("entry {n}: not a Warren audit entry ({e})"));
                continue;
            }
        };
        if head.warren_audit > AUDIT_SCHEMA {
            m.skipped.push(format!(
                "entry {n}: schema {} is newer than this warren reads ({AUDIT_SCHEMA})",
                head.warren_audit
            ));
            continue;
        }
        let bad = |e: serde_json::Error| format!("entry {n} ({} {}): {e}", head.kind, head.event);
        match (head.kind.as_str(), head.event.as_str()) {
            // A replay, archive, discard or restore: each is recorded as a run ([`RunKind`]).
            (kind, "start") if RunKind::parse(kind).is_some() => {
                let op = RunKind::parse(kind).unwrap_or_default();
                match serde_json::from_value::<AuditStart>(head.record) {
                    Ok(s) if !starts.iter().any(|(id, _, _)| *id == head.run_id) => {
                        starts.push((head.run_id, op, s));
                    }
                    Ok(_) => {}
                    Err(e) => m.skipped.push(bad(e)),
                }
            }
            (kind, "outcome") if RunKind::parse(kind).is_some() => {
                let parts = head
                    .record
                    .get("id_parts")
                    .and_then(serde_json::Value::as_u64)
                    .and_then(|n| u32::try_from(n).ok())
                    .unwrap_or(0);
                match serde_json::from_value::<AuditOutcome>(head.record) {
                    Ok(o) => {
                        outcomes.entry(head.run_id).or_insert((o, parts));
                    }
                    Err(e) => m.skipped.push(bad(e)),
                }
            }
            (kind, IDS_EVENT) if RunKind::parse(kind).is_some() => {
                match serde_json::from_value::<IdsPart>(head.record) {
                    Ok(p) => {
                        id_parts
                            .entry(head.run_id)
                            .or_default()
                            .entry(p.part)
                            .or_insert(p.message_ids);
                    }
                    Err(e) => m.skipped.push(bad(e)),
                }
            }
            ("protect", _) => match serde_json::from_value::<ProtectRecord>(head.record) {
                Ok(p) => protects.push(p),
                Err(e) => m.skipped.push(bad(e)),
            },
            ("note", event @ ("set" | "forget")) => {
                match serde_json::from_value::<NoteRecord>(head.record) {
                    Ok(note) => m.notes.push(NoteEntry {
                        event: event.to_string(),
                        note,
                    }),
                    Err(e) => m.skipped.push(bad(e)),
                }
            }
            ("redirect", event) => match serde_json::from_value(head.record) {
                Ok(r) => m.redirects.push((event.to_string(), r)),
                Err(e) => m.skipped.push(bad(e)),
            },
            _ => m.other.push(v),
        }
    }
    read
}

/// The local runs and the broker's, one record per run id (the local one wins, taking the
/// broker's outcome when it has none), newest first.
fn merge_runs(
    m: &mut Merged,
    local: Vec<AuditRecord>,
    starts: Vec<(String, RunKind, AuditStart)>,
    mut outcomes: HashMap<String, (AuditOutcome, u32)>,
    mut id_parts: HashMap<String, BTreeMap<u32, Vec<String>>>,
) {
    let on_broker: HashSet<String> = starts.iter().map(|(id, _, _)| id.clone()).collect();
    let mut known: HashSet<String> = HashSet::new();
    let mut outcome_of = |run_id: &str, skipped: &mut Vec<String>| {
        outcomes
            .remove(run_id)
            .map(|(o, parts)| with_id_parts(run_id, o, parts, &mut id_parts, skipped))
    };
    for mut r in local {
        let seen = Seen {
            local: true,
            broker: r.run_id.as_ref().is_some_and(|id| on_broker.contains(id)),
            unvouched: false,
        };
        if let Some(id) = &r.run_id {
            known.insert(id.clone());
            // Merged by what is known, not by which copy is worse: a local record that never
            // got its outcome (the store was locked or full when the run ended) takes the
            // broker's.
            if r.finished_at.is_none()
                && let Some(o) = outcome_of(id, &mut m.skipped)
            {
                r = with_outcome(r, o);
            }
        }
        m.replays.push((r, seen));
    }
    for (run_id, op, s) in starts {
        if known.contains(&run_id) {
            continue;
        }
        let out = outcome_of(&run_id, &mut m.skipped);
        m.replays.push((
            record_of(run_id, op, s, out),
            Seen {
                local: false,
                broker: true,
                unvouched: false,
            },
        ));
    }
    m.replays.sort_by_key(|b| std::cmp::Reverse(b.0.started_at));
}

/// The local protects and the broker's, one per run id, newest first.
fn merge_protects(
    m: &mut Merged,
    local_protects: Vec<ProtectRecord>,
    protects: Vec<ProtectRecord>,
) {
    let broker_protects: HashSet<String> = protects.iter().map(|p| p.run_id.clone()).collect();
    let mut known: HashSet<String> = HashSet::new();
    for p in local_protects {
        known.insert(p.run_id.clone());
        let broker = broker_protects.contains(&p.run_id);
        m.protects.push((
            p,
            Seen {
                local: true,
                broker,
                unvouched: false,
            },
        ));
    }
    for p in protects {
        if known.insert(p.run_id.clone()) {
            m.protects.push((
                p,
                Seen {
                    local: false,
                    broker: true,
                    unvouched: false,
                },
            ));
        }
    }
    m.protects.sort_by_key(|b| std::cmp::Reverse(b.0.at));
}

/// A broker outcome with the moved ids of its `parts` [`IDS_EVENT`] entries before its own;
/// parts not found are said in `skipped`.
fn with_id_parts(
    run_id: &str,
    mut o: AuditOutcome,
    parts: u32,
    id_parts: &mut HashMap<String, BTreeMap<u32, Vec<String>>>,
    skipped: &mut Vec<String>,
) -> AuditOutcome {
    if parts == 0 {
        return o;
    }
    let mut found = id_parts.remove(run_id).unwrap_or_default();
    let mut ids = Vec::new();
    let mut missing = 0u32;
    for n in 1..=parts {
        match found.remove(&n) {
            Some(chunk) => ids.extend(chunk),
            None => missing += 1,
        }
    }
    if missing > 0 {
        skipped.push(format!(
            "run {run_id}: {missing} of the {parts} entries holding its moved ids were not found (past the stream's retention?): its ids are incomplete"
        ));
    }
    ids.append(&mut o.message_ids);
    o.message_ids = ids;
    o
}

/// `r` with the outcome `o` (found elsewhere: on the broker's stream).
pub(super) fn with_outcome(r: AuditRecord, o: AuditOutcome) -> AuditRecord {
    AuditRecord {
        finished_at: Some(o.at),
        moved: Some(o.moved),
        returned: Some(o.returned),
        failed: Some(o.failed),
        remaining: Some(o.remaining),
        message_ids: o.message_ids,
        duplicated: Some(o.duplicated),
        duplicate_ids: o.duplicate_ids,
        targets: joined_targets(r.targets, &o.targets),
        outcome: o.outcome,
        canary: o.canary,
        edits: o.edits,
        ..r
    }
}

/// A run known from the broker's stream, as the local store would show it.
pub(super) fn record_of(
    run_id: String,
    operation: RunKind,
    s: AuditStart,
    out: Option<AuditOutcome>,
) -> AuditRecord {
    AuditRecord {
        id: None,
        operation,
        run_id: Some(run_id),
        started_at: s.at,
        os_user: s.os_user,
        broker_user: s.broker_user,
        context: s.context,
        vhost: s.vhost,
        from_queue: s.from_queue,
        targets: joined_targets(s.targets, out.as_ref().map_or(&[][..], |o| &o.targets)),
        filter: s.filter,
        group: s.group,
        requested_limit: s.requested_limit,
        dry_run: s.dry_run,
        keep_attempts: s.keep_attempts,
        clear_expiry: s.clear_expiry,
        strip_failure_stamp: s.strip_failure_stamp,
        finished_at: out.as_ref().map(|o| o.at),
        moved: out.as_ref().map(|o| o.moved),
        returned: out.as_ref().map(|o| o.returned),
        failed: out.as_ref().map(|o| o.failed),
        remaining: out.as_ref().map(|o| o.remaining),
        message_ids: out
            .as_ref()
            .map(|o| o.message_ids.clone())
            .unwrap_or_default(),
        duplicated: out.as_ref().map(|o| o.duplicated),
        duplicate_ids: out
            .as_ref()
            .map(|o| o.duplicate_ids.clone())
            .unwrap_or_default(),
        canary: out.as_ref().and_then(|o| o.canary.clone()),
        edits: out.as_ref().map(|o| o.edits.clone()).unwrap_or_default(),
        outcome: out.map_or_else(crate::domain::outcome::RunOutcome::default, |o| o.outcome),
    }
}
