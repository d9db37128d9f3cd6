//! Restore: archived messages back into the queues they came from, or through the replay's plan
//! (`--replay`). The one home of `warren restore` and the TUI's `r` on the archive, on its ports
//! (`ops::ports::RestorePort` for the broker, the memory port for Warren's store), which
//! `Session` implements.

use std::collections::BTreeMap;

use tokio::sync::watch;

use super::ports::RestorePort;
use super::record::Record;
use super::rights::{self, Act};
use super::{Front, Plan, Refusal, Stop};
use crate::broker::archive::{Place, StreamState};
use crate::broker::restore::{self, Ask};
use crate::broker::session::{ReadConsent, WriteCheck};
use crate::domain::run::RunKind;
use crate::domain::sanitize::one_line;
use crate::domain::selection::Selection;
use crate::store::AuditStart;

/// Which archive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArchiveOf {
    /// The context's: its stream, or the local file (`local`, or where streams cannot be used).
    Configured { local: bool },
    /// The queue the TUI lists: the vhost's stream, or its local file
    /// (`domain::archive::LOCAL_QUEUE`).
    Named(String),
}

/// How the restored messages go.
#[derive(Clone, Debug, Default)]
pub struct Replaying {
    pub to: Option<String>,
    pub allow_fan_out: bool,
    pub keep_attempts: bool,
    pub consent: Option<ReadConsent>,
}

/// A restore as the operator asked for it.
pub struct RestoreRequest {
    pub archive: ArchiveOf,
    pub selection: Selection,
    /// Only messages archived from this queue.
    pub from: Option<String>,
    pub limit: Option<u64>,
    /// At most this many in one run (the context's window when `None`).
    pub window: Option<usize>,
    /// Take again what was restored before.
    pub again: bool,
    /// Restore archived messages the broker did not vouch for (no `user_id` of the user who
    /// archived them): `--trust-unsigned`. The TUI never does.
    pub trust_unsigned: bool,
    /// Through the replay's plan (`--replay`), else back where each came from.
    pub replay: Option<Replaying>,
    pub dry_run: bool,
    /// The selection's words for the audit.
    pub filter: Option<String>,
    pub group: Option<String>,
}

/// The plan, as the front end shows it.
pub struct Planned {
    pub place: Place,
    pub plan: restore::Plan,
    pub restored_before: u64,
    /// More match than one run takes.
    pub more_match: bool,
    pub again: bool,
    pub replay: bool,
    pub dry_run: bool,
    /// What the go-ahead will ask.
    pub asks: super::Questions,
}

/// A restore on the record, ready to publish its first message.
pub struct Ready<'s, B: RestorePort> {
    s: &'s B,
    plan: Option<restore::Plan>,
    key: String,
    /// The record's store, and the one the run remembers restored messages in (it goes into
    /// the run: a store is not shared between threads).
    store: B::Memory,
    remember: Option<B::Memory>,
    record: Record<B::Log>,
}

/// Rights, the archive's read, the plan (targets checked, room included), the go-ahead and the
/// audit's start.
pub async fn prepare<'s, B: RestorePort>(
    s: &'s B,
    req: RestoreRequest,
    front: &mut dyn Front,
) -> Result<Ready<'s, B>, Stop> {
    if !req.dry_run {
        rights::admit(s, Act::Restore)
            .await
            .map_err(Stop::Refused)?;
    }
    let place = archive_place(s, &req.archive).await?;
    let mut store = s.memory().map_err(unopened)?;
    let key = s.archive_key(&place);
    let run_id = crate::broker::audit::new_run_id(jiff::Timestamp::now());
    let planned = plan(s, &req, place, &mut store, &key, &run_id, front).await?;
    front.plan(Plan::Restore(&planned));
    if !planned.plan.refused.is_empty() {
        return Err(Stop::Refused(Refusal::Plan {
            undone: "nothing restored",
            refusals: planned.plan.refused.clone(),
        }));
    }
    if req.dry_run {
        return Err(Stop::DryRun);
    }
    let (plan, asks) = (planned.plan, planned.asks);
    if plan.count() == 0 {
        return Err(Stop::Refused(Refusal::Plan {
            undone: "nothing restored",
            refusals: vec!["no message can be replayed".into()],
        }));
    }
    if let WriteCheck::Refused(why) = s.publish_refusal(&plan.publish_targets).await {
        return Err(Stop::Refused(Refusal::Target {
            why,
            undone: "nothing restored",
        }));
    }
    let op = if planned.replay {
        RunKind::Replay
    } else {
        RunKind::Restore
    };
    match front.go_ahead(plan.count(), op, asks.typed_count) {
        Ok(true) => {}
        Ok(false) => return Err(Stop::Declined),
        Err(why) => return Err(Stop::Usage(why)),
    }
    let start = start_of(s, &req, run_id, &planned.place, &plan);
    let id = Record::start_local(&store, op, &start).map_err(Stop::Refused)?;
    let consent = front.audit_consent(s.operator().create_streams);
    let record = Record::begin(s, id, op, &start, consent).await;
    front.started(record.run_id(), record.on_broker());
    let remember = s.memory().map_err(unopened)?;
    Ok(Ready {
        s,
        plan: Some(plan),
        key,
        store,
        remember: Some(remember),
        record,
    })
}

