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
use crate::broker::archive::{self as keep, DeclareError, Place, StreamState};
use crate::broker::restore::{self, ArchiveRead};
use crate::broker::session::{self, Explained, ReadConsent, ReplaySpec, Session, WriteCheck};
use crate::domain::archive::{self, Stamp};
use crate::domain::filter::Filter;
use crate::domain::identity;
use crate::domain::sanitize::one_line;
use crate::domain::selection::Selection;
use crate::store::{self, AuditStart, Operation, Store};

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

/// Says how many entries of a local archive expired and were dropped, if any.
fn say_expired(s: &Session, place: &Place, expired: u64) {
    if expired > 0 {
        crate::errln!(
            "{expired} expired, dropped: archived longer ago than archive_max_age ({}) from {}",
            one_line(&s.target.archive.max_age, 20),
            one_line(&place.label(), 200)
        );
    }
}

/// What the archive holds (see `broker::restore::read_archive`); a local archive's expired
/// entries are dropped first, and said.
async fn read_archive(s: &Session, place: &Place, window: usize) -> Result<ArchiveRead, Failure> {
    let read = restore::read_archive(s, place, window)
        .await
        .map_err(Failure::failed)?;
    say_expired(s, place, read.expired);
    read.notes.iter().for_each(|n| crate::errln!("warren: {n}"));
    // The archive is read from its oldest message: a busy one holds more than a window, and
    // what was archived last would silently not be among what is listed or restored.
    if read.cut_short {
        crate::errln!(
            "warren: the broker stopped delivering the archive before its end ({} read): later ones are not listed or chosen here; try again when it is less busy",
            read.messages.len()
        );
    }
    if read.window_full {
        crate::errln!(
            "warren: only the first {window} archived messages (the oldest) were looked at: later ones are not listed or chosen here; --window N looks further"
        );
    }
    Ok(read)
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
    keep::retention_refusal(&s, &place)
        .await
        .map_err(Failure::failed)?;
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
    let read = read_archive(&s, &place, window).await?;
    let selection = commands::selection_of(&s, pick.group.as_deref(), pick.by, filter).await?;
    let limit = pick
        .limit
        .map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
    let selects = restore::selects(&selection, from);
    let shown: Vec<Explained> = restore::explain(&s, read.messages)
        .into_iter()
        .map(|(_, e)| e)
        .filter(|e| selects(e))
        .take(limit)
        .collect();
    if json && read.expired > 0 {
        print_line(
            &json!({"event": "expired", "dropped": read.expired, "max_age": s.target.archive.max_age, "archive": place.json(&s.target.archive.max_age)}),
        );
    }
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
    let mut st =
        Store::open_default().map_err(|e| Failure::failed(format!("{e}; nothing moved")))?;
    let key = place.key(&s);
    // The whole archive is looked through, a page at a time; one restore takes at most a
    // window's worth, and a second one the next (what was restored is remembered).
    let window = a.pick.window.unwrap_or(s.target.settings.replay.window);
    let ask = restore::Ask {
        selection: commands::selection_of(&s, a.pick.group.as_deref(), a.pick.by, filter.clone())
            .await?,
        from: a.from.clone(),
        limit: a.pick.limit,
        again: a.again,
    };
    let read = restore::read_and_choose(&s, &mut st, &key, &place, &ask, window)
        .await
        .map_err(Failure::failed)?;
    say_expired(&s, &place, read.expired);
    read.notes.iter().for_each(|n| crate::errln!("warren: {n}"));
    match restore::unvouched_refusal(&read.unvouched, a.trust_unsigned) {
        Ok(note) => note.iter().for_each(|n| crate::errln!("warren: {n}")),
        Err(why) => return Err(Failure::failed(format!("nothing restored: {why}"))),
    }
    if read.cut_short {
        crate::errln!(
            "warren: the broker stopped delivering the archive after {} messages, before its end: later ones are not chosen here; try again when it is less busy",
            read.scanned
        );
    }
    if read.capped {
        crate::errln!(
            "warren: one restore takes at most {window} (--window N): more match; run it again after this one for the next ones"
        );
    }
    let more_match = read.capped;
    let chosen = read.chosen;
    let skipped_again = chosen.restored_before;
    if skipped_again > 0 && !a.again {
        crate::errln!(
            "  {skipped_again} matching message(s) were restored before and are left out: a stream never forgets them (--again restores them again)"
        );
    }
    if chosen.messages.is_empty() {
        let why = restore::nothing_chosen(&place, skipped_again);
        if a.json {
            print_line(
                &json!({"event": "plan", "operation": "restore", "selected": 0, "restored_before": skipped_again, "refusals": [why]}),
            );
        }
        return Err(Failure::failed(format!("nothing restored: {why}")));
    }
    if a.replay {
        return restore_replay(
            c,
            &s,
            &st,
            &place,
            &key,
            chosen.messages,
            a,
            filter.as_ref(),
        )
        .await;
    }

    // Back into the queue each came from, as archived, without the archive's headers.
    let plan = restore::plan_back(&s, &chosen.messages)
        .await
        .map_err(Failure::broker)?;
    let verb = if a.dry_run {
        "Would restore"
    } else {
        "Restore"
    };
    crate::errln!(
        "{verb} {} message(s) from the archive ({}) into the queues they came from:",
        chosen.messages.len(),
        one_line(&place.label(), 200)
    );
    for (q, n) in &plan.targets {
        crate::errln!("  {n:>6} → {}", one_line(q, 120));
    }
    crate::errln!(
        "  removes  {}; body, properties and every other header as archived",
        archive::HEADERS.join(", ")
    );
    for r in &plan.refused {
        crate::errln!("  ✗ {}", one_line(r, 400));
    }
    if a.json {
        print_line(&json!({
            "event": "plan",
            "operation": "restore",
            "selected": chosen.messages.len(),
            "targets": plan.targets,
            "restored_before": skipped_again,
            "more_match": more_match,
            "removes": archive::HEADERS,
            "refusals": plan.refused,
        }));
    }
    if !plan.refused.is_empty() {
        return Err(Failure::failed(format!(
            "nothing restored: {}",
            plan.refused.join("; ")
        )));
    }
    if a.dry_run {
        return Ok(exit::OK);
    }
    let start = audit_start(
        &s,
        &place.label(),
        plan.targets.keys().cloned().collect(),
        &a.pick,
        filter.as_ref(),
    );
    go_and_publish(c, &s, &st, &key, plan, Operation::Restore, &start, a).await
}

