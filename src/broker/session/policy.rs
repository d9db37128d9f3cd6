//! What a queue's reads cost and how it is protected, asked of the broker: its settings with
//! the policies in force, the browse policy they give (`domain::quorum`), a protecting policy,
//! and what a read just spent. No session state: these are the connection handle's.

use crate::broker::browse::BrowsePage;
use crate::broker::handle::Handle;
use crate::domain::discovery;
use crate::domain::features::QueueType;
use crate::domain::ledger;
use crate::domain::quorum::BrowsePolicy;

use super::SessionError;

impl Handle {
    /// How browsing `queue` must behave: its type and effective delivery limit decide what one
    /// browse costs on this broker version.
    pub async fn browse_policy(
        &self,
        queue: &str,
    ) -> Result<(QueueType, BrowsePolicy, Option<u64>), SessionError> {
        let (info, policy) = self.queue_policy(queue).await?;
        Ok((info.queue_type, policy, info.messages))
    }
    /// [`Session::browse_policy`] with the queue as the management API reports it.
    pub(crate) async fn queue_policy(
        &self,
        queue: &str,
    ) -> Result<(discovery::QueueInfo, BrowsePolicy), SessionError> {
        let info = self.mgmt.queue(self.vhost(), queue).await?;
        let settings = self.settings_of(&info).await?;
        let limit = discovery::effective_delivery_limit(&info, &settings, &self.overview.features);
        let policy = BrowsePolicy::decide_with_margin(
            self.version(),
            &info.queue_type,
            limit,
            self.target.settings.browse.quorum_safety_margin,
        );
        Ok((info, policy))
    }
    /// A queue's effective settings. Where the broker did not report the queue's policy (its
    /// stats lag a few seconds behind a declare or a policy change, measured on 4.3), the
    /// vhost's policies are matched by pattern, as the broker does: a limit must never be
    /// missed because a column was late.
    pub(crate) async fn settings_of(
        &self,
        info: &discovery::QueueInfo,
    ) -> Result<discovery::EffectiveSettings, SessionError> {
        if info.effective_policy.is_some() {
            return Ok(discovery::effective_settings(
                info,
                info.effective_policy.as_ref(),
            ));
        }
        let policies = self.mgmt.policies(self.vhost()).await?;
        Ok(discovery::effective_settings(
            info,
            discovery::policy_definition(info, &policies),
        ))
    }
    /// The policy that makes `queue` free to read (see `domain::protect`); applied unless
    /// `apply` is false. Refused in read-only mode.
    pub async fn protect(
        &self,
        queue: &str,
        apply: bool,
    ) -> Result<crate::domain::protect::ProtectPlan, SessionError> {
        let (info, policies) = tokio::join!(
            self.mgmt.queue(self.vhost(), queue),
            self.mgmt.policies(self.vhost())
        );
        let (info, policies) = (info?, policies?);
        // By name when the broker reported it, else by pattern (the column lags on 4.3).
        let in_force = discovery::policy_in_force(&info, &policies);
        let plan = crate::domain::protect::plan(self.version(), &info, in_force)
            .map_err(SessionError::refused)?;
        if apply {
            if let Some(r) = self.configured_read_only(crate::domain::rights::Act::Protect) {
                return Err(SessionError::Refused(r));
            }
            self.mgmt.put_policy(self.vhost(), &plan.policy).await?;
        }
        Ok(plan)
    }
    /// What the read that made `page` spent on this broker, in its own terms (`None` where
    /// nothing counts, or the page was reused rather than read). Decided by the queue's policy,
    /// not by the counters seen: 3.x adds `x-delivery-count` only on a redelivery, so a first
    /// read sees none and still spends one delivery of each message.
    pub async fn cost_note(&self, queue: &str, page: &BrowsePage) -> Option<String> {
        if page.reused || page.delivered == 0 {
            return None;
        }
        let (queue_type, policy, _) = self.browse_policy(queue).await.ok()?;
        let cost = ledger::cost_note(
            &policy,
            &self.overview.rabbitmq_version,
            page.delivered,
            page.max_delivery_count,
            page.max_acquired_count,
        );
        let order = crate::domain::quorum::order_note(&queue_type);
        match (cost, order) {
            (Some(c), Some(o)) => Some(format!("{c}; {o}")),
            (c, o) => c.or(o.map(str::to_string)),
        }
    }

    /// Messages another consumer holds unacknowledged on `queue` right now: only when a consumer
    /// is attached (AMQP's live count) and the management API counts unacknowledged messages, so
    /// a browse that just ended is not taken for one. A run never sees them.
    pub(crate) async fn held_elsewhere(&self, queue: &str) -> u64 {
        use lapin::options::QueueDeclareOptions;
        let Ok(conn) = self.amqp().await else {
            return 0;
        };
        let Ok(name) = crate::broker::amqp::short("the queue name", queue) else {
            return 0;
        };
        let Ok(ch) = conn.create_channel().await else {
            return 0;
        };
        let declared = ch
            .queue_declare(
                name,
                QueueDeclareOptions {
                    passive: true,
                    ..Default::default()
                },
                Default::default(),
            )
            .await;
        let _ = ch.close(200, "counted".into()).await;
        if !declared.is_ok_and(|d| d.consumer_count() > 0) {
            return 0;
        }
        self.mgmt
            .queue(self.vhost(), queue)
            .await
            .ok()
            .and_then(|q| q.messages_unacknowledged)
            .unwrap_or(0)
    }
}
