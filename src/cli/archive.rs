//! `warren archive`, `archive list`, `restore` and `discard`: the other ways out of a dead-letter
//! queue. Archive and discard run the replay engine (`replay::Action`), with its guarantees;
//! restore publishes what the archive holds with confirms and remembers what it restored.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;

use serde_json::json;

use super::args::{ArchiveArgs, ArchiveCommand, ConnArgs, DiscardArgs, Pick, RestoreArgs};
use super::commands::{self, broker_failure, print_line};
use super::{Failure, exit};
use crate::broker::archive::{self as keep, DeclareError, Place, Publish, Published, StreamState};
use crate::broker::replay::{self, Action, Job, Spool};
use crate::broker::session::{self, Explained, ReadConsent, ReplaySpec, Session, WriteCheck};
use crate::domain::archive::{self, Stamp};
use crate::domain::engine::Decision;
use crate::domain::filter::Filter;
use crate::domain::identity;
use crate::domain::message::DeadLetter;
use crate::domain::sanitize::one_line;
use crate::domain::selection::Selection;
use crate::store::{self, AuditOutcome, AuditStart, Operation, Store};

fn read_only(s: &Session, what: &str) -> Failure {
    Failure::failed(format!(
        "read-only: context '{}' is opened read-only (--read-only or read_only = true); {what} is disabled. The archive stays readable: `warren archive list`",
        s.target.context
    ))
}

fn local_place(s: &Session, why: &str) -> Result<Place, Failure> {
    keep::local_place(s, why).map_err(Failure::failed)
}

fn on_terminal() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// Where an archive goes. The stream is created only with consent: asked on a terminal (saying
/// exactly what will be created), else `--create-archive` or `archive_create = true`. Where a
/// stream cannot be used (chosen local, no streams, no permission to create it) the archive is a
/// local snapshot file, and Warren says so.
async fn place_for_archive(
    s: &Session,
    local: bool,
    create: bool,
    dry_run: bool,
) -> Result<Place, Failure> {
    if local || s.target.archive.local {
        return local_place(s, "chosen (--local or archive_local = true)");
    }
    if !s.streams_supported() {
        return local_place(s, "this broker has no streams (RabbitMQ before 3.9)");
    }
    let name = s.target.archive.stream.clone();
    let what = format!(
        "a stream '{}' in vhost '{}' (durable, x-queue-type = stream, x-max-age = {}: the broker drops archived messages older than that)",
        one_line(&name, 100),
        one_line(s.vhost(), 100),
        one_line(&s.target.archive.max_age, 20)
    );
    match s.archive_state().await.map_err(broker_failure)? {
        StreamState::Stream => Ok(Place::Stream(name)),
        StreamState::NotAStream(kind) => Err(Failure::failed(format!(
            "'{}' in vhost '{}' is a {kind} queue, not a stream: Warren will not archive into it. Name another stream with archive_stream in the context, or keep the archive in a file with --local",
            one_line(&name, 100),
            one_line(s.vhost(), 100)
        ))),
        StreamState::Missing if dry_run => {
            crate::errln!("warren: the archive does not exist yet: Warren would create {what}");
            Ok(Place::Stream(name))
        }
        StreamState::Missing => {
            if !(create || s.target.archive.create) {
                if !on_terminal() {
                    return Err(Failure::usage(format!(
                        "the archive does not exist yet: Warren would create {what}. Pass --create-archive (or set archive_create = true in the context) to allow it, or --local to keep the archive in a file; nothing moved"
                    )));
                }
                crate::err!(
                    "The archive does not exist yet. Warren will create {what}. Create it? [y/N] "
                );
                let mut line = String::new();
                let yes = std::io::stdin().read_line(&mut line).is_ok()
                    && matches!(line.trim(), "y" | "Y" | "yes");
                if !yes {
                    return Err(Failure::failed(
                        "nothing moved: the archive stream was not created (--local keeps the archive in a file instead)",
                    ));
                }
            }
            match s.create_archive().await {
                Ok(()) => {
                    crate::errln!("created {what}");
                    Ok(Place::Stream(name))
                }
                Err(DeclareError::NoPermission(text)) => {
                    let place = local_place(
                        s,
                        &format!(
                            "the broker refused to create the stream: {}",
                            one_line(&text, 200)
                        ),
                    )?;
                    crate::errln!(
                        "warren: cannot create the archive stream (configure permission is needed: {}); the archive is {} instead",
                        one_line(&text, 200),
                        place.label()
                    );
                    Ok(place)
                }
                Err(e) => Err(Failure::broker(format!(
                    "cannot create the archive stream '{}': {e}; nothing moved",
                    one_line(&name, 100)
                ))),
            }
        }
    }
}