/// Warren's store could not open: a restore needs it (what was restored, and first-seen times).
fn unopened(e: impl std::fmt::Display) -> Stop {
    Stop::Refused(Refusal::Store {
        why: e.to_string(),
        undone: "nothing restored",
    })
}

fn start_of<B: RestorePort>(
    s: &B,
    req: &RestoreRequest,
    run_id: String,
    place: &Place,
    plan: &restore::Plan,
) -> AuditStart {
    let who = s.operator();
    AuditStart {
        run_id,
        at: jiff::Timestamp::now(),
        os_user: crate::store::current_os_user(),
        broker_user: who.broker_user,
        context: who.context,
        vhost: who.vhost,
        from_queue: place.label(),
        targets: plan.targets.keys().cloned().collect(),
        filter: req.filter.clone(),
        group: req.group.clone(),
        requested_limit: req.limit,
        dry_run: false,
        keep_attempts: req.replay.as_ref().is_some_and(|r| r.keep_attempts),
        clear_expiry: false,
        strip_failure_stamp: false,
    }
}

/// The archive the request names.
async fn archive_place<B: RestorePort>(s: &B, of: &ArchiveOf) -> Result<Place, Stop> {
    let settings = s.archive_settings();
    match of {
        ArchiveOf::Named(queue) if queue == crate::domain::archive::LOCAL_QUEUE => s
            .local_place("the vhost's local archive")
            .map_err(Stop::refused),
        ArchiveOf::Named(queue) if queue != &settings.stream => {
            Err(Stop::Refused(Refusal::Archive(format!(
                "{} is not the archive ('{}'): restore takes messages out of the archive; nothing restored",
                one_line(queue, 80),
                one_line(&settings.stream, 80)
            ))))
        }
        ArchiveOf::Named(queue) => Ok(Place::Stream(queue.clone())),
        ArchiveOf::Configured { local } => {
            if *local || settings.local || !s.has_streams() {
                return s.local_place("local archive").map_err(Stop::refused);
            }
            let name = settings.stream.clone();
            match s.archive_state().await.map_err(super::replay::stop_of)? {
                StreamState::Stream => Ok(Place::Stream(name)),
                StreamState::Missing => Err(Stop::Refused(Refusal::Archive(format!(
                    "no archive in vhost '{}' (stream '{}' does not exist): nothing to restore",
                    one_line(&s.operator().vhost, 80),
                    one_line(&name, 80)
                )))),
                StreamState::NotAStream(kind) => Err(Stop::Refused(Refusal::Archive(format!(
                    "'{}' is a {kind} queue, not Warren's archive stream",
                    one_line(&name, 100)
                )))),
            }
        }
    }
}

/// The archive read (a page at a time, at most a window's worth chosen), then the plan: back
/// where each came from, or through the replay's plan; every queue it publishes into checked
/// for room.
#[allow(clippy::too_many_arguments)]
async fn plan<B: RestorePort>(
    s: &B,
    req: &RestoreRequest,
    place: Place,
    store: &mut B::Memory,
    key: &str,
    run_id: &str,
    front: &mut dyn Front,
) -> Result<Planned, Stop> {
    let window = req.window.unwrap_or(s.window());
    let ask = Ask {
        selection: req.selection.clone(),
        from: req.from.clone(),
        limit: req.limit,
        again: req.again,
    };
    let label = place.label();
    let mut on_page = |read| front.reading(&label, read);
    let read = s
        .read_archive(store, key, &place, &ask, window, &mut on_page)
        .await
        .map_err(Stop::refused)?;
    say_read(s, &place, &read, window, front);
    let unvouched = match restore::unvouched_refusal(&read.unvouched, req.trust_unsigned) {
        Ok(note) => {
            note.iter().for_each(|n| front.say(n));
            None
        }
        Err(why) => Some(why),
    };
    let chosen = read.chosen;
    let restored_before = chosen.restored_before;
    if restored_before > 0 && !req.again {
        front.say(&format!(
            "{restored_before} matching message(s) were restored before and are left out: a stream never forgets them (--again restores them again)"
        ));
    }
    let mut plan = if chosen.messages.is_empty() {
        restore::Plan {
            refused: vec![restore::nothing_chosen(&place, restored_before)],
            ..Default::default()
        }
    } else if let Some(r) = &req.replay {
        let way = restore::ReplayWay {
            to: r.to.clone(),
            allow_fan_out: r.allow_fan_out,
            keep_attempts: r.keep_attempts,
            consent: r.consent.unwrap_or(ReadConsent::Reuse),
            run_id: Some(run_id.to_string()),
        };
        s.plan_replay(&place, chosen.messages, &way)
            .await
            .map_err(Stop::Broker)?
    } else {
        let mut plan = s.plan_back(&chosen.messages).await.map_err(Stop::Broker)?;
        if plan.refused.is_empty() {
            check_room(s, &mut plan).await?;
        }
        plan
    };
    plan.refused.extend(unvouched);
    if plan.refused.is_empty() && plan.count() == 0 && req.replay.is_some() {
        plan.refused
            .push("no message can be replayed: the replay's plan keeps every one".into());
    }
    // A restore's rule whichever way it goes: the messages come out of the archive.
    let asks = super::Questions::before(RunKind::Restore, plan.count());
    Ok(Planned {
        place,
        plan,
        restored_before,
        more_match: read.capped,
        again: req.again,
        replay: req.replay.is_some(),
        dry_run: req.dry_run,
        asks,
    })
}

