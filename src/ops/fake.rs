//! An in-memory broker behind the ports (`ops::ports`), Warren's store behind the memory port,
//! and a front end that writes down what it was asked: every guarantee of an operation on
//! ports is tested here, with no broker. Each call to the broker and the store is logged in one
//! ordered log, so "rights first", "nothing kept without consent" and "the record starts before
//! the run" are read off the log; a run ends as the test tells it (`Dlq::ending`).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::ports::{
    ArchivePort, Author, BrokerLog, MemoryPort, ProtectPort, RecordPort, RedirectPort, Rights,
};
use super::rights::ReadOnly;
use super::{Front, Plan, Stop};
use crate::broker::archive::{DeclareError, Place, StreamState};
use crate::broker::audit::Consent;
use crate::broker::management::ManagementError;
use crate::broker::redirects::Current;
use crate::broker::replay::{Progress, StopReason, Summary};
use crate::broker::session::{
    Explained, ReadConsent, ReplaySpec, Selected, SessionError, WriteCheck,
};
use crate::config::ArchiveSettings;
use crate::domain::archive::Stamp;
use crate::domain::discovery::{JsonMap, Policy};
use crate::domain::grouping::GroupNote;
use crate::domain::message::DeadLetter;
use crate::domain::protect::ProtectPlan;
use crate::domain::redirect::{self, Destination, Entry, RedirectRecord};
use crate::domain::run::RunKind;
use crate::local::spool::Spool;
use crate::store::{AuditOutcome, AuditStart, ProtectRecord};

pub(crate) const REDIRECT_STREAM: &str = "warren.redirects";
pub(crate) const AUDIT_STREAM: &str = "warren.audit";

/// The broker: its queues, streams, redirect and audit entries, policies, and the calls made;
/// and Warren's local store (the memory port), whose calls go to the same log.
#[derive(Default)]
pub(crate) struct FakeBroker {
    pub(crate) read_only: Option<ReadOnly>,
    pub(crate) create_streams: Option<bool>,
    pub(crate) queues: HashMap<String, Destination>,
    pub(crate) streams: Mutex<HashSet<String>>,
    pub(crate) entries: Mutex<Vec<Entry>>,
    /// The broker's audit stream, an entry a line: "KIND EVENT RUN-ID", or a run's outcome.
    pub(crate) audit: Arc<Mutex<Vec<String>>>,
    pub(crate) policies: Mutex<Vec<String>>,
    pub(crate) calls: Arc<Mutex<Vec<String>>>,
    /// Archive and discard (and the head, read cost and run's end of a replay): see [`Dlq`].
    pub(crate) dlq: Dlq,
    /// Replay and restore: see [`Runs`](super::fake_runs::Runs).
    pub(crate) runs: super::fake_runs::Runs,
    /// The local store's audit rows.
    pub(crate) rows: Arc<Mutex<Vec<Row>>>,
    /// The local store's protects.
    pub(crate) protects: Arc<Mutex<Vec<ProtectRecord>>>,
    /// The records of the broker's audit stream's entries, as JSON, in the order of `audit`.
    pub(crate) records: Arc<Mutex<Vec<serde_json::Value>>>,
    /// The local store's group notes and first-seen times, by vhost key.
    pub(crate) memory: Arc<Mutex<Remembered>>,
    /// The context keeps no audit stream (`audit_stream = ""`).
    pub(crate) audit_off: bool,
}

/// What the local store remembers beside the audit: group notes and first-seen times.
#[derive(Default)]
pub(crate) struct Remembered {
    /// (vhost key, note).
    pub(crate) notes: Vec<(String, GroupNote)>,
    /// (vhost key, queue, message key) → first seen.
    pub(crate) seen: HashMap<(String, String, String), jiff::Timestamp>,
}

/// What archive and discard meet: the DLQs, the archive, the store, and how the run ends.
#[derive(Default)]
pub(crate) struct Dlq {
    /// The messages at the head of each queue.
    pub(crate) heads: HashMap<String, u64>,
    pub(crate) auto_delete: HashSet<String>,
    pub(crate) archive: ArchiveSettings,
    /// A broker before streams (RabbitMQ 3.8).
    pub(crate) no_streams: bool,
    /// Reading the queue again spends deliveries: a read without consent is refused.
    pub(crate) read_costs: bool,
    /// The broker refuses to create the archive stream (no configure permission).
    pub(crate) create_refused: bool,
    pub(crate) write_refused: Option<String>,
    pub(crate) retention_refused: Option<String>,
    /// Warren's store does not open: why.
    pub(crate) store_broken: Option<String>,
    /// What the run returns (`None`: completed, every message it may take moved).
    pub(crate) ending: Option<Summary>,
    /// The run fails outright (`Err`) with this.
    pub(crate) run_error: Option<String>,
}