/// Where the archive is for reading: the local file when chosen, else the stream (`None`: there
/// is none yet).
async fn place_for_reading(s: &Session, local: bool) -> Result<Option<Place>, Failure> {
    if local || s.target.archive.local || !s.streams_supported() {
        return local_place(s, "local archive").map(Some);
    }
    let name = s.target.archive.stream.clone();
    match s.archive_state().await.map_err(broker_failure)? {
        StreamState::Stream => Ok(Some(Place::Stream(name))),
        StreamState::Missing => Ok(None),
        StreamState::NotAStream(kind) => Err(Failure::failed(format!(
            "'{}' is a {kind} queue, not Warren's archive stream",
            one_line(&name, 100)
        ))),
    }
}

/// Every message of the archive (up to `window`), each with its reference: the stream offset
/// or the file's message index, and its content digest (a stream recreated under the same name
/// starts its offsets again).
async fn read_archive(
    s: &Session,
    place: &Place,
    window: usize,
) -> Result<Vec<(String, DeadLetter)>, Failure> {
    let messages = match place {
        Place::Stream(name) => {
            let page = s
                .browse_archive(name, window)
                .await
                .map_err(broker_failure)?;
            session::into_messages(page)
        }
        Place::Local(path, _) => {
            if !path.exists() {
                return Ok(Vec::new());
            }
            let (_, mut messages) = commands::read_snapshot(path)?;
            for (i, m) in messages.iter_mut().enumerate() {
                m.position = i as u64;
            }
            messages.truncate(window);
            messages
        }
    };
    Ok(messages
        .into_iter()
        .map(|m| {
            let at = m.delivery.stream_offset.unwrap_or(m.position);
            (format!("{at}:{:016x}", archive::content_digest(&m)), m)
        })
        .collect())
}

async fn spec_for(
    s: &Session,
    queue: &str,
    pick: &Pick,
    filter: Option<Filter>,
    consent: ReadConsent,
    rate: Option<f64>,
) -> Result<ReplaySpec, Failure> {
    Ok(ReplaySpec {
        queue: queue.to_string(),
        selection: commands::selection_of(s, pick.group.as_deref(), pick.by, filter).await?,
        limit: pick.limit,
        rate,
        to: None,
        allow_fan_out: false,
        keep_attempts: false,
        clear_expiry: false,
        window: pick.window.unwrap_or(s.target.settings.replay.window),
        consent,
        // Archive and discard write no replay header.
        run_id: None,
    })
}

/// Asks for the go-ahead: `--yes`, else on a terminal (the count typed when `typed`).
fn go_ahead(yes: bool, count: u64, verb: &str, typed: bool) -> Result<bool, Failure> {
    if yes {
        return Ok(true);
    }
    if !std::io::stdin().is_terminal() {
        return Err(Failure::usage(format!(
            "not a terminal: pass --yes to {verb} without confirmation (or --dry-run to look)"
        )));
    }
    Ok(commands::confirm_to(count, verb, typed))
}

fn audit_start(
    s: &Session,
    from: &str,
    targets: Vec<String>,
    pick: &Pick,
    filter: Option<&Filter>,
) -> AuditStart {
    let at = jiff::Timestamp::now();
    AuditStart {
        run_id: crate::broker::audit::new_run_id(at),
        at,
        os_user: store::current_os_user(),
        broker_user: s.whoami.name.clone(),
        context: s.target.context.clone(),
        vhost: s.vhost().to_string(),
        from_queue: from.to_string(),
        targets,
        filter: filter.map(|f| f.to_string()),
        group: pick.group.clone(),
        requested_limit: pick.limit,
        dry_run: false,
        keep_attempts: false,
        clear_expiry: false,
    }
}

/// Reads the head of `spec.queue` and picks the selection, remembering first-seen times.
async fn select(
    c: &ConnArgs,
    s: &Session,
    spec: &ReplaySpec,
    body_cap: usize,
    store: Option<&Store>,
) -> Result<session::Selected, Failure> {
    commands::read_with_consent(c, |consent| {
        let mut spec = spec.clone();
        spec.consent = consent;
        async move {
            s.select(&spec, body_cap, |keys| {
                store
                    .and_then(|st| {
                        s.remember(st, &spec.queue, keys, jiff::Timestamp::now())
                            .ok()
                    })
                    .unwrap_or_default()
            })
            .await
        }
    })
    .await
}

