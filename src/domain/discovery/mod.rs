//! Finding the dead-letter queues of a vhost, pure: from queue arguments, policies, exchanges and
//! bindings (as plain structs the broker layer fills in) plus naming conventions, decide which
//! queues hold failed messages, who feeds them, which queue pairs are retry loops rather than
//! dead ends, and what the broker version means for browsing them safely.
//!
//! - [`topology`]: what the broker layer gathers (queues, policies, exchanges, bindings).
//! - [`settings`]: a queue's arguments and policy combined, and its delivery limit.
//! - [`routing`]: where a publish to exchange X with key K lands (also for replay previews).
//! - [`classify`]: names, dead-letter edges and retry loops, into a [`Discovery`].
//! - [`consumers`]: which queues' consumers are counted live, and where the counts go.
//! - [`stuck`]: dead letters an at-least-once quorum queue holds because no dead-letter queue
//!   takes them, and why.
//! - [`symfony`]: Symfony Messenger's failure transport, by the vhost's topology (nothing
//!   dead-letters into it; no message is read to find it).
//!
//! What a version and a queue type mean lives in [`crate::domain::features`]; the names are
//! re-exported here because every discovery caller needs them.

pub mod classify;
pub mod consumers;
pub mod routing;
pub mod settings;
pub mod stuck;
pub mod symfony;
pub mod topology;

/// Whose convention put a queue there: the same conventions a message is read by; a queue
/// recognised only by a generic name or a configured pattern is `Unknown`.
pub use crate::domain::convention::Convention;
pub use crate::domain::features::{BrokerFeatures, BrokerVersion, QueueType};
pub use classify::{
    Discovery, DlqInfo, DlqKind, NameMatch, QueueRef, QueueSummary, RetryLoop, classify_name,
    discover,
};
pub use routing::{Routing, RoutingTable, resolve_routing, resolve_routing_detail, topic_matches};
pub use settings::{
    EffectiveSettings, effective_delivery_limit, effective_settings, is_wait_queue,
    policy_definition, policy_in_force,
};
pub use topology::{
    Binding, DestinationType, ExchangeInfo, ExchangeKind, JsonMap, Policy, QueueInfo, Topology,
    bounded_arguments,
};
