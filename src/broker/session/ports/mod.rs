//! The session's side of `ops::ports`: the broker code the operations reach through the traits
//! `ops` owns (rights, redirects and protect here; archive, record and replay in their files).
//! The arrows point inward: `ops` names no `Session`, the session implements `ops`' traits.

use crate::broker::audit::Consent;
use crate::broker::redirects::Current;
use crate::broker::session::Session;
use crate::domain::protect::ProtectPlan;
use crate::domain::redirect::{Destination, RedirectRecord};
use crate::domain::sanitize::one_line;
use crate::ops::Stop;
use crate::ops::ports::*;
use crate::ops::rights::ReadOnly;
use std::future::Future;

mod archive;
mod record;
mod replay;

impl Rights for Session {
    fn read_only(&self) -> impl Future<Output = Option<ReadOnly>> + Send {
        crate::ops::rights::read_only(&self.handle)
    }
}
impl RedirectPort for Session {
    fn author(&self) -> Author {
        Author {
            broker_user: self.handle.target.credentials.username.clone(),
            context: self.handle.target.context.clone(),
            vhost: self.vhost().to_string(),
            create_streams: self.handle.target.audit.create,
            audit_stream: self.handle.target.audit.stream.is_some(),
        }
    }

    fn redirects(&self) -> impl Future<Output = Result<Current, String>> + Send {
        crate::broker::redirects::current(self)
    }

    async fn destination(&self, queue: &str) -> Result<Destination, Stop> {
        use crate::broker::management::ManagementError;
        let broker =
            |e: String| Stop::Broker(format!("looking up '{}': {e}", one_line(queue, 100)));
        let info = match self.handle.mgmt.queue(self.vhost(), queue).await {
            Ok(i) => i,
            Err(ManagementError::NoQueue { .. }) => return Ok(Destination::Missing),
            Err(e) => return Err(broker(e.to_string())),
        };
        let settings = self
            .handle
            .settings_of(&info)
            .await
            .map_err(|e| broker(e.to_string()))?;
        Ok(
            if crate::domain::destination::is_wait_queue(&info, &settings) {
                Destination::WaitQueue
            } else {
                Destination::Queue
            },
        )
    }

    async fn streams_to_create(&self) -> Vec<String> {
        let (redirect_stream, audit_stream) = tokio::join!(
            crate::broker::redirects::creation_question(self),
            crate::broker::audit::stream_to_ask_about(self)
        );
        [redirect_stream, audit_stream]
            .into_iter()
            .flatten()
            .collect()
    }

    fn keep(
        &self,
        event: &'static str,
        rec: &RedirectRecord,
        consent: Consent<'_>,
    ) -> impl Future<Output = Result<(), String>> + Send {
        crate::broker::redirects::keep(self, event, rec, consent)
    }
}
impl ProtectPort for Session {
    async fn protect(&self, queue: &str, apply: bool) -> Result<ProtectPlan, Stop> {
        self.handle
            .protect(queue, apply)
            .await
            .map_err(crate::ops::replay::stop_of)
    }
}
