//! Making a replay's plan: reading the head of the DLQ (or knowing the target without looking)
//! and checking the targets; the plan's policy is the domain's (`domain::preview::look`).

use std::sync::Arc;

use crate::domain::identity;
use crate::domain::message::DeadLetter;
use crate::domain::redirect::Redirects;
use crate::domain::replay as plan;
use crate::domain::sanitize;

use crate::domain::preview::look::{
    CHECKED_AS_MET, Known, Looked, checks_as_met, known_target, look_at, refused_by,
};

use super::{
    Preview, Remembered, ReplaySpec, Session, SessionError, TargetPreview, into_messages,
    targets::queue_depth,
};

impl Session {
    /// Looks at the head of the DLQ (as a browse: nothing moves; on a queue whose reads cost
    /// deliveries, what this session already read), plans each selected message, follows every
    /// target to where it comes to rest and checks it can take the messages, and says what would
    /// happen and whether it is allowed.
    pub async fn preview(
        &self,
        spec: &ReplaySpec,
        remember: impl FnOnce(&[String]) -> Remembered,
    ) -> Result<Preview, SessionError> {
        let (redirects, unreadable) = self.plan_redirects().await;
        let looked = self.look(spec, &redirects, remember).await?;
        self.checked_targets(spec, refused_by(looked, unreadable))
            .await
    }

    /// The redirects in force for a plan (see `domain::redirect`), and, when they could not be
    /// read, the refusal that says so: a plan that cannot know them moves nothing, so no
    /// message goes to an endpoint that was redirected away.
    async fn plan_redirects(&self) -> (Arc<Redirects>, Option<String>) {
        match crate::broker::redirects::current(self).await {
            Ok(c) => (Arc::new(c.redirects), None),
            Err(e) => (
                Arc::default(),
                Some(format!(
                    "the redirects kept on the broker could not be read ({}): nothing moves until they can be",
                    sanitize::one_line(&e, 200)
                )),
            ),
        }
    }

    /// [`Session::check_targets`], refused up front on an auto-delete DLQ (see
    /// [`crate::domain::refusal::auto_delete`]), so the plan says so before anything is confirmed.
    async fn checked_targets(
        &self,
        spec: &ReplaySpec,
        looked: Looked,
    ) -> Result<Preview, SessionError> {
        let (mut p, info) = self.handle.check_targets_with_dlq(spec, looked).await?;
        if info.auto_delete {
            p.refusals
                .push(crate::domain::refusal::auto_delete(&spec.queue, "replay"));
        }
        self.choose_carrier(spec, &mut p).await;
        Ok(p)
    }

    /// The protocol the run reads and publishes with, said in the plan (see
    /// `domain::amqp10::carrier`).
    async fn choose_carrier(&self, spec: &ReplaySpec, p: &mut Preview) {
        use crate::domain::amqp10::carrier::{self, Carrier, Choice};
        let speaks_10 =
            crate::domain::features::BrokerVersion::parse(&self.handle.overview.rabbitmq_version)
                .is_some_and(|v| v.at_least(4, 0));
        let choice = match (spec.protocol, spec.edits.is_some()) {
            // An edited body is the model's: it goes out as a 0.9.1 message.
            (Choice::Auto, true) => Choice::Amqp091,
            (Choice::Amqp10, true) => {
                p.refusals.push(
                    "an edited replay goes over AMQP 0.9.1: leave --protocol out or use amqp091"
                        .into(),
                );
                return;
            }
            (c, _) => c,
        };
        // Looking at the head costs nothing where handing a message back spends no delivery.
        let free_look = match self.handle.queue_policy(&spec.queue).await {
            Ok((_, q)) => q.cost_per_browse == 0,
            Err(_) => false,
        };
        if p.unread.is_some()
            && choice == Choice::Auto
            && speaks_10
            && free_look
            && self.endpoint10().is_ok()
        {
            p.carrier_by_head = true;
            p.notices.push(
                "read and published over AMQP 1.0 if the head message came from an AMQP 1.0 client, whose consumers get it unchanged only that way; else over 0.9.1 (--protocol to choose)".into(),
            );
            return;
        }
        if p.unread.is_some() && choice == Choice::Auto && speaks_10 {
            p.notices.push(
                "replayed over AMQP 0.9.1: nothing was read to tell whether the messages came from AMQP 1.0 clients (reading this queue spends deliveries); if they did, --protocol amqp10 gets them to their consumers unchanged".into(),
            );
        }
        match carrier::choose(choice, speaks_10, p.amqp10_signs, p.examined) {
            Ok((c, why)) => {
                p.carrier = c;
                p.notices.extend(why);
            }
            Err(e) => p.refusals.push(e),
        }
        if p.carrier == Carrier::Amqp10
            && let Err(e) = self.endpoint10()
        {
            p.refusals.push(e);
        }
    }