/// The count a run may move: for "all", what the queue holds (capped by `--limit`), since the
/// run stops at the depth it started with; for a selection, what matched here.
fn confirmed_count(spec: &ReplaySpec, sel: &session::Selected) -> u64 {
    if matches!(spec.selection, Selection::All) && sel.examined < sel.depth {
        spec.limit.map_or(sel.depth, |l| l.min(sel.depth))
    } else {
        sel.messages.len() as u64
    }
}

fn plan_lines(verb: &str, spec: &ReplaySpec, sel: &session::Selected, count: u64) -> String {
    let looked = if sel.examined < sel.depth {
        format!(" — matched among the first {} looked at", sel.examined)
    } else {
        String::new()
    };
    format!(
        "{verb} {count} message(s) from {} (queue holds {}){looked}; selection: {}",
        one_line(&spec.queue, 80),
        sel.depth,
        one_line(&spec.selection.describe(), 200)
    )
}

pub async fn archive(c: &ConnArgs, a: &ArchiveArgs) -> Result<i32, Failure> {
    if let Some(ArchiveCommand::List {
        pick,
        from,
        groups,
        local,
        json,
    }) = &a.list
    {
        return list(c, pick, from.as_deref(), *groups, *local, *json).await;
    }
    let queue = a.queue.clone().ok_or_else(|| {
        Failure::usage("name the queue to archive from, or `warren archive list`")
    })?;
    let filter = commands::parse_filter(a.pick.filter.as_deref())?;
    let s = commands::open(c).await?;
    if !a.dry_run && s.target.read_only {
        return Err(read_only(&s, "archive"));
    }
    if queue == s.target.archive.stream {
        return Err(Failure::usage(format!(
            "'{}' is the archive itself",
            one_line(&queue, 80)
        )));
    }
    let place = place_for_archive(&s, a.local, a.create_archive, a.dry_run).await?;
    let store = match Store::open_default() {
        Ok(st) => Some(st),
        Err(e) if !a.dry_run => return Err(Failure::failed(format!("{e}; nothing moved"))),
        Err(_) => None,
    };
    let spec = spec_for(
        &s,
        &queue,
        &a.pick,
        filter.clone(),
        commands::consent(c),
        a.rate,
    )
    .await?;
    // The stream takes the message from the delivery itself: the look needs no whole bodies.
    // A local archive writes what was read, so it reads them whole.
    let cap = match place {
        Place::Stream(_) => identity::HASHED_BODY,
        Place::Local(..) => usize::MAX,
    };
    let sel = select(c, &s, &spec, cap, store.as_ref()).await?;
    let count = match place {
        Place::Stream(_) => confirmed_count(&spec, &sel),
        // Only what is in the file leaves the queue.
        Place::Local(..) => sel.messages.len() as u64,
    };
    let reason = a.reason.clone().unwrap_or_default();
    let verb = if a.dry_run {
        "Would archive"
    } else {
        "Archive"
    };
    crate::errln!("{}", plan_lines(verb, &spec, &sel, count));
    crate::errln!(
        "  → {}{}",
        one_line(&place.label(), 300),
        match &place {
            Place::Stream(_) => format!(
                " in vhost '{}' (kept {})",
                one_line(s.vhost(), 80),
                one_line(&s.target.archive.max_age, 20)
            ),
            Place::Local(_, why) => format!(" ({})", one_line(why, 200)),
        }
    );
    crate::errln!("  adds     {}", archive::HEADERS.join(", "));
    crate::errln!("  body, properties and every other header (x-death included) kept as they are");
    if !reason.is_empty() {
        crate::errln!("  reason   {}", one_line(&reason, 300));
    }
    if a.json {
        print_line(&json!({
            "event": "plan",
            "operation": "archive",
            "queue": queue,
            "selected": count,
            "matched": sel.matched,
            "examined": sel.examined,
            "depth": sel.depth,
            "archive": place.json(&s.target.archive.max_age),
            "reason": reason,
        }));
    }
    if count == 0 {
        return Err(Failure::failed(
            "nothing moved: no message matches the selection at the head of the queue",
        ));
    }
    if a.dry_run {
        return Ok(exit::OK);
    }
    if let Place::Stream(name) = &place
        && let WriteCheck::Refused(why) = s.write_refusal(&[(String::new(), name.clone())]).await
    {
        return Err(Failure::failed(format!("{why}; nothing moved")));
    }
    if !go_ahead(a.yes, count, "archive", count > 100)? {
        crate::errln!("nothing moved");
        return Ok(exit::FAILED);
    }
    let st = store
        .as_ref()
        .ok_or_else(|| Failure::failed("Warren's store is not open; nothing moved"))?;
    let stamp = Stamp {
        from: queue.clone(),
        by: format!("{}@{}", store::current_os_user(), s.whoami.name),
        reason,
    };
    let work = keep::archive_work(&s, &place, stamp, &sel, count).map_err(Failure::failed)?;
    let mut record = commands::OnRecord::begin(
        c,
        &s,
        Some(st),
        Operation::Archive,
        &audit_start(&s, &queue, vec![place.label()], &a.pick, filter.as_ref()),
        !a.yes,
        a.json,
    )
    .await?;
    let result = commands::drive(a.json, |cancel, progress| {
        s.run_job(&spec, work, cancel, progress)
    })
    .await;
    commands::finish_run(Some(st), &mut record, result, a.json).await
}

