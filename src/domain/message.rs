//! A message read from a dead-letter queue, independent of how it was read (AMQP browse, the
//! management API, or a snapshot file). Everything the domain explains or plans starts here.

use super::value::Table;

/// The AMQP basic properties, headers aside. Strings from the broker; display through `sanitize`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Properties {
    pub content_type: Option<String>,
    pub content_encoding: Option<String>,
    /// 1 transient, 2 persistent.
    pub delivery_mode: Option<u8>,
    pub priority: Option<u8>,
    pub correlation_id: Option<String>,
    pub reply_to: Option<String>,
    pub expiration: Option<String>,
    pub message_id: Option<String>,
    /// Seconds since the Unix epoch.
    pub timestamp: Option<u64>,
    /// The `type` property.
    pub kind: Option<String>,
    pub user_id: Option<String>,
    pub app_id: Option<String>,
    pub cluster_id: Option<String>,
}

/// How the message was delivered to Warren while browsing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Delivery {
    /// Exchange and routing key the message was last published with (the dead-letter exchange
    /// and key for broker deaths, the error exchange for framework republishes).
    pub exchange: String,
    pub routing_key: String,
    pub redelivered: bool,
    /// Quorum queues: `x-delivery-count` as delivered to us (deliveries before this one).
    pub delivery_count: Option<u64>,
    /// Streams: the message's offset.
    pub stream_offset: Option<u64>,
}

/// One dead letter.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeadLetter {
    /// The queue it was read from (the DLQ).
    pub queue: String,
    /// Position from the head of the queue at browse time, 0-based.
    pub position: u64,
    pub properties: Properties,
    pub headers: Table,
    /// The body as kept in memory: possibly cut at the configured cap, see `body_size`.
    pub body: Vec<u8>,
    /// The real size of the body in bytes.
    pub body_size: u64,
    pub delivery: Delivery,
}

impl DeadLetter {
    /// True when `body` holds the whole body (replay needs the whole body: it re-reads the
    /// message from the broker anyway, but display and export must say when bytes are missing).
    pub fn body_complete(&self) -> bool {
        self.body.len() as u64 >= self.body_size
    }
}
