//! `warren groups`: the failure groups of a queue or a snapshot, with their notes.

use std::path::Path;

use serde_json::json;

use super::args::ConnArgs;
use super::commands::{
    CELL, broker_failure, file_conventions, open, print_line, read_explained, read_snapshot,
};
use super::{Failure, exit};
use crate::broker::session::{self, Explained};
use crate::domain::grouping::{self, GroupBy, GroupKey, GroupNote, WaitQueues};
use crate::domain::sanitize::one_line;
use crate::ops::note::NoteRequest;

/// How `warren groups` prints.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GroupsOutput {
    pub json: bool,
    pub by: GroupBy,
}

pub(crate) async fn groups(
    c: &ConnArgs,
    queue: Option<&str>,
    snapshot: Option<&Path>,
    limit: usize,
    out: GroupsOutput,
    note: Option<(&str, &str)>,
) -> Result<i32, Failure> {
    let Some(file) = snapshot else {
        let queue = queue.ok_or_else(|| Failure::usage("name a queue or --snapshot FILE"))?;
        return groups_live(c, queue, limit, out, note).await;
    };
    let (_, messages) = read_snapshot(file)?;
    let messages = session::explain_all(
        messages.into_iter().take(limit).collect(),
        &session::Remembered::default(),
        &file_conventions(c)?,
    );
    print_groups(&messages, out, &WaitQueues::default(), &[]);
    Ok(exit::OK)
}

/// `warren groups QUEUE` on a broker: the groups with their notes; `--note` attaches one first.
/// A read of the whole queue forgets the notes of groups that are gone.
async fn groups_live(
    c: &ConnArgs,
    queue: &str,
    limit: usize,
    out: GroupsOutput,
    note: Option<(&str, &str)>,
) -> Result<i32, Failure> {
    let s = open(c).await?;
    // The endpoint is past a wait queue: the vhost's retry loops say which queues are.
    let waits = if out.by == GroupBy::Endpoint {
        WaitQueues::from_discovery(&s.discover().await.map_err(broker_failure)?)
    } else {
        WaitQueues::default()
    };
    let (messages, whole) = read_explained(c, &s, queue, limit).await?;
    if let Some((name, text)) = note {
        let key = messages
            .iter()
            .map(|e| grouping::group_key(out.by, &e.message, &e.explanation, &waits))
            .find(|k| k.named(name))
            .ok_or_else(|| {
                Failure::failed(format!(
                    "'{queue}' has no group '{}' by {} among the {} messages read; `warren groups {queue} --by {}` lists them",
                    one_line(name, 80),
                    out.by,
                    messages.len(),
                    out.by
                ))
            })?;
        let req = NoteRequest {
            queue: queue.to_string(),
            by: out.by,
            key: key.key.clone(),
            text: text.to_string(),
        };
        let set = match crate::ops::note::set(&s, req).await {
            Ok(set) => set,
            Err(stop) => return super::commands::stopped(stop),
        };
        for w in &set.notes {
            crate::errln!("warren: {}", one_line(w, 600));
        }
        crate::errln!(
            "warren: {} the note on group {} ({})",
            if set.kept { "kept" } else { "removed" },
            key.key,
            one_line(&key.summary, 120)
        );
    }
    let facets: Vec<grouping::Facets> = messages
        .iter()
        .map(|e| grouping::Facets::of(&e.message, &e.explanation))
        .collect();
    let (notes, said) = crate::ops::note::after_read(&s, queue, (&facets, whole), &waits);
    for e in said {
        crate::errln!("warren: {}", one_line(&e, 600));
    }
    print_groups(&messages, out, &waits, &notes);
    Ok(exit::OK)
}

/// One group of `warren groups`.
#[derive(Debug)]
pub(crate) struct Group<'a> {
    pub key: GroupKey,
    pub first: &'a Explained,
    pub count: u64,
    pub first_seen: Option<jiff::Timestamp>,
    pub last_seen: Option<jiff::Timestamp>,
}

/// Groups by `by`, largest first (ties by first appearance in the queue).
pub(crate) fn group<'a>(
    messages: &'a [Explained],
    by: GroupBy,
    waits: &WaitQueues,
) -> Vec<Group<'a>> {
    let keys = messages
        .iter()
        .map(|e| grouping::key_of(by, &e.message, &e.explanation, waits));
    let mut out: Vec<Group> = grouping::partition(keys)
        .into_iter()
        .filter_map(|(_, members)| {
            let first = messages.get(*members.first()?)?;
            let key = grouping::group_key(by, &first.message, &first.explanation, waits);
            let seen: Vec<jiff::Timestamp> = members
                .iter()
                .filter_map(|&i| messages.get(i)?.first_seen)
                .collect();
            Some(Group {
                key,
                first,
                count: members.len() as u64,
                first_seen: seen.iter().min().copied(),
                last_seen: seen.iter().max().copied(),
            })
        })
        .collect();
    // Stable: equal counts keep their first appearance.
    out.sort_by_key(|g| std::cmp::Reverse(g.count));
    out
}

pub(crate) fn print_groups(
    messages: &[Explained],
    out: GroupsOutput,
    waits: &WaitQueues,
    notes: &[GroupNote],
) {
    for g in group(messages, out.by, waits) {
        let x = &g.first.explanation;
        let note = notes.iter().find(|n| n.by == out.by && n.key == g.key.key);
        if out.json {
            print_line(&json!({
                "by": out.by.as_str(),
                "key": g.key.key,
                "value": g.key.value,
                // The fingerprint of the group's first message (the whole group's, by fingerprint).
                "fingerprint": x.fingerprint.key,
                "convention": x.convention.as_str(),
                "summary": g.key.summary,
                "count": g.count,
                "source_queue": x.source.queue,
                "first_seen": g.first_seen.map(|t| t.to_string()),
                "last_seen": g.last_seen.map(|t| t.to_string()),
                "note": note.map(|n| json!({
                    "text": n.text,
                    "author": n.author,
                    "at": n.at.to_string(),
                })),
            }));
        } else {
            crate::outln!(
                "{:>6}  {}  {:<12} {}  (from {})",
                g.count,
                one_line(&g.key.key, 40),
                x.convention.as_str(),
                one_line(&g.key.summary, CELL),
                one_line(x.source.queue.as_deref().unwrap_or("?"), 60)
            );
            if let Some(n) = note {
                crate::outln!(
                    "        note: {}  ({}, {})",
                    one_line(&n.text, CELL * 2),
                    one_line(&n.author, 40),
                    n.at.strftime("%Y-%m-%d %H:%M UTC")
                );
            }
        }
    }
}