/// `warren archive list`: the archive explained like `show`, with who, when and why.
async fn list(
    c: &ConnArgs,
    pick: &Pick,
    from: Option<&str>,
    groups: bool,
    local: bool,
    json: bool,
) -> Result<i32, Failure> {
    let filter = commands::parse_filter(pick.filter.as_deref())?;
    let s = commands::open(c).await?;
    let Some(place) = place_for_reading(&s, local).await? else {
        if !json {
            crate::outln!(
                "no archive in vhost '{}' yet (stream '{}' does not exist): nothing was archived here",
                one_line(s.vhost(), 80),
                one_line(&s.target.archive.stream, 80)
            );
        }
        return Ok(exit::OK);
    };
    let window = pick.window.unwrap_or(s.target.settings.replay.window);
    let messages = read_archive(&s, &place, window).await?;
    let chosen = pick_archived(&s, messages, pick, filter, from).await?;
    let shown: Vec<Explained> = chosen.into_iter().map(|(_, e)| e).collect();
    if groups {
        commands::print_groups(
            &shown,
            commands::GroupsOutput { json, by: pick.by },
            &crate::domain::grouping::WaitQueues::default(),
            &[],
        );
    } else {
        commands::print_messages(
            &shown,
            json,
            None,
            |_, _| Vec::new(),
            &BTreeMap::new(),
            &std::collections::HashMap::new(),
        );
    }
    if shown.is_empty() && !json {
        crate::outln!("nothing in the {} matches", one_line(&place.label(), 200));
    }
    Ok(exit::OK)
}

/// Explains archived messages and picks those the selection, `--from` and `--limit` take.
async fn pick_archived(
    s: &Session,
    messages: Vec<(String, DeadLetter)>,
    pick: &Pick,
    filter: Option<Filter>,
    from: Option<&str>,
) -> Result<Vec<(String, Explained)>, Failure> {
    let selection = commands::selection_of(s, pick.group.as_deref(), pick.by, filter).await?;
    let (refs, msgs): (Vec<String>, Vec<DeadLetter>) = messages.into_iter().unzip();
    let explained = session::explain_all(
        msgs,
        &session::Remembered::default(),
        &s.target.settings.conventions,
    );
    let now = jiff::Timestamp::now();
    Ok(refs
        .into_iter()
        .zip(explained)
        .filter(|(_, e)| {
            from.is_none_or(|f| {
                archive::archived(&e.message)
                    .and_then(|a| a.from)
                    .as_deref()
                    == Some(f)
            }) && selection.selects(
                &e.message,
                &e.explanation,
                &e.key,
                session::age_secs(e, now),
            )
        })
        .take(
            pick.limit
                .map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX)),
        )
        .collect())
}