    /// The plan for a run about to start: as [`Session::preview`], but nothing is read first
    /// when where every message goes is known without looking (see [`Session::known_target`]).
    /// The count confirmed is then the queue's depth (a passive declare), each message is
    /// planned as the run takes it, and a message whose own plan points somewhere that was not
    /// checked here stays in the DLQ and is reported — never published unchecked.
    pub async fn preview_to_run(
        &self,
        spec: &ReplaySpec,
        remember: impl FnOnce(&[String]) -> Remembered,
    ) -> Result<Preview, SessionError> {
        // Only an unread plan of all of the queue without `--to` asks who feeds it.
        let all_unread = checks_as_met(spec);
        // The redirects and the discovery are independent reads: side by side.
        let ((redirects, unreadable), discovery) = tokio::join!(self.plan_redirects(), async {
            if all_unread {
                Some(self.discover().await)
            } else {
                None
            }
        });
        let discovery = discovery.transpose()?;
        let mut looked = match known_target(spec, &redirects, discovery.as_ref()) {
            Some((target, why)) => self.unread(spec, Some(target), why).await?,
            None if all_unread => {
                let mut looked = self.unread(spec, None, CHECKED_AS_MET.to_string()).await?;
                looked.p.checked_as_met = true;
                looked
            }
            None => self.look(spec, &redirects, remember).await?,
        };
        looked.p.endpoint_redirects = redirects;
        self.checked_targets(spec, refused_by(looked, unreadable))
            .await
    }

    /// A plan made without reading the queue: every message to `target`, the count from the
    /// queue itself.
    async fn unread(
        &self,
        spec: &ReplaySpec,
        target: Option<Known>,
        why: String,
    ) -> Result<Looked, SessionError> {
        // The queue's own figure, over AMQP (the management one is a sample).
        let (info, depth) =
            tokio::join!(self.handle.mgmt.queue(self.vhost(), &spec.queue), async {
                queue_depth(self.handle.amqp().await?, &spec.queue).await
            });
        let info = info?;
        let depth = depth?.ok_or_else(|| {
            SessionError::refused(format!(
                "queue '{}' does not exist in vhost '{}'",
                sanitize::one_line(&spec.queue, 100),
                sanitize::one_line(self.vhost(), 100)
            ))
        })?;
        let selected = spec.limit.map_or(depth, |l| l.min(depth));
        // Bytes for a byte limit at the target: the sampled average, scaled to the count.
        let bytes = match (info.message_bytes, info.messages) {
            (Some(b), Some(m)) if m > 0 => b.saturating_mul(selected) / m,
            (Some(b), _) => b,
            _ => 0,
        };
        let mut p = Preview {
            queue: spec.queue.clone(),
            selected,
            depth: Some(depth),
            unread: Some(why),
            added: plan::ADDED_HEADERS.iter().map(|h| h.to_string()).collect(),
            ..Default::default()
        };
        if let Some((target, redirected)) = target {
            let label = target.expected_queue.clone().unwrap_or_else(|| {
                format!(
                    "exchange '{}' key '{}'",
                    target.exchange, target.routing_key
                )
            });
            p.targets.insert(
                label,
                TargetPreview {
                    exchange: target.exchange,
                    routing_key: target.routing_key,
                    count: selected,
                    bytes,
                    redirected,
                    ..Default::default()
                },
            );
        }
        Ok(Looked {
            p,
            depth,
            staying: 0,
            skipped: 0,
        })
    }

    /// The first half of a plan: reads the head of the queue and plans each selected message.
    async fn look(
        &self,
        spec: &ReplaySpec,
        redirects: &Arc<Redirects>,
        remember: impl FnOnce(&[String]) -> Remembered,
    ) -> Result<Looked, SessionError> {
        let window = spec.window.max(1);
        // Up to 10,000 messages are looked at: keep bodies short (the engine re-reads each
        // message whole and decides on the whole body).
        let page = self
            .browse_with_cap(&spec.queue, window, identity::HASHED_BODY, spec.consent)
            .await?;
        let cost = self.handle.cost_note(&spec.queue, &page).await;
        let (reused, depth) = (page.reused, page.queue_depth_at_start);
        let mut looked = look_at(
            &self.handle.target.settings.conventions,
            spec,
            into_messages(page),
            depth,
            redirects,
            remember,
        );
        looked.p.reused = reused;
        looked.p.cost = cost;
        Ok(looked)
    }

    /// [`preview`](Self::preview) of messages already read: the head of `spec.queue`, which held
    /// `depth` (or messages taken from the archive, for `warren restore --replay`).
    pub async fn preview_of(
        &self,
        spec: &ReplaySpec,
        messages: Vec<DeadLetter>,
        depth: u64,
        remember: impl FnOnce(&[String]) -> Remembered,
    ) -> Result<Preview, SessionError> {
        let (redirects, unreadable) = self.plan_redirects().await;
        let looked = look_at(
            &self.handle.target.settings.conventions,
            spec,
            messages,
            depth,
            &redirects,
            remember,
        );
        self.handle
            .check_targets(spec, refused_by(looked, unreadable))
            .await
    }
}
