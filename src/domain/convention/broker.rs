//! RabbitMQ's own dead-lettering (`x-death`), whatever the client, and the message nothing
//! recognisable marks. Neither records a failure of its own: `convention::read` fills the
//! reading from the death history, which says for the broker where it failed and how often.

use super::Convention;
use super::framework::{BASE, Framework};

pub(crate) const BROKER: Framework = Framework {
    convention: Convention::Broker,
    name: "broker",
    label: "RabbitMQ dead-lettering",
    detect: |l| !l.deaths.is_empty(),
    ..BASE
};

/// Asked last, and always yes.
pub(crate) const UNKNOWN: Framework = Framework {
    convention: Convention::Unknown,
    name: "unknown",
    label: "unknown",
    detect: |_| true,
    ..BASE
};