/// The write check, the go-ahead, the record, then the restore's publishing (the same as the
/// TUI's, `broker::restore::publish`) with its progress and outcome said. Exit 0 only when every
/// one was confirmed.
#[allow(clippy::too_many_arguments)]
async fn go_and_publish(
    c: &ConnArgs,
    s: &Session,
    st: &Store,
    key: &str,
    plan: restore::Plan,
    op: Operation,
    start: &AuditStart,
    a: &RestoreArgs,
) -> Result<i32, Failure> {
    if let WriteCheck::Refused(why) = s.write_refusal(&plan.publish_targets).await {
        return Err(Failure::failed(format!("{why}; nothing restored")));
    }
    let count = plan.count();
    let verb = if op == Operation::Replay {
        "replay"
    } else {
        "restore"
    };
    if !go_ahead(a.yes, count, verb, count > 100)? {
        crate::errln!("nothing restored");
        return Ok(exit::FAILED);
    }
    let mut record = commands::OnRecord::begin(c, s, Some(st), op, start, !a.yes, a.json).await?;
    // The first signal stops it between batches (the one in flight is settled and remembered,
    // as the TUI's cancel does); a second stops at once and leaves the record "interrupted".
    let (stop, cancel) = tokio::sync::watch::channel(false);
    let mut signals = commands::signals();
    let json = a.json;
    let remember = restore::remember_in(st, key.to_string(), record.audit_id());
    let publishing = restore::publish(s, plan, &cancel, remember, |done, failed, total| {
        if json {
            print_line(
                &json!({"event": "progress", "moved": done, "failed": failed, "remaining": total.saturating_sub(done + failed)}),
            );
        } else {
            crate::err!("\r  restored {done}  failed {failed}  of {total}   ");
        }
    });
    tokio::pin!(publishing);
    let out = loop {
        tokio::select! {
            out = &mut publishing => break out,
            Some(name) = signals.recv() => {
                if !*stop.borrow() {
                    crate::errln!("\nstopping ({name}): the batch in flight is confirmed and remembered first; {name} again stops at once");
                    let _ = stop.send(true);
                } else {
                    crate::errln!("\nstopped at once ({name}): what the batch in flight put back is not remembered, so a later restore may put it back again; `warren audit` shows this run as interrupted");
                    return Ok(exit::FAILED);
                }
            }
        }
    };
    if !json {
        crate::errln!();
    }
    record
        .finish(
            Some(st),
            out.audit.clone(),
            &crate::broker::spool::Spool::default(),
        )
        .await;
    if let Some(e) = &out.error {
        return Err(Failure::broker(e.clone()));
    }
    if let Some(e) = &out.unrecorded {
        crate::errln!("warren: {}", restore::unrecorded_text(out.restored(), e));
    }
    if json {
        print_line(&json!({
            "event": "summary",
            "moved": out.restored(),
            "failed": out.failed(),
            "problems": out.problems,
            "duplicated": out.audit.duplicated,
            "outcome": out.audit.outcome,
        }));
    } else {
        crate::errln!("restored {}, failed {}", out.restored(), out.failed());
        for (why, n) in &out.problems {
            crate::errln!("  ! {n} × {}", one_line(why, 300));
        }
        if !out.completed() {
            crate::errln!("{}", one_line(&out.audit.outcome, 600));
        }
    }
    Ok(if out.completed() {
        exit::OK
    } else {
        exit::FAILED
    })
}