pub async fn restore(c: &ConnArgs, a: &RestoreArgs) -> Result<i32, Failure> {
    let filter = commands::parse_filter(a.pick.filter.as_deref())?;
    let s = commands::open(c).await?;
    if !a.dry_run && s.target.read_only {
        return Err(read_only(&s, "restore"));
    }
    let Some(place) = place_for_reading(&s, a.local).await? else {
        return Err(Failure::failed(format!(
            "no archive in vhost '{}' (stream '{}' does not exist): nothing to restore",
            one_line(s.vhost(), 80),
            one_line(&s.target.archive.stream, 80)
        )));
    };
    let st = Store::open_default().map_err(|e| Failure::failed(format!("{e}; nothing moved")))?;
    let key = place.key(&s);
    let window = a.pick.window.unwrap_or(s.target.settings.replay.window);
    let messages = read_archive(&s, &place, window).await?;
    // Already restored ones are not chosen (unless --again), so --limit counts the others.
    let refs: Vec<String> = messages.iter().map(|(r, _)| r.clone()).collect();
    let before = st
        .restored_among(&key, &refs)
        .map_err(|e| Failure::failed(e.to_string()))?;
    let (again, fresh): (Vec<_>, Vec<_>) =
        messages.into_iter().partition(|(r, _)| before.contains(r));
    let mut candidates = fresh;
    let mut skipped_again = 0u64;
    if a.again {
        candidates.extend(again);
        candidates.sort_by_key(|(_, m)| m.delivery.stream_offset.unwrap_or(m.position));
    } else {
        skipped_again = pick_archived(
            &s,
            again,
            &Pick {
                limit: None,
                ..a.pick.clone()
            },
            filter.clone(),
            a.from.as_deref(),
        )
        .await?
        .len() as u64;
    }
    let chosen = pick_archived(&s, candidates, &a.pick, filter.clone(), a.from.as_deref()).await?;
    if skipped_again > 0 {
        crate::errln!(
            "  {skipped_again} matching message(s) were restored before and are left out: a stream never forgets them (--again restores them again)"
        );
    }
    if chosen.is_empty() {
        let why = if skipped_again > 0 {
            format!(
                "every matching message was restored before ({skipped_again}); --again restores them again"
            )
        } else {
            format!("no archived message in the {} matches", place.label())
        };
        if a.json {
            print_line(
                &json!({"event": "plan", "operation": "restore", "selected": 0, "restored_before": skipped_again, "refusals": [why]}),
            );
        }
        return Err(Failure::failed(format!("nothing restored: {why}")));
    }
    if a.replay {
        return restore_replay(c, &s, &st, &place, &key, chosen, a, filter.as_ref()).await;
    }

    // Back into the queue each came from, as archived, without the archive's headers.
    let mut by_queue: BTreeMap<String, u64> = BTreeMap::new();
    let mut refused: Vec<String> = Vec::new();
    let mut items = Vec::new();
    let mut keys_of = std::collections::HashMap::new();
    for (r, e) in &chosen {
        let Some(from) = archive::archived(&e.message).and_then(|x| x.from) else {
            refused.push(format!(
                "archive message {} has no {} header: restore it with --replay",
                one_line(r, 40),
                archive::FROM
            ));
            continue;
        };
        match crate::broker::amqp::properties_to_amqp(
            &e.message.properties,
            &archive::restored_headers(&e.message.headers),
        ) {
            Ok(props) => {
                *by_queue.entry(from.clone()).or_insert(0) += 1;
                keys_of.insert(r.clone(), e.key.clone());
                items.push(Publish {
                    reference: r.clone(),
                    exchange: String::new(),
                    routing_key: from,
                    props,
                    body: e.message.body.clone(),
                });
            }
            Err(err) => refused.push(format!("archive message {}: {err}", one_line(r, 40))),
        }
    }
    for q in by_queue.keys() {
        if !s.queue_exists(q).await.map_err(broker_failure)? {
            refused.push(format!(
                "queue '{}' does not exist in vhost '{}' any more: restore its messages with --replay, or create it",
                one_line(q, 80),
                one_line(s.vhost(), 80)
            ));
        }
    }
    let verb = if a.dry_run {
        "Would restore"
    } else {
        "Restore"
    };
    crate::errln!(
        "{verb} {} message(s) from the archive ({}) into the queues they came from:",
        items.len(),
        one_line(&place.label(), 200)
    );
    for (q, n) in &by_queue {
        crate::errln!("  {n:>6} → {}", one_line(q, 120));
    }
    crate::errln!(
        "  removes  {}; body, properties and every other header as archived",
        archive::HEADERS.join(", ")
    );
    for r in &refused {
        crate::errln!("  ✗ {}", one_line(r, 400));
    }
    if a.json {
        print_line(&json!({
            "event": "plan",
            "operation": "restore",
            "selected": items.len(),
            "targets": by_queue,
            "restored_before": skipped_again,
            "removes": archive::HEADERS,
            "refusals": refused,
        }));
    }
    if !refused.is_empty() {
        return Err(Failure::failed(format!(
            "nothing restored: {}",
            refused.join("; ")
        )));
    }
    if a.dry_run {
        return Ok(exit::OK);
    }
    let targets: Vec<(String, String)> = by_queue
        .keys()
        .map(|q| (String::new(), q.clone()))
        .collect();
    if let WriteCheck::Refused(why) = s.write_refusal(&targets).await {
        return Err(Failure::failed(format!("{why}; nothing restored")));
    }
    let count = items.len() as u64;
    if !go_ahead(a.yes, count, "restore", count > 100)? {
        crate::errln!("nothing restored");
        return Ok(exit::FAILED);
    }
    let mut record = commands::OnRecord::begin(
        c,
        &s,
        Some(&st),
        Operation::Restore,
        &audit_start(
            &s,
            &place.label(),
            by_queue.keys().cloned().collect(),
            &a.pick,
            filter.as_ref(),
        ),
        !a.yes,
        a.json,
    )
    .await?;
    publish_and_record(&s, &st, &mut record, &key, items, &keys_of, a.json).await
}

