//! `warren archive`, `archive list`, `restore` and `discard`: the other ways out of a dead-letter
//! queue. Archive and discard run the replay engine (`replay::Action`), with its guarantees;
//! restore publishes what the archive holds with confirms and remembers what it restored.

use serde_json::json;

use super::args::{ArchiveArgs, ArchiveCommand, ConnArgs, DiscardArgs, Pick, RestoreArgs};
use super::commands::{self, broker_failure, print_line};
use super::front::CliFront;
use super::{Failure, exit};
use super::{groups, run_print, show};
use crate::broker::archive::{self as keep, Place, StreamState};
use crate::broker::restore::{self, ArchiveRead};
use crate::broker::session::{Explained, ReplaySpec, Session};
use crate::domain::filter::Filter;
use crate::domain::sanitize::one_line;
use crate::ops::{
    self,
    archive::{ArchiveRequest, Way},
    restore::{ArchiveOf, Replaying, RestoreRequest},
};

fn local_place(s: &Session, why: &str) -> Result<Place, Failure> {
    keep::local_place(s, why).map_err(Failure::failed)
}

/// Where the archive is for reading: the local file when chosen, else the stream (`None`: there
/// is none yet).
async fn place_for_reading(s: &Session, local: bool) -> Result<Option<Place>, Failure> {
    if local || s.handle.target.archive.local || !s.handle.streams_supported() {
        return local_place(s, "local archive").map(Some);
    }
    let name = s.handle.target.archive.stream.clone();
    match s.handle.archive_state().await.map_err(broker_failure)? {
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
            one_line(&s.handle.target.archive.max_age, 20),
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

/// The selection, limit, window, rate and read consent of an archive or a discard.
async fn spec_for(
    c: &ConnArgs,
    s: &Session,
    queue: &str,
    pick: &Pick,
    filter: Option<Filter>,
    rate: Option<f64>,
) -> Result<ReplaySpec, Failure> {
    Ok(ReplaySpec {
        selection: commands::selection_of(s, pick.group.as_deref(), pick.by, filter).await?,
        limit: pick.limit,
        rate,
        consent: commands::consent(c),
        // Archive and discard write no replay header: no run id.
        ..ReplaySpec::all_of(
            queue,
            pick.window
                .unwrap_or(s.handle.target.settings.replay.window),
        )
    })
}

/// An archive or a discard through its one home (`ops::archive`), run with the CLI's signals
/// and progress.
async fn archive_or_discard(
    c: &ConnArgs,
    s: &Session,
    req: ArchiveRequest,
    yes: bool,
    json: bool,
) -> Result<i32, Failure> {
    let op = req.way.op();
    let mut front = CliFront::new(c, yes, json).of(s);
    let mut ready = match ops::archive::prepare(s, req, &mut front).await {
        Ok(r) => r,
        Err(stop) => return commands::stopped(stop),
    };
    let result = commands::drive(json, |cancel, progress| ready.run(cancel, progress)).await;
    let place = ready.place().to_string();
    let notes = ready.finish(&result).await;
    run_print::report_run(result, notes, json, (op, Some(&place)))
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
    let spec = spec_for(c, &s, &queue, &a.pick, filter.clone(), a.rate).await?;
    let req = ArchiveRequest {
        spec,
        way: Way::Archive {
            local: a.local,
            create: a.create_archive,
            reason: a.reason.clone().unwrap_or_default(),
        },
        dry_run: a.dry_run,
        filter: filter.as_ref().map(|f| f.to_string()),
        group: a.pick.group.clone(),
    };
    archive_or_discard(c, &s, req, a.yes, a.json).await
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
                one_line(&s.handle.target.archive.stream, 80)
            );
        }
        return Ok(exit::OK);
    };
    let window = pick
        .window
        .unwrap_or(s.handle.target.settings.replay.window);
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
            &json!({"event": "expired", "dropped": read.expired, "max_age": s.handle.target.archive.max_age, "archive": place.json(&s.handle.target.archive.max_age)}),
        );
    }
    if groups {
        groups::print_groups(
            &shown,
            groups::GroupsOutput { json, by: pick.by },
            &crate::domain::grouping::WaitQueues::default(),
            &[],
        );
    } else {
        show::print_messages(
            &shown,
            json,
            None,
            |_, _| Vec::new(),
            &show::Rests::default(),
            &std::collections::HashMap::new(),
            &crate::domain::redirect::Redirects::default(),
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
    let req = RestoreRequest {
        archive: ArchiveOf::Configured { local: a.local },
        selection: commands::selection_of(&s, a.pick.group.as_deref(), a.pick.by, filter.clone())
            .await?,
        from: a.from.clone(),
        limit: a.pick.limit,
        window: a.pick.window,
        again: a.again,
        trust_unsigned: a.trust_unsigned,
        replay: a.replay.then(|| Replaying {
            to: a.to.clone(),
            allow_fan_out: a.allow_fan_out,
            keep_attempts: a.keep_attempts,
            consent: Some(commands::consent(c)),
        }),
        dry_run: a.dry_run,
        filter: filter.as_ref().map(|f| f.to_string()),
        group: a.pick.group.clone(),
    };
    let mut front = CliFront::new(c, a.yes, a.json).of(&s);
    let mut ready = match ops::restore::prepare(&s, req, &mut front).await {
        Ok(r) => r,
        Err(stop) => return commands::stopped(stop),
    };
    let out = publish_with_signals(&mut ready, a.json).await;
    let Some(out) = out else {
        return Ok(exit::FAILED);
    };
    if !a.json {
        crate::errln!();
    }
    for note in ready.finish(&out).await {
        crate::errln!("warren: {}", one_line(&note, 600));
    }
    say_restored(&out, a.json)
}

/// The restore's publishing with its progress. The first signal stops it: what is in flight is
/// confirmed and remembered, nothing more is sent (as the TUI's cancel does); a second ends the
/// run at once, and it is recorded "interrupted". Should the run not come back soon after that
/// (`None`), the record stays "interrupted" too.
async fn publish_with_signals(
    ready: &mut ops::restore::Ready<'_, Session>,
    json: bool,
) -> Option<restore::Outcome> {
    let (stop, cancel) = tokio::sync::watch::channel(false);
    let mut signals = commands::signals();
    let publishing = ready.run(&cancel, |done, failed, total| {
        if json {
            print_line(
                &json!({"event": "progress", "moved": done, "failed": failed, "remaining": total.saturating_sub(done + failed)}),
            );
        } else {
            crate::err!("\r  restored {done}  failed {failed}  of {total}   ");
        }
    });
    tokio::pin!(publishing);
    let mut backstop: Option<tokio::time::Instant> = None;
    loop {
        tokio::select! {
            out = &mut publishing => return Some(out),
            Some(name) = signals.recv() => {
                if !*stop.borrow() {
                    crate::errln!("\nstopping ({name}): the publishes in flight are confirmed and remembered first; {name} again stops at once");
                } else {
                    crate::errln!("\nstopping now ({name}): what is confirmed and not yet remembered is not remembered, so a later restore may put it back again; `warren audit` shows this run as interrupted");
                    backstop.get_or_insert(tokio::time::Instant::now() + commands::FORCE_GRACE);
                }
                let _ = stop.send(true);
            }
            () = async { match backstop { Some(b) => tokio::time::sleep_until(b).await, None => std::future::pending().await } } => return None,
        }
    }
}

/// A restore's summary and exit code: 0 only when every one was confirmed.
fn say_restored(out: &restore::Outcome, json: bool) -> Result<i32, Failure> {
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
            "returned": out.audit.returned,
            "remaining": out.audit.remaining,
            "problems": out.problems,
            "duplicated": out.audit.duplicated,
            "outcome": out.audit.outcome,
        }));
    } else {
        for line in out.lines() {
            crate::errln!("{line}");
        }
    }
    Ok(if out.completed() {
        exit::OK
    } else {
        exit::FAILED
    })
}

pub async fn discard(c: &ConnArgs, a: &DiscardArgs) -> Result<i32, Failure> {
    let filter = commands::parse_filter(a.pick.filter.as_deref())?;
    let s = commands::open(c).await?;
    let snapshot = if a.no_snapshot {
        None
    } else {
        Some(match &a.output {
            Some(p) => p.clone(),
            None => keep::discard_path(&a.queue).map_err(Failure::usage)?,
        })
    };
    let spec = spec_for(c, &s, &a.queue, &a.pick, filter.clone(), None).await?;
    let req = ArchiveRequest {
        spec,
        way: Way::Discard { snapshot },
        dry_run: a.dry_run,
        filter: filter.as_ref().map(|f| f.to_string()),
        group: a.pick.group.clone(),
    };
    archive_or_discard(c, &s, req, a.yes, a.json).await
}