/// `warren restore --replay`: the archived messages (without the archive's headers) go through
/// the replay's plan and preview (`broker::restore::plan_replay`), then are published where they
/// failed.
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
    let mut start = audit_start(s, &place.label(), Vec::new(), &a.pick, filter);
    let way = restore::ReplayWay {
        to: a.to.clone(),
        allow_fan_out: a.allow_fan_out,
        keep_attempts: a.keep_attempts,
        consent: commands::consent(c),
        run_id: Some(start.run_id.clone()),
    };
    let plan = restore::plan_replay(s, place, chosen, &way, |name, keys| {
        s.remember(st, name, keys, jiff::Timestamp::now())
            .unwrap_or_default()
    })
    .await
    .map_err(Failure::broker)?;
    let Some(preview) = &plan.preview else {
        return Err(Failure::failed("nothing restored: the replay has no plan"));
    };
    let spec = ReplaySpec {
        queue: preview.queue.clone(),
        selection: Selection::All,
        limit: None,
        rate: None,
        to: a.to.clone(),
        allow_fan_out: a.allow_fan_out,
        keep_attempts: a.keep_attempts,
        clear_expiry: false,
        window: usize::try_from(preview.examined)
            .unwrap_or(usize::MAX)
            .max(1),
        consent: commands::consent(c),
        run_id: None,
    };
    commands::print_preview(preview, &spec, a.dry_run);
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
    if !plan.refused.is_empty() {
        return Err(Failure::failed(format!(
            "nothing restored: {}",
            plan.refused.join("; ")
        )));
    }
    if a.dry_run {
        return Ok(exit::OK);
    }
    for (why, n) in &plan.kept {
        crate::errln!("  stays in the archive: {n} × {}", one_line(why, 300));
    }
    if plan.count() == 0 {
        return Err(Failure::failed(
            "nothing restored: no message can be replayed",
        ));
    }
    start.targets = preview.targets.keys().cloned().collect();
    go_and_publish(c, s, st, key, plan, Operation::Replay, &start, a).await
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