/// Publishes restored messages with confirms, remembers each confirmed one, and completes the
/// audit record. Exit 0 only when every one was confirmed.
async fn publish_and_record(
    s: &Session,
    st: &Store,
    record: &mut commands::OnRecord,
    key: &str,
    items: Vec<Publish>,
    keys_of: &std::collections::HashMap<String, String>,
    json: bool,
) -> Result<i32, Failure> {
    let total = items.len() as u64;
    let conn = s
        .connection("warren-restore")
        .await
        .map_err(broker_failure)?;
    // Each batch's confirmed messages are remembered before the next batch goes: a restore
    // killed halfway does not forget what it already put back.
    let mut unrecorded: Option<String> = None;
    let result = keep::publish_confirmed(&conn, items, |batch, done, failed| {
        let confirmed: Vec<String> = batch
            .iter()
            .filter(|(_, p)| *p == Published::Confirmed)
            .map(|(r, _)| r.clone())
            .collect();
        if let Err(e) =
            st.record_restored(key, &confirmed, record.audit_id(), jiff::Timestamp::now())
        {
            unrecorded.get_or_insert(e.to_string());
        }
        if json {
            print_line(&json!({"event": "progress", "moved": done, "failed": failed, "remaining": total.saturating_sub(done + failed)}));
        } else {
            crate::err!("\r  restored {done}  failed {failed}  of {total}   ");
        }
    })
    .await;
    let _ = conn.close(200, "restore done".into()).await;
    if !json {
        crate::errln!();
    }
    let results = match result {
        Ok(r) => r,
        Err(e) => {
            let out = AuditOutcome {
                at: jiff::Timestamp::now(),
                moved: 0,
                returned: 0,
                failed: 0,
                remaining: total,
                message_ids: Vec::new(),
                duplicated: 0,
                duplicate_ids: Vec::new(),
                outcome: format!("failed: {e}"),
            };
            record.finish(Some(st), out, &Spool::default()).await;
            return Err(Failure::broker(format!("{e}; nothing restored")));
        }
    };
    let confirmed: Vec<String> = results
        .iter()
        .filter(|(_, p)| *p == Published::Confirmed)
        .map(|(r, _)| r.clone())
        .collect();
    let mut problems: BTreeMap<String, u64> = BTreeMap::new();
    let mut maybe: Vec<String> = Vec::new();
    for (r, p) in &results {
        if let Published::Failed { why, maybe_arrived } = p {
            *problems.entry(why.clone()).or_insert(0) += 1;
            if *maybe_arrived {
                maybe.push(keys_of.get(r).cloned().unwrap_or_else(|| r.clone()));
            }
        }
    }
    let failed = total - confirmed.len() as u64;
    let outcome = if failed == 0 {
        "completed".to_string()
    } else if confirmed.is_empty() {
        format!(
            "failed: {}",
            problems.keys().cloned().collect::<Vec<_>>().join("; ")
        )
    } else {
        format!("partial: {failed} failed")
    };
    let out = AuditOutcome {
        at: jiff::Timestamp::now(),
        moved: confirmed.len() as u64,
        returned: 0,
        failed,
        remaining: 0,
        message_ids: confirmed
            .iter()
            .map(|r| keys_of.get(r).cloned().unwrap_or_else(|| r.clone()))
            .collect(),
        duplicated: maybe.len() as u64,
        duplicate_ids: maybe.clone(),
        outcome: outcome.clone(),
    };
    record.finish(Some(st), out, &Spool::default()).await;
    if let Some(e) = unrecorded {
        crate::errln!(
            "warren: the {} restored message(s) could not be remembered ({e}): a second restore would not know them",
            confirmed.len()
        );
    }
    if json {
        print_line(&json!({
            "event": "summary",
            "moved": confirmed.len(),
            "failed": failed,
            "problems": problems,
            "duplicated": maybe.len(),
            "outcome": outcome,
        }));
    } else {
        crate::errln!("restored {}, failed {failed}", confirmed.len());
        for (why, n) in &problems {
            crate::errln!("  ! {n} × {}", one_line(why, 300));
        }
        if outcome != "completed" {
            crate::errln!("{}", one_line(&outcome, 600));
        }
    }
    Ok(if failed == 0 { exit::OK } else { exit::FAILED })
}