/// A row of the local store's audit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Row {
    pub(crate) id: i64,
    pub(crate) op: RunKind,
    pub(crate) run_id: String,
    /// The outcome's words, once finished.
    pub(crate) outcome: Option<String>,
    pub(crate) moved: u64,
    pub(crate) moved_ids: u64,
}

impl FakeBroker {
    pub(crate) fn with_queues(names: &[(&str, Destination)]) -> FakeBroker {
        FakeBroker {
            queues: names
                .iter()
                .map(|(n, d)| ((*n).to_string(), d.clone()))
                .collect(),
            ..Default::default()
        }
    }

    /// A broker whose `queue` holds `n` dead letters at its head.
    pub(crate) fn dlq(queue: &str, n: u64) -> FakeBroker {
        let mut b = FakeBroker::default();
        b.dlq.heads.insert(queue.to_string(), n);
        b
    }

    pub(crate) fn rows(&self) -> Vec<Row> {
        self.rows.lock().map(|r| r.clone()).unwrap_or_default()
    }

    pub(crate) fn audit(&self) -> Vec<String> {
        self.audit.lock().map(|a| a.clone()).unwrap_or_default()
    }

    pub(crate) fn records(&self) -> Vec<serde_json::Value> {
        self.records.lock().map(|r| r.clone()).unwrap_or_default()
    }

    pub(crate) fn calls(&self) -> Vec<String> {
        self.calls.lock().map(|c| c.clone()).unwrap_or_default()
    }

    pub(crate) fn streams(&self) -> HashSet<String> {
        self.streams.lock().map(|s| s.clone()).unwrap_or_default()
    }

    pub(super) fn call(&self, what: &str) {
        if let Ok(mut c) = self.calls.lock() {
            c.push(what.to_string());
        }
    }

    /// Opens `name`, creating it as `consent` allows (as `AuditStream::open_kept` does).
    fn open_stream(&self, name: &str, consent: Consent<'_>) -> Result<(), String> {
        let mut streams = self.streams.lock().map_err(|e| e.to_string())?;
        if streams.contains(name) {
            return Ok(());
        }
        let yes = match consent {
            Consent::Create => true,
            Consent::Ask(ask) => ask(&format!("create {name}")),
            Consent::Refuse | Consent::Declined => false,
        };
        if !yes {
            return Err(format!(
                "{name} does not exist and was not allowed to be created"
            ));
        }
        streams.insert(name.to_string());
        Ok(())
    }

    fn missing(&self, name: &str) -> bool {
        !self.streams().contains(name)
    }
}

impl Rights for FakeBroker {
    async fn read_only(&self) -> Option<ReadOnly> {
        self.call("read_only");
        self.read_only.clone()
    }
}

impl RedirectPort for FakeBroker {
    fn author(&self) -> Author {
        Author {
            broker_user: "guest".into(),
            context: "c".into(),
            vhost: "v".into(),
            create_streams: self.create_streams,
            audit_stream: !self.audit_off,
        }
    }

    async fn redirects(&self) -> Result<Current, String> {
        self.call("redirects");
        let entries = self.entries.lock().map_err(|e| e.to_string())?.clone();
        let (redirects, ignored) = redirect::fold(entries);
        Ok(Current { redirects, ignored })
    }

    async fn destination(&self, queue: &str) -> Result<Destination, Stop> {
        self.call(&format!("destination {queue}"));
        Ok(self
            .queues
            .get(queue)
            .cloned()
            .unwrap_or(Destination::Missing))
    }

    async fn streams_to_create(&self) -> Vec<String> {
        self.call("streams_to_create");
        [REDIRECT_STREAM, AUDIT_STREAM]
            .into_iter()
            .filter(|s| self.missing(s))
            .map(|s| format!("Warren will create the stream '{s}'"))
            .collect()
    }

