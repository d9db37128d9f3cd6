//! The archive stream as this session sees it: whether it can exist, its state, declaring it,
//! reading it, and the header of snapshots written from here.

use crate::broker::browse::{self, BrowsePage, BrowseRequest};
use crate::broker::handle::Handle;
use crate::domain::features::QueueType;
use crate::domain::quorum::BrowsePolicy;

use super::{SessionError, targets::queue_exists};

/// How long the archive's last chunk may take to come when its end is looked for: an empty
/// archive costs this much.
const ARCHIVE_TAIL_IDLE: std::time::Duration = std::time::Duration::from_secs(3);

impl Handle {
    /// Whether the broker can hold the archive in a stream (RabbitMQ 3.9 and later).
    pub fn streams_supported(&self) -> bool {
        self.overview
            .features
            .version
            .is_none_or(|v| v.at_least(3, 9))
    }

    /// What holds the archive stream's name in the vhost.
    pub async fn archive_state(&self) -> Result<crate::broker::archive::StreamState, SessionError> {
        use crate::broker::archive::StreamState;
        let name = self.target.archive.stream.clone();
        let conn = self.amqp().await?;
        if !queue_exists(conn, &name).await? {
            return Ok(StreamState::Missing);
        }
        let info = self.mgmt.queue(self.vhost(), &name).await?;
        Ok(match info.queue_type {
            QueueType::Stream => StreamState::Stream,
            other => StreamState::NotAStream(other.as_str().to_string()),
        })
    }

    /// Declares the archive stream (the caller asked first). Refused in read-only mode.
    pub async fn create_archive(&self) -> Result<(), crate::broker::archive::DeclareError> {
        use crate::broker::archive::DeclareError;
        if let Some(why) = self.configured_refusal(crate::domain::rights::Act::CreateStream) {
            return Err(DeclareError::Other(why));
        }
        let conn = self
            .amqp()
            .await
            .map_err(|e| DeclareError::Other(e.to_string()))?;
        crate::broker::archive::declare_stream(
            conn,
            &self.target.archive.stream,
            Some(&self.target.archive.max_age),
        )
        .await
    }

    /// Reads the archive stream from its first message, up to `limit`, to the offset where it
    /// ends now (the page says `Idle` if the broker stopped delivering before it), whole bodies.
    /// Not bounded by the management API's count, which lags seconds behind a stream just
    /// written. Reading a stream costs nothing and deletes nothing.
    pub async fn browse_archive(
        &self,
        name: &str,
        limit: usize,
    ) -> Result<std::sync::Arc<BrowsePage>, SessionError> {
        let tail = self.archive_tail(name).await?;
        self.browse_archive_range(name, None, tail, limit).await
    }

    /// The offset of the archive stream's last message now (`None`: it is empty). Without it, half
    /// a second's pause of a loaded broker passed for the end (an archive of 20,000 listed 6,505
    /// and said nothing).
    pub async fn archive_tail(&self, name: &str) -> Result<Option<u64>, SessionError> {
        Ok(browse::stream_tail(self.amqp().await?, name, ARCHIVE_TAIL_IDLE).await?)
    }

    /// Up to `limit` messages of the archive stream from offset `from` (its first message when
    /// `None`) to `tail` (as [`Session::archive_tail`] found it; `None`: nothing to read), whole
    /// bodies: one page of a read that goes through the whole archive a page at a time.
    pub async fn browse_archive_range(
        &self,
        name: &str,
        from: Option<u64>,
        tail: Option<u64>,
        limit: usize,
    ) -> Result<std::sync::Arc<BrowsePage>, SessionError> {
        let conn = self.amqp().await?;
        let mut req = BrowseRequest::new(name, QueueType::Stream, BrowsePolicy::unrestricted());
        req.limit = limit;
        req.body_cap = usize::MAX;
        req.stream_offset = from;
        match tail {
            Some(tail) if from.is_none_or(|f| f <= tail) => req.end_offset = Some(tail),
            _ => return Ok(std::sync::Arc::new(BrowsePage::default())),
        }
        Ok(std::sync::Arc::new(browse::browse(conn, &req).await?))
    }

    /// The header of a snapshot Warren writes from this place (a discard's, a local archive's).
    pub fn snapshot_header(&self, queue: &str) -> crate::domain::snapshot::SnapshotHeader {
        crate::domain::snapshot::SnapshotHeader {
            queue: queue.to_string(),
            vhost: self.vhost().to_string(),
            exported_at: jiff::Timestamp::now().to_string(),
            source: format!("RabbitMQ {}", self.overview.rabbitmq_version),
        }
    }
}