/// `warren restore --replay`: the archived messages (without the archive's headers) go through
/// the replay's plan and preview, then are published where they failed.
#[allow(clippy::too_many_arguments)]
async fn restore_replay(
    c: &ConnArgs,
    s: &Session,
    st: &Store,
    place: &Place,
    key: &str,
    chosen: Vec<(String, Explained)>,
    a: &RestoreArgs,
    filter: Option<&Filter>,
) -> Result<i32, Failure> {
    let archive_name = match place {
        Place::Stream(n) => n.clone(),
        Place::Local(..) => "warren archive (local)".to_string(),
    };
    let (refs, messages): (Vec<String>, Vec<DeadLetter>) = chosen
        .into_iter()
        .map(|(r, e)| {
            let mut m = e.message;
            m.headers = archive::restored_headers(&m.headers);
            (r, m)
        })
        .unzip();
    let spec = ReplaySpec {
        queue: archive_name.clone(),
        selection: Selection::All,
        limit: None,
        rate: None,
        to: a.to.clone(),
        allow_fan_out: a.allow_fan_out,
        keep_attempts: a.keep_attempts,
        clear_expiry: false,
        window: messages.len().max(1),
        consent: commands::consent(c),
        // Shown, not published: the run gets its id when it starts.
        run_id: None,
    };
    let depth = messages.len() as u64;
    let preview = s
        .preview_of(&spec, messages.clone(), depth, |keys| {
            s.remember(st, &archive_name, keys, jiff::Timestamp::now())
                .unwrap_or_default()
        })
        .await
        .map_err(broker_failure)?;
    commands::print_preview(&preview, &spec, a.dry_run);
    if a.json {
        print_line(&json!({
            "event": "plan",
            "operation": "restore",
            "replay": true,
            "selected": preview.selected,
            "targets": preview.targets.keys().collect::<Vec<_>>(),
            "refusals": preview.refusals,
        }));
    }
    if !preview.refusals.is_empty() {
        return Err(Failure::failed(format!(
            "nothing restored: {}",
            preview.refusals.join("; ")
        )));
    }
    if a.dry_run {
        return Ok(exit::OK);
    }
    if let WriteCheck::Refused(why) = s.write_refusal(&preview.publish_targets()).await {
        return Err(Failure::failed(format!("{why}; nothing restored")));
    }
    let start = audit_start(
        s,
        &place.label(),
        preview.targets.keys().cloned().collect(),
        &a.pick,
        filter,
    );
    let job = Job {
        run_id: Some(start.run_id.clone()),
        message_bytes: None,
        action: Action::Replay,
        dlq: archive_name.clone(),
        selection: Selection::All,
        limit: None,
        rate: None,
        window: spec.window,
        keep_attempts: a.keep_attempts,
        clear_expiry: false,
        to: a.to.clone(),
        allowed_targets: preview.allowed.clone(),
        redirects: preview.redirects.clone(),
        replays: preview.replays.clone(),
        ages: Default::default(),
        quorum: crate::domain::quorum::BrowsePolicy::unrestricted(),
        settle_lag: std::time::Duration::ZERO,
        conventions: s.target.settings.conventions.clone(),
        checks: None,
    };
    let mut items = Vec::new();
    let mut kept: BTreeMap<String, u64> = BTreeMap::new();
    let mut keys_of = std::collections::HashMap::new();
    for (r, m) in refs.into_iter().zip(messages) {
        let k = identity::message_key(&m);
        let exp = crate::domain::explain::explain_with(
            &m,
            &s.target.settings.conventions,
            preview.replays.get(&k).copied().unwrap_or(0),
        );
        match replay::plan_publish(&job, &m, &exp) {
            Ok(p) => {
                keys_of.insert(r.clone(), k);
                items.push(Publish {
                    reference: r,
                    exchange: p.exchange.as_str().to_string(),
                    routing_key: p.routing_key.as_str().to_string(),
                    props: p.props,
                    body: m.body,
                });
            }
            Err(Decision::Keep(why) | Decision::Refuse(why)) => {
                *kept.entry(why).or_insert(0) += 1;
            }
            Err(_) => {}
        }
    }
    for (why, n) in &kept {
        crate::errln!("  stays in the archive: {n} × {}", one_line(why, 300));
    }
    let count = items.len() as u64;
    if count == 0 {
        return Err(Failure::failed(
            "nothing restored: no message can be replayed",
        ));
    }
    if !go_ahead(a.yes, count, "replay", count > 100)? {
        crate::errln!("nothing restored");
        return Ok(exit::FAILED);
    }
    let mut record =
        commands::OnRecord::begin(c, s, Some(st), Operation::Replay, &start, !a.yes, a.json)
            .await?;
    publish_and_record(s, st, &mut record, key, items, &keys_of, a.json).await
}

