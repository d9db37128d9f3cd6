//! Archive and discard: the other ways out of a DLQ. Both run the replay engine
//! (`broker::replay::Action`) with its guarantees; the one home of `warren archive`,
//! `warren discard` and the TUI's `A` and `X`, on their ports (`ops::ports::ArchivePort` for the
//! broker, the memory port for Warren's store), which `Session` implements.

use std::path::PathBuf;

use tokio::sync::watch;

use super::ports::ArchivePort;
use super::record::{self, Record};
use super::rights::{self, Act};
use super::{Front, Plan, Refusal, Stop};
use crate::broker::archive::{DeclareError, Place, StreamState};
use crate::broker::replay::{Progress, Summary};
use crate::broker::session::WriteCheck;
use crate::broker::session::{ReadConsent, ReplaySpec, Selected, SessionError};
use crate::domain::archive::Stamp;
use crate::domain::identity;
use crate::domain::run::RunKind;
use crate::domain::sanitize::one_line;
use crate::store::AuditStart;

/// Where the messages go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Way {
    /// Into the archive: the context's stream, or the local file (`local`, or where a stream
    /// cannot be used). `create`: the operator allowed creating the stream up front.
    Archive {
        local: bool,
        create: bool,
        reason: String,
    },
    /// Deleted, after a snapshot of exactly them is written to `snapshot` (`None`: no
    /// snapshot, `--no-snapshot`).
    Discard { snapshot: Option<PathBuf> },
}

/// An archive or a discard as the operator asked for it.
pub struct ArchiveRequest {
    /// The queue, selection, limit, window, rate and read consent (no replay header: its
    /// `run_id` stays `None`).
    pub spec: ReplaySpec,
    pub way: Way,
    pub dry_run: bool,
    /// The selection's words for the audit.
    pub filter: Option<String>,
    pub group: Option<String>,
}

/// The plan, as the front end shows it.
pub struct Planned {
    pub op: RunKind,
    pub dry_run: bool,
    pub spec: ReplaySpec,
    pub sel: Selected,
    /// How many the run may take.
    pub count: u64,
    /// The archive's place (an archive).
    pub place: Option<Place>,
    /// The snapshot file (a discard that keeps one).
    pub snapshot: Option<PathBuf>,
    pub reason: String,
    /// What the go-ahead will ask.
    pub asks: super::Questions,
}

/// A run on the record, ready to take its first message.
pub struct Ready<'s, B: ArchivePort> {
    s: &'s B,
    spec: ReplaySpec,
    work: Option<B::Work>,
    count: u64,
    store: B::Memory,
    record: Record<B::Log>,
    /// Where they go, for the run's headline (`Summary::headline`): the archive, or the
    /// discard's snapshot.
    place: String,
}

impl Way {
    pub fn op(&self) -> RunKind {
        match self {
            Way::Archive { .. } => RunKind::Archive,
            Way::Discard { .. } => RunKind::Discard,
        }
    }
    fn act(&self) -> Act {
        match self {
            Way::Archive { .. } => Act::Archive,
            Way::Discard { .. } => Act::Discard,
        }
    }
    fn undone(&self) -> &'static str {
        match self {
            Way::Archive { .. } => "nothing moved",
            Way::Discard { .. } => "nothing deleted",
        }
    }
}