    async fn keep(
        &self,
        event: &'static str,
        rec: &RedirectRecord,
        consent: Consent<'_>,
    ) -> Result<(), String> {
        self.call(&format!("keep {event}"));
        self.open_stream(REDIRECT_STREAM, consent)?;
        let entry = Entry {
            event: event.to_string(),
            record: rec.clone(),
            vouched: Some(rec.broker_user.clone()),
        };
        self.entries.lock().map_err(|e| e.to_string())?.push(entry);
        Ok(())
    }
}

impl ProtectPort for FakeBroker {
    async fn protect(&self, queue: &str, apply: bool) -> Result<ProtectPlan, Stop> {
        self.call(&format!("protect {queue} apply={apply}"));
        let policy = Policy {
            name: format!("warren-protect-{queue}"),
            pattern: format!("^{queue}$"),
            apply_to: "queues".into(),
            priority: 1,
            definition: JsonMap::default(),
        };
        if apply && let Ok(mut p) = self.policies.lock() {
            p.push(policy.name.clone());
        }
        Ok(ProtectPlan {
            policy,
            replaces: None,
            limit_before: Some(20),
            limit_after: None,
        })
    }
}

/// How the test front end answers a question about creating a stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Answer {
    /// Nobody can be asked (the TUI's worker before its modal asked, a command without a
    /// terminal).
    #[default]
    NobodyToAsk,
    Yes,
    No,
}

/// A front end that answers as told and writes down every question.
#[derive(Default)]
pub(crate) struct TestFront {
    pub(crate) answer: Answer,
    pub(crate) asked: Vec<String>,
    /// What each plan it was shown said the go-ahead would ask.
    pub(crate) plan_asks: Vec<super::Questions>,
    /// What a plan's read told as it went (`Front::reading`), and whether the plan had been
    /// shown by then.
    pub(crate) reads: Vec<(String, u64, bool)>,
    /// What it was told (`Front::say`).
    pub(crate) said: Vec<String>,
    /// How the operator edits a document (`None`: no editor can be opened here).
    pub(crate) edit: Option<fn(&str) -> Option<String>>,
    /// The read-again question cannot be asked here (no terminal, the TUI's worker).
    pub(crate) cannot_ask: bool,
    /// The broker's log, where each question goes too ("front: …"), in order with the calls.
    log: Option<Arc<Mutex<Vec<String>>>>,
    ask: Option<Box<Asker>>,
}

/// How the front end answers a consent question asked on its terminal.
type Asker = dyn FnMut(&str) -> bool + Send;

impl TestFront {
    pub(crate) fn answering(answer: Answer) -> TestFront {
        TestFront {
            answer,
            ..Default::default()
        }
    }

    /// Answers as told, and writes each question in `b`'s log of calls too.
    pub(crate) fn logging(answer: Answer, b: &FakeBroker) -> TestFront {
        TestFront {
            answer,
            log: Some(b.calls.clone()),
            ..Default::default()
        }
    }

    fn heard(&mut self, question: impl Into<String>) {
        let question = question.into();
        if let Some(calls) = &self.log {
            log(calls, format!("front: {question}"));
        }
        self.asked.push(question);
    }
}

impl Front for TestFront {
    fn plan(&mut self, plan: Plan<'_>) {
        self.plan_asks.push(plan.asks());
        self.heard("plan");
    }
    fn go_ahead(&mut self, count: u64, kind: RunKind, typed: bool) -> Result<bool, String> {
        self.heard(format!("go ahead: {} {count} typed={typed}", kind.verb()));
        Ok(self.answer == Answer::Yes)
    }
    fn audit_consent(&mut self, configured: Option<bool>) -> Consent<'_> {
        self.heard("stream");
        match (configured, self.answer) {
            (Some(true), _) => Consent::Create,
            (Some(false), _) | (None, Answer::NobodyToAsk) => Consent::Refuse,
            (None, answer) => {
                let yes = answer == Answer::Yes;
                Consent::Ask(self.ask.insert(Box::new(move |_| yes)).as_mut())
            }
        }
    }
    fn read_again(&mut self, queue: &str, _cost: &str) -> Result<bool, String> {
        self.heard(format!("read again {queue}"));
        if self.cannot_ask {
            return Err("no terminal to ask on".into());
        }
        Ok(self.answer == Answer::Yes)
    }
    fn create_archive(&mut self, what: &str) -> Result<bool, String> {
        self.heard(format!("create archive {what}"));
        Ok(self.answer == Answer::Yes)
    }
    fn say(&mut self, text: &str) {
        self.said.push(text.to_string());
    }
    fn reading(&mut self, what: &str, read: u64) {
        let planned = !self.plan_asks.is_empty();
        self.reads.push((what.to_string(), read, planned));
    }
    fn started(&mut self, _run_id: &str, on_broker: bool) {
        self.heard(format!("started on_broker={on_broker}"));
    }
    fn edit(&mut self, document: &str, problem: Option<&str>) -> Result<Option<String>, String> {
        self.heard(format!("edit problem={}", problem.is_some()));
        match self.edit {
            Some(edit) => Ok(edit(document)),
            None => Err("no editor can be opened here".into()),
        }
    }
}