pub async fn discard(c: &ConnArgs, a: &DiscardArgs) -> Result<i32, Failure> {
    let filter = commands::parse_filter(a.pick.filter.as_deref())?;
    let s = commands::open(c).await?;
    if !a.dry_run && s.target.read_only {
        return Err(read_only(&s, "discard"));
    }
    let store = match Store::open_default() {
        Ok(st) => Some(st),
        Err(e) if !a.dry_run => return Err(Failure::failed(format!("{e}; nothing deleted"))),
        Err(_) => None,
    };
    let spec = spec_for(
        &s,
        &a.queue,
        &a.pick,
        filter.clone(),
        commands::consent(c),
        None,
    )
    .await?;
    // Whole bodies: the snapshot is the only copy left.
    let sel = select(c, &s, &spec, usize::MAX, store.as_ref()).await?;
    let count = sel.messages.len() as u64;
    let snapshot = if a.no_snapshot {
        None
    } else {
        Some(match &a.output {
            Some(p) => p.clone(),
            None => discard_path(&a.queue)?,
        })
    };
    let verb = if a.dry_run {
        "Would discard"
    } else {
        "Discard"
    };
    crate::errln!("{} for good", plan_lines(verb, &spec, &sel, count));
    match &snapshot {
        Some(p) => crate::errln!(
            "  snapshot of exactly these first → {} (`warren open` reads it); only what it holds is deleted",
            p.display()
        ),
        None => crate::errln!("  ! no snapshot (--no-snapshot): they cannot be brought back"),
    }
    if a.json {
        print_line(&json!({
            "event": "plan",
            "operation": "discard",
            "queue": a.queue,
            "selected": count,
            "matched": sel.matched,
            "examined": sel.examined,
            "depth": sel.depth,
            "snapshot": snapshot.as_ref().map(|p| p.display().to_string()),
        }));
    }
    if count == 0 {
        return Err(Failure::failed(
            "nothing deleted: no message matches the selection at the head of the queue",
        ));
    }
    if a.dry_run {
        return Ok(exit::OK);
    }
    if let Some(p) = &snapshot
        && p.exists()
    {
        return Err(Failure::usage(format!(
            "{} exists: Warren never overwrites a snapshot; choose another with -o; nothing deleted",
            p.display()
        )));
    }
    // Deleting needs the count typed, whatever it is.
    if !go_ahead(a.yes, count, "delete", true)? {
        crate::errln!("nothing deleted");
        return Ok(exit::FAILED);
    }
    let st = store
        .as_ref()
        .ok_or_else(|| Failure::failed("Warren's store is not open; nothing deleted"))?;
    let work =
        keep::discard_work(&s, &a.queue, snapshot.as_deref(), &sel).map_err(Failure::failed)?;
    if let Some(p) = &snapshot {
        crate::errln!("snapshot written: {} message(s) in {}", count, p.display());
    }
    let target = snapshot
        .as_ref()
        .map_or("nowhere (--no-snapshot)".to_string(), |p| {
            format!("snapshot {}", p.display())
        });
    let mut record = commands::OnRecord::begin(
        c,
        &s,
        Some(st),
        Operation::Discard,
        &audit_start(&s, &a.queue, vec![target], &a.pick, filter.as_ref()),
        !a.yes,
        a.json,
    )
    .await?;
    let result = commands::drive(a.json, |cancel, progress| {
        s.run_job(&spec, work, cancel, progress)
    })
    .await;
    commands::finish_run(Some(st), &mut record, result, a.json).await
}

fn discard_path(queue: &str) -> Result<PathBuf, Failure> {
    keep::discard_path(queue).map_err(Failure::usage)
}
