//! The session's side of `ops::ports` (replay): the broker code the operations reach through the
//! traits `ops` owns.

use crate::broker::archive::Place;
use crate::broker::canary::{Canary, Tap};
use crate::broker::replay::{Progress, Summary};
use crate::broker::restore::{self, Ask, ChosenRead, Outcome, ReplayWay};
use crate::broker::session::{Explained, Preview, ReplaySpec, Session, SessionError, WriteCheck};
use crate::domain::archive::Stamp;
use crate::domain::canary::{CanaryDecision, CanaryPlan, CanaryRule, CanaryWait, Watch};
use crate::domain::message::DeadLetter;
use crate::ops::ports::*;
use std::collections::HashMap;
use std::future::Future;
use tokio::sync::watch;

impl Publishing for Session {
    fn publish_refusal(
        &self,
        targets: &[(String, String)],
    ) -> impl Future<Output = WriteCheck> + Send {
        self.handle.write_refusal(targets)
    }
}
impl ReplayPort for Session {
    type Tap = Tap;

    async fn plan(
        &self,
        spec: &ReplaySpec,
        look: bool,
    ) -> Result<(Preview, FirstSeen), SessionError> {
        let mut first_seen = HashMap::new();
        let remember = |keys: &[String]| {
            let memory = crate::ops::remember(self, &spec.queue, keys);
            first_seen = memory.first_seen.clone();
            memory
        };
        let preview = if look {
            self.preview(spec, remember).await
        } else {
            self.preview_to_run(spec, remember).await
        }?;
        Ok((preview, first_seen))
    }

    fn canary_plan(
        &self,
        dlq: &str,
        preview: &Preview,
        rule: CanaryRule,
    ) -> impl Future<Output = CanaryPlan> + Send {
        Session::canary_plan(self, dlq, preview, rule)
    }

    fn open_tap(
        &self,
        dlq: &str,
        plan: &CanaryPlan,
    ) -> impl Future<Output = Result<Tap, String>> + Send {
        Session::open_tap(self, dlq, plan)
    }

    fn close_tap(&self, tap: Tap) -> impl Future<Output = ()> + Send {
        tap.close()
    }

    fn canary_wait(
        &self,
        c: &Canary<'_>,
        tap: Option<&mut Tap>,
        cancel: &mut watch::Receiver<bool>,
        on_wait: impl FnMut(&CanaryWait) + Send,
    ) -> impl Future<Output = (CanaryDecision, Watch)> + Send {
        Session::canary_wait(self, c, tap, cancel, on_wait)
    }

    async fn left_in(&self, queue: &str) -> Option<u64> {
        let conn = self.handle.amqp().await.ok()?;
        crate::broker::replay::left_in(conn, queue).await
    }

    fn held_elsewhere(&self, queue: &str) -> impl Future<Output = u64> + Send {
        self.handle.held_elsewhere(queue)
    }

    fn replay(
        &self,
        spec: &ReplaySpec,
        preview: &Preview,
        first_seen: FirstSeen,
        cancel: watch::Receiver<bool>,
        on_progress: impl FnMut(&Progress) + Send,
    ) -> impl Future<Output = Result<Summary, SessionError>> + Send {
        Session::replay(self, spec, preview, first_seen, cancel, on_progress)
    }

    fn keep_copies(
        &self,
        place: &Place,
        stamp: &Stamp,
        messages: &[DeadLetter],
    ) -> impl Future<Output = Result<(), String>> + Send {
        crate::broker::archive::keep_copies(self, place, stamp, messages)
    }
}
impl RestorePort for Session {
    fn archive_key(&self, place: &Place) -> String {
        place.key(self)
    }

    fn window(&self) -> usize {
        self.handle.target.settings.replay.window
    }

    fn read_archive(
        &self,
        memory: &mut crate::store::Store,
        key: &str,
        place: &Place,
        ask: &Ask,
        cap: usize,
        on_page: &mut (dyn FnMut(u64) + Send),
    ) -> impl Future<Output = Result<ChosenRead, String>> + Send {
        restore::read_and_choose(self, memory, key, place, ask, cap, on_page)
    }

    fn plan_back(
        &self,
        chosen: &[(String, Explained)],
    ) -> impl Future<Output = Result<restore::Plan, String>> + Send {
        restore::plan_back(self, chosen)
    }

    fn plan_replay(
        &self,
        place: &Place,
        chosen: Vec<(String, Explained)>,
        way: &ReplayWay,
    ) -> impl Future<Output = Result<restore::Plan, String>> + Send {
        restore::plan_replay(self, place, chosen, way, |name, keys| {
            crate::ops::remember(self, name, keys)
        })
    }

    async fn room_in(
        &self,
        queue: &str,
        count: u64,
        bytes: u64,
    ) -> Result<Option<Result<String, String>>, SessionError> {
        let conn = self.handle.amqp().await?;
        self.handle.room_in(conn, queue, count, bytes).await
    }

    fn publish(
        &self,
        plan: restore::Plan,
        cancel: &watch::Receiver<bool>,
        memory: crate::store::Store,
        key: String,
        audit_id: Option<i64>,
        on_batch: impl FnMut(u64, u64, u64) + Send,
    ) -> impl Future<Output = Outcome> + Send {
        let remember = crate::store::remember_restored(memory, key, audit_id);
        restore::publish(self, plan, cancel, remember, on_batch)
    }
}
