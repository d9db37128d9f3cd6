//! Running the engine for a replay, an archive or a discard, with the ledger kept and targets
//! met first checked beside the run.

use std::collections::{BTreeMap, HashMap, HashSet};

use tokio::sync::watch;

use crate::broker::replay::{self, Job, Progress, Summary, TargetKey};
use crate::domain::discovery;
use crate::domain::ledger::{self, ReadOutcome};
use crate::domain::quorum::BrowsePolicy;
use crate::domain::refusal::Refusal;
use crate::domain::replay as plan;

use super::{Preview, ReplaySpec, Session, SessionError, reads::wait_for_turn};

impl Session {
    /// A replay's own two connections, consuming and publishing. (One connection with two
    /// channels was measured too: the same CPU per message, no faster: see docs/benchmarks.md,
    /// Replay.)
    async fn replay_connections(&self) -> Result<(lapin::Connection, lapin::Connection), String> {
        // Opened side by side: each is a TCP connection and three round trips of handshake.
        let (consume, publish) = tokio::join!(
            self.handle.connect_amqp("warren-replay-consume"),
            self.handle.connect_amqp("warren-replay-publish")
        );
        match (consume, publish) {
            (Ok(c), Ok(p)) => Ok((c, p)),
            // The one that opened is closed, not left to the broker's heartbeat; a broker that
            // does not answer the close is not waited for.
            (Ok(open), Err(e)) | (Err(e), Ok(open)) => {
                let closing = open.close(200, "the other connection failed".into());
                let _ = tokio::time::timeout(std::time::Duration::from_secs(2), closing).await;
                Err(e.to_string())
            }
            (Err(e), Err(_)) => Err(e.to_string()),
        }
    }

    /// Runs a replay that `preview` allowed. The caller checked read-only and wrote the audit.
    pub async fn replay(
        &self,
        spec: &ReplaySpec,
        preview: &Preview,
        first_seen: HashMap<String, jiff::Timestamp>,
        cancel: watch::Receiver<bool>,
        on_progress: impl FnMut(&Progress),
    ) -> Result<Summary, SessionError> {
        let work = Work {
            action: replay::Action::Replay,
            // Never more than the count the user confirmed.
            limit: spec
                .limit
                .map_or(preview.selected, |l| l.min(preview.selected)),
            allowed_targets: preview.allowed.clone(),
            redirects: preview.redirects.clone(),
            endpoint_redirects: preview.endpoint_redirects.clone(),
            replays: preview.replays.clone(),
            first_seen,
            planned_unread: preview.unread.is_some(),
            // A plan that read nothing knows only the targets it could know without looking
            // (the one queue that dead-letters into the DLQ): a message for another (one an
            // app copied there, past a wait queue) is checked the first time it is met, and
            // followed past wait queues as a read plan would, never refused unchecked.
            check_as_met: preview.checked_as_met || preview.unread.is_some(),
            bytes: preview.targets.values().map(|t| t.bytes).sum(),
            rest_queues: preview.rest_queues().into_iter().collect(),
            carrier: preview.carrier,
            carrier_by_head: preview.carrier_by_head,
        };
        self.run_job(spec, work, cancel, on_progress).await
    }