/// Rights, the archive's place, the selection, the plan, the go-ahead, the snapshot or the
/// local file, and the audit's start: everything before the first message leaves the queue.
pub async fn prepare<'s, B: ArchivePort>(
    s: &'s B,
    req: ArchiveRequest,
    front: &mut dyn Front,
) -> Result<Ready<'s, B>, Stop> {
    let op = req.way.op();
    let undone = req.way.undone();
    if !req.dry_run {
        rights::admit(s, req.way.act())
            .await
            .map_err(Stop::Refused)?;
    }
    if req.spec.queue == s.archive_settings().stream {
        return Err(Stop::Usage(format!(
            "'{}' is the archive itself",
            one_line(&req.spec.queue, 80)
        )));
    }
    // A run consumes, and an auto-delete queue dies when its last consumer cancels: refused
    // before anything is read, created or put on the record.
    let auto_delete = s
        .auto_delete(&req.spec.queue)
        .await
        .map_err(super::replay::stop_of)?;
    if auto_delete && !req.dry_run {
        let verb = if op == RunKind::Discard {
            "discard"
        } else {
            "archive"
        };
        return Err(Stop::Refused(Refusal::AutoDelete {
            queue: req.spec.queue.clone(),
            verb,
        }));
    }
    let place = match &req.way {
        Way::Archive { local, create, .. } => {
            let p = place(s, *local, *create, req.dry_run, front).await?;
            // A stream that would not keep what is archived is refused before anything moves.
            s.retention_refusal(&p).await.map_err(Stop::refused)?;
            Some(p)
        }
        Way::Discard { .. } => None,
    };
    let store = match s.memory() {
        Ok(st) => Some(st),
        Err(why) if !req.dry_run => return Err(Stop::Refused(Refusal::Store { why, undone })),
        Err(_) => None,
    };
    // The stream takes the message from the delivery itself: the look needs no whole bodies.
    // A local archive and a discard's snapshot write what was read, so they read them whole.
    let cap = match place {
        Some(Place::Stream(_)) => identity::HASHED_BODY,
        _ => usize::MAX,
    };
    let sel = select(s, &req.spec, cap, front).await?;
    let count = match place {
        Some(Place::Stream(_)) => confirmed_count(&req.spec, &sel),
        // Only what is in the file (or the snapshot) leaves the queue.
        _ => sel.messages.len() as u64,
    };
    let (snapshot, reason) = match &req.way {
        Way::Archive { reason, .. } => (None, reason.clone()),
        Way::Discard { snapshot } => (snapshot.clone(), String::new()),
    };
    let planned = Planned {
        op,
        dry_run: req.dry_run,
        spec: req.spec,
        sel,
        count,
        place,
        snapshot,
        reason,
        asks: super::Questions::before(op, count),
    };
    front.plan(Plan::Archive(&planned));
    if count == 0 {
        return Err(Stop::Refused(Refusal::NothingSelected { undone }));
    }
    if req.dry_run {
        return Err(Stop::DryRun);
    }
    go(s, planned, store, req.filter, req.group, front).await
}

/// From an accepted plan to a run on the record.
async fn go<'s, B: ArchivePort>(
    s: &'s B,
    planned: Planned,
    store: Option<B::Memory>,
    filter: Option<String>,
    group: Option<String>,
    front: &mut dyn Front,
) -> Result<Ready<'s, B>, Stop> {
    let Planned {
        op,
        spec,
        sel,
        count,
        place,
        snapshot,
        reason,
        asks,
        ..
    } = planned;
    if let Some(Place::Stream(name)) = &place
        && let WriteCheck::Refused(why) = s.write_refusal(name).await
    {
        return Err(Stop::Refused(Refusal::Target {
            why,
            undone: "nothing moved",
        }));
    }
    if let Some(p) = snapshot.as_ref().filter(|p| p.exists()) {
        return Err(Stop::Usage(format!(
            "{} exists: Warren never overwrites a snapshot; choose another with -o; nothing deleted",
            p.display()
        )));
    }
    match front.go_ahead(count, op, asks.typed_count) {
        Ok(true) => {}
        Ok(false) => return Err(Stop::Declined),
        Err(why) => return Err(Stop::Usage(why)),
    }
    let store = store.ok_or_else(|| {
        Stop::Refused(Refusal::Store {
            why: "Warren's store is not open".into(),
            undone: if op == RunKind::Discard {
                "nothing deleted"
            } else {
                "nothing moved"
            },
        })
    })?;
    let (work, target, headline_place) = match &place {
        Some(place) => {
            let stamp = Stamp {
                from: spec.queue.clone(),
                by: format!(
                    "{}@{}",
                    crate::store::current_os_user(),
                    s.operator().broker_user
                ),
                reason,
            };
            let work = s
                .archive_work(place, stamp, &sel, count)
                .map_err(Stop::refused)?;
            (work, place.label(), place.where_to())
        }
        None => {
            let work = s
                .discard_work(&spec.queue, snapshot.as_deref(), &sel)
                .map_err(Stop::refused)?;
            match &snapshot {
                Some(p) => {
                    front.say(&format!(
                        "snapshot written: {} message(s) in {} (`warren open` reads it)",
                        sel.messages.len(),
                        p.display()
                    ));
                    (
                        work,
                        format!("snapshot {}", p.display()),
                        format!("snapshot in {}", p.display()),
                    )
                }
                None => (
                    work,
                    "nowhere (--no-snapshot)".to_string(),
                    "no snapshot kept".to_string(),
                ),
            }
        }
    };
    let start = start_of(s, &spec, vec![target], filter, group);
    let id = Record::start_local(&store, op, &start).map_err(Stop::Refused)?;
    let consent = front.audit_consent(s.operator().create_streams);
    let record = Record::begin(s, id, op, &start, consent).await;
    front.started(record.run_id(), record.on_broker());
    Ok(Ready {
        s,
        spec,
        work: Some(work),
        count,
        store,
        record,
        place: headline_place,
    })
}