/// Each queue the restore publishes into must take what it is given without the broker
/// dropping (drop-head) or dead-lettering (reject-publish-dlx) what is already there: the
/// same room check a replay makes on its targets.
async fn check_room<B: RestorePort>(s: &B, plan: &mut restore::Plan) -> Result<(), Stop> {
    let mut bytes: BTreeMap<&str, u64> = BTreeMap::new();
    for p in &plan.items {
        *bytes.entry(p.routing_key.as_str()).or_insert(0) += p.body.len() as u64;
    }
    let mut refused = Vec::new();
    let mut warned = Vec::new();
    for (queue, n) in &plan.targets {
        let b = bytes.get(queue.as_str()).copied().unwrap_or(0);
        match s
            .room_in(queue, *n, b)
            .await
            .map_err(super::replay::stop_of)?
        {
            Some(Err(why)) => refused.push(why),
            Some(Ok(warning)) => warned.push((warning, *n)),
            None => {}
        }
    }
    plan.refused.extend(refused);
    for (w, n) in warned {
        *plan.kept.entry(w).or_insert(0) += n;
    }
    Ok(())
}

/// What the archive's read leaves out, said: entries expired, a read the broker cut short, a
/// restore that takes one run's worth and leaves more for the next.
fn say_read<B: RestorePort>(
    s: &B,
    place: &Place,
    read: &restore::ChosenRead,
    window: usize,
    front: &mut dyn Front,
) {
    read.notes.iter().for_each(|n| front.say(n));
    if read.expired > 0 {
        front.say(&format!(
            "{} expired, dropped from {}: archived longer ago than archive_max_age ({})",
            read.expired,
            one_line(&place.label(), 200),
            one_line(&s.archive_settings().max_age, 20)
        ));
    }
    if read.cut_short {
        front.say(&format!(
            "the broker stopped delivering the archive after {} messages, before its end: later ones are not chosen here; try again when it is less busy",
            read.scanned
        ));
    }
    if read.capped {
        front.say(&format!(
            "one restore takes at most {window} (--window N, or the context's window): more match; restore again after this one for the next ones"
        ));
    }
}

impl<B: RestorePort> Ready<'_, B> {
    pub fn count(&self) -> u64 {
        self.plan.as_ref().map_or(0, restore::Plan::count)
    }

    /// Publishes through the replay engine, remembering the restored messages as it
    /// acknowledges them; `cancel` stops it (what is in flight settled; a second cancel ends it
    /// at once); `on_batch` is told (restored, failed, total).
    pub async fn run(
        &mut self,
        cancel: &watch::Receiver<bool>,
        on_batch: impl FnMut(u64, u64, u64) + Send,
    ) -> restore::Outcome {
        let (Some(plan), Some(st)) = (self.plan.take(), self.remember.take()) else {
            return restore::Outcome {
                error: Some("the restore was started twice".into()),
                ..Default::default()
            };
        };
        let (key, id) = (self.key.clone(), self.record.audit_id());
        self.s.publish(plan, cancel, st, key, id, on_batch).await
    }

    /// The audit's finish in both places; returns what could not be written, said once.
    pub async fn finish(mut self, out: &restore::Outcome) -> Vec<String> {
        let none = crate::local::spool::Spool::default();
        self.record
            .finish_local(Some(&self.store), &out.audit, &none);
        self.record.finish_broker(out.audit.clone(), &none).await;
        self.record.take_notes()
    }
}