/// A summary of a run that ended `stop` after moving `moved` messages.
pub(crate) fn summary(stop: StopReason, moved: u64) -> Summary {
    Summary {
        progress: Progress {
            moved,
            ..Default::default()
        },
        depth_at_start: moved,
        counts: Default::default(),
        moved_ids: Spool::from_keys((0..moved).map(|i| format!("id:m{i}")).collect()),
        stop,
        reconnected: Vec::new(),
        replayed_before: 0,
        planned_unread: false,
        left_in_dlq: None,
        held_elsewhere: 0,
        canary: None,
        carrier: Default::default(),
    }
}

/// The fake's work: what was prepared, and how many it may take.
pub(crate) struct FakeWork {
    what: String,
    count: u64,
}

/// The local store, in memory: its rows, its calls in the broker's log.
pub(crate) struct FakeMemory {
    rows: Arc<Mutex<Vec<Row>>>,
    protects: Arc<Mutex<Vec<ProtectRecord>>>,
    memory: Arc<Mutex<Remembered>>,
    calls: Arc<Mutex<Vec<String>>>,
}

impl FakeMemory {
    fn remembered(&self) -> Result<std::sync::MutexGuard<'_, Remembered>, String> {
        self.memory.lock().map_err(|e| e.to_string())
    }
}

fn log(calls: &Mutex<Vec<String>>, what: String) {
    if let Ok(mut c) = calls.lock() {
        c.push(what);
    }
}

impl MemoryPort for FakeMemory {
    fn start_run(&self, op: RunKind, start: &AuditStart) -> Result<i64, String> {
        log(&self.calls, format!("memory start {}", op.as_str()));
        let mut rows = self.rows.lock().map_err(|e| e.to_string())?;
        let id = rows.len() as i64 + 1;
        rows.push(Row {
            id,
            op,
            run_id: start.run_id.clone(),
            outcome: None,
            moved: 0,
            moved_ids: 0,
        });
        Ok(id)
    }

    fn finish_run(&self, id: i64, out: &AuditOutcome, moved: &Spool) -> Vec<String> {
        log(&self.calls, format!("memory finish #{id} {}", out.outcome));
        let Ok(mut rows) = self.rows.lock() else {
            return vec!["the store is poisoned".into()];
        };
        match rows.iter_mut().find(|r| r.id == id) {
            Some(row) => {
                row.outcome = Some(out.outcome.to_string());
                row.moved = out.moved;
                row.moved_ids = moved.len();
                Vec::new()
            }
            None => vec![format!("no audit record #{id}")],
        }
    }

    fn keep_protect(&self, rec: &ProtectRecord) -> Result<(), String> {
        log(&self.calls, format!("memory protect {}", rec.queue));
        self.protects
            .lock()
            .map_err(|e| e.to_string())?
            .push(rec.clone());
        Ok(())
    }

    fn set_note(&self, vhost_key: &str, note: &GroupNote) -> Result<bool, String> {
        log(&self.calls, format!("memory note {}", note.key));
        let mut m = self.remembered()?;
        m.notes.retain(|(k, n)| {
            !(k == vhost_key && n.queue == note.queue && n.by == note.by && n.key == note.key)
        });
        let kept = !note.text.is_empty();
        if kept {
            m.notes.push((vhost_key.to_string(), note.clone()));
        }
        Ok(kept)
    }

    fn notes(&self, vhost_key: &str, queue: &str) -> Result<Vec<GroupNote>, String> {
        log(&self.calls, format!("memory notes {queue}"));
        let m = self.remembered()?;
        Ok(m.notes
            .iter()
            .filter(|(k, n)| k == vhost_key && n.queue == queue)
            .map(|(_, n)| n.clone())
            .collect())
    }