/// The audit's start of an archive or a discard.
fn start_of<B: ArchivePort>(
    s: &B,
    spec: &ReplaySpec,
    targets: Vec<String>,
    filter: Option<String>,
    group: Option<String>,
) -> AuditStart {
    let at = jiff::Timestamp::now();
    let who = s.operator();
    AuditStart {
        run_id: crate::broker::audit::new_run_id(at),
        at,
        os_user: crate::store::current_os_user(),
        broker_user: who.broker_user,
        context: who.context,
        vhost: who.vhost,
        from_queue: spec.queue.clone(),
        targets,
        filter,
        group,
        requested_limit: spec.limit,
        dry_run: false,
        keep_attempts: false,
        clear_expiry: false,
        strip_failure_stamp: false,
    }
}

/// Reads the head of the queue and picks the selection, remembering first-seen times; a read
/// that would spend quorum deliveries again is asked for.
pub(super) async fn select<B: ArchivePort>(
    s: &B,
    spec: &ReplaySpec,
    cap: usize,
    front: &mut dyn Front,
) -> Result<Selected, Stop> {
    let read = |consent: ReadConsent| {
        let mut spec = spec.clone();
        spec.consent = consent;
        async move { s.select(&spec, cap).await }
    };
    super::read::consented(front, spec.consent, read).await
}

/// The count a run may move: for "all", what the queue holds (capped by the limit), since the
/// run stops at the depth it started with; for a selection, what matched here.
fn confirmed_count(spec: &ReplaySpec, sel: &Selected) -> u64 {
    crate::domain::preview::look::confirmed(
        spec,
        sel.examined,
        sel.depth,
        sel.messages.len() as u64,
    )
}

/// Whether an archive must ask before it creates its stream: the archive is not kept locally
/// (by the request or the context), the broker has streams, the stream is `missing`, and neither
/// the request nor the context allows creating it. The one rule: [`place`] asks by it, and the
/// TUI's worker shows [`stream_question`] in the archive modal by it before a run is asked for.
pub(crate) fn asks_to_create(
    settings: &crate::config::ArchiveSettings,
    local: bool,
    create: bool,
    has_streams: bool,
    missing: bool,
) -> bool {
    !(local || settings.local) && has_streams && missing && !(create || settings.create)
}

/// The question [`asks_to_create`] asks, as the archive modal shows it.
pub(crate) fn stream_question(settings: &crate::config::ArchiveSettings, vhost: &str) -> String {
    format!(
        "the archive stream '{}' does not exist yet in vhost '{}': Warren would create it (durable, x-queue-type = stream, x-max-age = {}) for the whole rota",
        one_line(&settings.stream, 100),
        one_line(vhost, 100),
        one_line(&settings.max_age, 20)
    )
}