    /// Runs the engine on `spec.queue` with `work`'s action: a replay, an archive or a discard,
    /// with the same guarantees (acknowledged only after the confirm, or for a discard only
    /// what its snapshot holds; everything else handed back). The caller checked read-only and
    /// wrote the audit.
    pub async fn run_job(
        &self,
        spec: &ReplaySpec,
        work: Work,
        cancel: watch::Receiver<bool>,
        on_progress: impl FnMut(&Progress),
    ) -> Result<Summary, SessionError> {
        let mut steps = crate::broker::steps::Steps::new("run");
        self.may_take().await?;
        steps.done("may take");
        let lock = self.cache.read_lock(&spec.queue);
        let _reading = wait_for_turn(&lock, &spec.queue).await?;
        let (info, quorum) = self.handle.queue_policy(&spec.queue).await?;
        steps.done("queue policy");
        if info.auto_delete {
            let verb = work.action.verb();
            return Err(SessionError::Refused(Refusal::AutoDelete {
                queue: spec.queue.clone(),
                verb,
            }));
        }
        let (limit, bytes) = (work.limit, work.bytes);
        let (check_as_met, planned_unread) = (work.check_as_met, work.planned_unread);
        let over_10 = work.carrier == crate::domain::amqp10::carrier::Carrier::Amqp10;
        let by_head = work.carrier_by_head;
        let mut job = self.job_of(spec, work, &info, &quorum);
        if over_10 {
            job.amqp10 = Some(self.endpoint10().map_err(SessionError::refused)?);
        } else if by_head && self.head_is_10(&spec.queue).await {
            // A plan that read nothing has no signs: the head message decided.
            job.amqp10 = self.endpoint10().ok();
        }
        let backlog = job.backlog.clone();
        let (checks_tx, mut checks_rx) = tokio::sync::mpsc::channel::<replay::CheckRequest>(1);
        if check_as_met {
            job.checks = Some(checks_tx);
        } else {
            drop(checks_tx);
        }
        // The engine hands back what it does not move: on a queue whose reads cost deliveries
        // that is a read too, recorded in the ledger like one (the worst case first).
        let costly = quorum.cost_per_browse > 0 && quorum.limit.is_some();
        let version = self.handle.overview.rabbitmq_version.clone();
        let now_ms = || jiff::Timestamp::now().as_millisecond();
        let prior = if costly {
            self.remembered(&spec.queue, &info).await.ok().flatten()
        } else {
            None
        };
        let begun = costly.then(|| ledger::begin(&quorum, &version, prior.as_ref(), now_ms()));
        if let Some(b) = &begun {
            self.write_record(&spec.queue, Some(b))?;
        }
        // Consuming and publishing get connections of their own for the run (see
        // `replay::run_split`); after a node loss the next URL of the context is tried and the
        // run carries on from the queue as it is then.
        let mut stretch = 0u32;
        let connect = move || {
            stretch += 1;
            if stretch > 1 {
                // After a node loss: begin with the next node.
                self.handle
                    .amqp_start
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            let opening = self.replay_connections();
            async {
                let mut steps = crate::broker::steps::Steps::new("connect");
                let opened = opening.await;
                steps.done("connections");
                opened
            }
        };
        let reconnects = if self.handle.target.amqp_urls.len() > 1 {
            // Carrying on needs another node to carry on with.
            MAX_RECONNECTS
        } else {
            0
        };
        let run = async move {
            let r = replay::run_failover(
                connect,
                &job,
                crate::domain::engine::Limits::default(),
                cancel,
                on_progress,
                reconnects,
            )
            .await;
            // The job holds the sender of target checks: gone with it, the checks end too.
            drop(job);
            r
        };
        // Targets met first during the run are checked here, beside it (see `check_met`).
        let serve = async {
            while let Some(req) = checks_rx.recv().await {
                let r = self.handle.check_met(spec, &req, limit, bytes).await;
                // The backlog cap watches where a target that passed comes to rest, before
                // its first message is published.
                let r = r.map(|(redirect, rests)| {
                    if let Some(b) = &backlog {
                        b.watch(rests);
                    }
                    redirect
                });
                let _ = req.reply.send(r);
            }
        };
        let (result, ()) = tokio::join!(run, serve);
        let mut summary = result?;
        summary.planned_unread = planned_unread;
        self.cache.forget_moved(&spec.queue, &summary.moved_ids);
        if let Some(b) = &begun {
            let handed_back =
                summary.counts.held_back + summary.progress.failed + summary.progress.returned;
            let outcome = ReadOutcome {
                delivered: handed_back,
                // What the engine handed back had at most the count the ledger knew of.
                max_delivery_count: b.before_read,
                max_acquired_count: None,
                returned_explicitly: !matches!(summary.stop, replay::StopReason::ConnectionLost(_)),
                stopped: None,
            };
            let _ = self.write_record(
                &spec.queue,
                Some(&ledger::finish(&quorum, b, &outcome, now_ms())),
            );
        }
        Ok(summary)
    }

    /// Refuses to take anything off a queue in read-only mode, or for a user the broker lets
    /// read but not publish.
    async fn may_take(&self) -> Result<(), SessionError> {
        if let Some(r) = self
            .handle
            .configured_read_only(crate::domain::rights::Act::Replay)
        {
            return Err(SessionError::Refused(r));
        }
        // The last line behind `ops::rights`: a user the broker lets read but not publish takes
        // nothing off a queue, whoever calls.
        if let crate::broker::rights::Publishing::Refused(why) = self.handle.publishing().await {
            use crate::domain::rights::{Act, ReadOnly};
            return Err(SessionError::Refused(Refusal::ReadOnly {
                act: Act::Replay,
                why: ReadOnly::Broker(why.clone()),
            }));
        }
        Ok(())
    }

    /// The engine's job for `work` on `spec.queue`, as the queue (`info`, `quorum`) is now.
    fn job_of(
        &self,
        spec: &ReplaySpec,
        work: Work,
        info: &discovery::QueueInfo,
        quorum: &BrowsePolicy,
    ) -> Job {
        let queue_type = info.queue_type.clone();
        let backlog = spec
            .max_backlog
            .map(|max| replay::BacklogCap::new(max, work.rest_queues.clone()));
        Job {
            action: work.action,
            dlq: spec.queue.clone(),
            selection: spec.selection.clone(),
            limit: Some(work.limit),
            rate: spec.rate,
            window: spec.window,
            keep_attempts: spec.keep_attempts,
            clear_expiry: spec.clear_expiry,
            strip_failure_stamp: spec.strip_failure_stamp,
            to: spec.to.clone(),
            allowed_targets: work.allowed_targets,
            redirects: work.redirects,
            endpoint_redirects: work.endpoint_redirects,
            replays: work.replays,
            first_seen: work.first_seen,
            quorum: quorum.clone(),
            settle_lag: crate::domain::features::settle_lag(&queue_type),
            conventions: self.handle.target.settings.conventions.clone(),
            run_id: spec.run_id.clone(),
            message_bytes: match (info.message_bytes, info.messages) {
                (Some(b), Some(m)) if m > 0 => Some(b / m),
                _ => None,
            },
            checks: None,
            backlog,
            edits: spec.edits.clone(),
            amqp10: None,
        }
    }

    /// Whether the DLQ's head message came from an AMQP 1.0 client, looked at on a connection
    /// of its own within 3 s (no answer: no).
    async fn head_is_10(&self, queue: &str) -> bool {
        let limit = std::time::Duration::from_secs(3);
        let Ok(Ok(conn)) =
            tokio::time::timeout(limit, self.handle.connect_amqp("warren-look")).await
        else {
            return false;
        };
        let is = replay::run10::head_is_10(&conn, queue, limit).await;
        let _ = tokio::time::timeout(limit, conn.close(200, "looked".into())).await;
        is
    }

    /// Where a replay over AMQP 1.0 connects: the context's first AMQP URL, as this session's
    /// user.
    pub(crate) fn endpoint10(&self) -> Result<crate::broker::amqp10::Endpoint10, String> {
        let url = self
            .handle
            .target
            .amqp_urls
            .first()
            .ok_or_else(|| self.handle.target.no_amqp_url())?;
        crate::broker::amqp10::Endpoint10::of(
            url,
            &self.handle.target.vhost,
            &self.handle.target.credentials.username,
            self.handle.target.credentials.password.expose(),
        )
    }
}

/// What one engine run does, beside the user's [`ReplaySpec`]: decided by the preview (or, for
/// an archive or a discard, by the selection the user confirmed).
#[derive(Clone, Debug)]
pub struct Work {
    pub action: replay::Action,
    /// The count confirmed: the run never moves more.
    pub limit: u64,
    pub allowed_targets: HashSet<TargetKey>,
    pub redirects: BTreeMap<TargetKey, plan::ReplayTarget>,
    /// The redirects in force when the plan was made (`domain::redirect`).
    pub endpoint_redirects: std::sync::Arc<crate::domain::redirect::Redirects>,
    pub replays: HashMap<String, i64>,
    /// When Warren first saw each message, by key (for `age:`).
    pub first_seen: HashMap<String, jiff::Timestamp>,
    /// The plan read nothing first (see [`Session::preview_to_run`]): its summary says so.
    pub planned_unread: bool,
    /// Targets not checked by the plan are checked as the run first meets them
    /// ([`Preview::checked_as_met`]), each as if `limit` messages of `bytes` went there.
    pub check_as_met: bool,
    pub bytes: u64,
    /// The queues the messages come to rest in ([`Preview::rest_queues`]): the ones
    /// `--max-backlog` watches. Empty for an archive or a discard.
    pub rest_queues: Vec<String>,
    /// The protocol a replay reads and publishes with (the plan's `Preview::carrier`).
    pub carrier: crate::domain::amqp10::carrier::Carrier,
    /// The plan read nothing: the run's head message decides the protocol
    /// (`Preview::carrier_by_head`).
    pub carrier_by_head: bool,
}

/// Node losses a replay carries on after, when the context has several AMQP URLs (each time it
/// reconnects to the first URL that answers).
const MAX_RECONNECTS: u32 = 3;