    fn forget_notes(&self, vhost_key: &str, gone: &[&GroupNote]) -> Result<usize, String> {
        log(&self.calls, format!("memory forget {}", gone.len()));
        let mut m = self.remembered()?;
        let before = m.notes.len();
        m.notes
            .retain(|(k, n)| !(k == vhost_key && gone.contains(&n)));
        Ok(before - m.notes.len())
    }

    fn seen(
        &self,
        vhost_key: &str,
        queue: &str,
        keys: &[String],
        now: jiff::Timestamp,
    ) -> Result<HashMap<String, jiff::Timestamp>, String> {
        log(&self.calls, format!("memory seen {queue} {}", keys.len()));
        let mut m = self.remembered()?;
        Ok(keys
            .iter()
            .map(|k| {
                let at = *m
                    .seen
                    .entry((vhost_key.to_string(), queue.to_string(), k.clone()))
                    .or_insert(now);
                (k.clone(), at)
            })
            .collect())
    }

    fn replays(
        &self,
        _context: &str,
        _vhost: &str,
        ids: &[String],
    ) -> Result<HashMap<String, i64>, String> {
        log(&self.calls, format!("memory replays {}", ids.len()));
        Ok(HashMap::new())
    }
}

/// The broker's audit stream as a record opened it: its entries go to the fake's audit.
pub(crate) struct FakeLog {
    /// Why it could not be opened.
    unwritten: Option<String>,
    /// Whether that was said.
    said: bool,
    audit: Arc<Mutex<Vec<String>>>,
    records: Arc<Mutex<Vec<serde_json::Value>>>,
    calls: Arc<Mutex<Vec<String>>>,
}

impl FakeLog {
    /// Why the broker record was not written, the first time (as `BrokerRecord` says it).
    fn why_once(&mut self) -> Option<String> {
        if self.said {
            return None;
        }
        self.said = true;
        self.unwritten.clone()
    }
}

impl BrokerLog for FakeLog {
    fn off(why: &str) -> FakeLog {
        FakeLog {
            unwritten: Some(why.to_string()),
            said: true,
            audit: Default::default(),
            records: Default::default(),
            calls: Default::default(),
        }
    }

    fn is_written(&self) -> bool {
        self.unwritten.is_none()
    }

    async fn append<T: serde::Serialize + Sync>(
        &mut self,
        kind: &str,
        event: &str,
        run_id: &str,
        record: &T,
    ) -> Option<String> {
        log(&self.calls, format!("record {event} {kind}"));
        if self.unwritten.is_some() {
            return self.why_once();
        }
        if let Ok(mut a) = self.audit.lock() {
            a.push(format!("{kind} {event} {run_id}"));
        }
        if let (Ok(mut r), Ok(json)) = (self.records.lock(), serde_json::to_value(record)) {
            r.push(json);
        }
        None
    }

    async fn finish(
        &mut self,
        op: &str,
        _run_id: &str,
        out: AuditOutcome,
        moved: &Spool,
    ) -> Option<String> {
        log(&self.calls, format!("record finish {op} {}", out.outcome));
        if self.unwritten.is_some() {
            return self.why_once();
        }
        if let Ok(mut a) = self.audit.lock() {
            a.push(format!(
                "{op} outcome {} moved {} ids {}",
                out.outcome,
                out.moved,
                moved.len()
            ));
        }
        None
    }
}

impl RecordPort for FakeBroker {
    type Log = FakeLog;
    type Memory = FakeMemory;

    fn operator(&self) -> Author {
        RedirectPort::author(self)
    }

    fn memory_key(&self) -> String {
        "c/v".into()
    }

    fn memory(&self) -> Result<FakeMemory, String> {
        self.call("memory open");
        match &self.dlq.store_broken {
            Some(why) => Err(why.clone()),
            None => Ok(FakeMemory {
                rows: self.rows.clone(),
                protects: self.protects.clone(),
                memory: self.memory.clone(),
                calls: self.calls.clone(),
            }),
        }
    }

    async fn open_log(&self, consent: Consent<'_>) -> FakeLog {
        self.call("audit open");
        let declined = matches!(consent, Consent::Declined);
        FakeLog {
            unwritten: self.open_stream(AUDIT_STREAM, consent).err(),
            said: declined,
            audit: self.audit.clone(),
            records: self.records.clone(),
            calls: self.calls.clone(),
        }
    }
}