/// Where an archive goes. The stream is created only with consent (the request's `create`,
/// the context's `archive_create`, or the front end's answer); where a stream cannot be used
/// (chosen local, no streams, no permission to create it) it is the local file, and the front
/// end is told.
pub(super) async fn place<B: ArchivePort>(
    s: &B,
    local: bool,
    create: bool,
    dry_run: bool,
    front: &mut dyn Front,
) -> Result<Place, Stop> {
    let settings = s.archive_settings();
    if local || settings.local {
        return s
            .local_place("chosen (--local or archive_local = true)")
            .map_err(Stop::refused);
    }
    if !s.has_streams() {
        return s
            .local_place("this broker has no streams (RabbitMQ before 3.9)")
            .map_err(Stop::refused);
    }
    let vhost = s.operator().vhost;
    let name = settings.stream.clone();
    let what = format!(
        "a stream '{}' in vhost '{}' (durable, x-queue-type = stream, x-max-age = {}: the broker drops archived messages older than that)",
        one_line(&name, 100),
        one_line(&vhost, 100),
        one_line(&settings.max_age, 20)
    );
    let asks = |missing| asks_to_create(settings, local, create, true, missing);
    match s.archive_state().await.map_err(super::replay::stop_of)? {
        StreamState::Stream => Ok(Place::Stream(name)),
        StreamState::NotAStream(kind) => Err(Stop::Refused(Refusal::Archive(format!(
            "'{}' in vhost '{}' is a {kind} queue, not a stream: Warren will not archive into it. Name another stream with archive_stream in the context, or keep the archive in a file with --local; nothing moved",
            one_line(&name, 100),
            one_line(&vhost, 100)
        )))),
        StreamState::Missing if dry_run => {
            front.say(&format!(
                "the archive does not exist yet: Warren would create {what}"
            ));
            Ok(Place::Stream(name))
        }
        StreamState::Missing => {
            if asks(true) {
                match front.create_archive(&what) {
                    Ok(true) => {}
                    Ok(false) => {
                        return Err(Stop::Refused(Refusal::ArchiveNotCreated));
                    }
                    Err(why) => return Err(Stop::Usage(why)),
                }
            }
            create_stream(s, &name, &what, front).await
        }
    }
}

async fn create_stream<B: ArchivePort>(
    s: &B,
    name: &str,
    what: &str,
    front: &mut dyn Front,
) -> Result<Place, Stop> {
    match s.create_archive().await {
        Ok(()) => {
            front.say(&format!("created {what}"));
            Ok(Place::Stream(name.to_string()))
        }
        Err(DeclareError::NoPermission(text)) => {
            let why = format!(
                "the broker refused to create the stream: {}",
                one_line(&text, 200)
            );
            let place = s.local_place(&why).map_err(Stop::refused)?;
            front.say(&format!(
                "cannot create the archive stream (configure permission is needed: {}); the archive is {} instead",
                one_line(&text, 200),
                place.label()
            ));
            Ok(place)
        }
        Err(e) => Err(Stop::Broker(format!(
            "cannot create the archive stream '{}': {e}; nothing moved",
            one_line(name, 100)
        ))),
    }
}

impl<B: ArchivePort> Ready<'_, B> {
    /// How many messages the run may take.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The run itself: the engine, stopped by `cancel`, its progress to `on_progress`.
    pub async fn run(
        &mut self,
        cancel: watch::Receiver<bool>,
        on_progress: impl FnMut(&Progress) + Send,
    ) -> Result<Summary, SessionError> {
        let Some(work) = self.work.take() else {
            return Err(SessionError::Broker("the run was started twice".into()));
        };
        self.s.run(&self.spec, work, cancel, on_progress).await
    }

    /// Where they go, in the run's headline's words (`Summary::headline`).
    pub fn place(&self) -> &str {
        &self.place
    }

    /// The audit's finish in both places; returns what could not be written, said once.
    pub async fn finish(mut self, result: &Result<Summary, SessionError>) -> Vec<String> {
        let moved = result
            .as_ref()
            .map(|s| s.moved_ids.clone())
            .unwrap_or_default();
        let out = record::outcome_of(result);
        self.record.finish_local(Some(&self.store), &out, &moved);
        self.record.finish_broker(out, &moved).await;
        self.record.take_notes()
    }
}
