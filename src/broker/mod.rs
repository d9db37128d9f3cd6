//! Reaching a real broker: the management HTTP API, AMQP connections, browsing and replaying
//! (configuration is `crate::config`, local files `crate::local`). Turns what the broker says
//! into domain types and errors in the user's words.

pub mod amqp;
pub mod amqp10;
pub mod archive;
pub mod audit;
pub mod browse;
pub mod canary;
pub mod cluster;
pub mod discover;
pub mod handle;
pub mod management;
pub mod redirects;
pub mod replay;
pub mod restore;
pub mod rights;
pub mod session;
pub(crate) mod steps;