impl ArchivePort for FakeBroker {
    type Work = FakeWork;

    fn archive_settings(&self) -> &ArchiveSettings {
        &self.dlq.archive
    }

    async fn auto_delete(&self, queue: &str) -> Result<bool, SessionError> {
        self.call(&format!("queue {queue}"));
        if !self.dlq.heads.contains_key(queue) {
            return Err(SessionError::Management(ManagementError::NoQueue {
                vhost: "v".into(),
                queue: queue.into(),
            }));
        }
        Ok(self.dlq.auto_delete.contains(queue))
    }

    fn has_streams(&self) -> bool {
        !self.dlq.no_streams
    }

    fn local_place(&self, why: &str) -> Result<Place, String> {
        Ok(Place::Local(
            PathBuf::from("/fake/archive.jsonl"),
            why.into(),
        ))
    }

    async fn archive_state(&self) -> Result<StreamState, SessionError> {
        self.call("archive_state");
        Ok(if self.streams().contains(&self.dlq.archive.stream) {
            StreamState::Stream
        } else {
            StreamState::Missing
        })
    }

    async fn create_archive(&self) -> Result<(), DeclareError> {
        self.call("create_archive");
        if self.dlq.create_refused {
            return Err(DeclareError::NoPermission("access refused".into()));
        }
        if let Ok(mut s) = self.streams.lock() {
            s.insert(self.dlq.archive.stream.clone());
        }
        Ok(())
    }

    async fn retention_refusal(&self, place: &Place) -> Result<(), String> {
        self.call(&format!("retention {}", place.label()));
        self.dlq.retention_refused.clone().map_or(Ok(()), Err)
    }

    async fn select(&self, spec: &ReplaySpec, _cap: usize) -> Result<Selected, SessionError> {
        self.call(&format!("select {} {:?}", spec.queue, spec.consent));
        if self.dlq.read_costs && spec.consent != ReadConsent::ReadAgain {
            return Err(SessionError::NeedsConsent {
                queue: spec.queue.clone(),
                text: "reading again spends a delivery of each message".into(),
            });
        }
        let n = self.dlq.heads.get(&spec.queue).copied().unwrap_or(0);
        let messages: Vec<Explained> = (0..n)
            .map(|i| {
                let mut message = DeadLetter {
                    queue: spec.queue.clone(),
                    ..Default::default()
                };
                message.properties.message_id = Some(format!("m{i}"));
                Explained {
                    explanation: crate::domain::explain::explain(&message),
                    key: crate::domain::identity::message_key(&message),
                    message,
                    first_seen: None,
                }
            })
            .collect();
        Ok(Selected {
            messages,
            examined: n,
            depth: n,
            matched: n,
            first_seen: HashMap::new(),
        })
    }

    async fn write_refusal(&self, stream: &str) -> WriteCheck {
        self.call(&format!("write_check {stream}"));
        match &self.dlq.write_refused {
            Some(why) => WriteCheck::Refused(why.clone()),
            None => WriteCheck::Allowed,
        }
    }

    fn archive_work(
        &self,
        place: &Place,
        _stamp: Stamp,
        _sel: &Selected,
        count: u64,
    ) -> Result<FakeWork, String> {
        let what = format!("archive_work {}", place.label());
        self.call(&what);
        Ok(FakeWork { what, count })
    }

    fn discard_work(
        &self,
        queue: &str,
        snapshot: Option<&Path>,
        sel: &Selected,
    ) -> Result<FakeWork, String> {
        let what = format!("discard_work {queue} snapshot={}", snapshot.is_some());
        self.call(&what);
        Ok(FakeWork {
            what,
            count: sel.messages.len() as u64,
        })
    }

    async fn run(
        &self,
        spec: &ReplaySpec,
        work: FakeWork,
        _cancel: watch::Receiver<bool>,
        mut on_progress: impl FnMut(&Progress) + Send,
    ) -> Result<Summary, SessionError> {
        self.call(&format!("run {} ({})", spec.queue, work.what));
        if let Some(why) = &self.dlq.run_error {
            return Err(SessionError::Broker(why.clone()));
        }
        let sum = self
            .dlq
            .ending
            .clone()
            .unwrap_or_else(|| summary(StopReason::ReachedStartDepth, work.count));
        on_progress(&sum.progress);
        Ok(sum)
    }
}
