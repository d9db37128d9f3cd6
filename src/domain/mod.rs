//! The dead-letter model. Pure: no IO, no terminal, no lapin or reqwest types, so the CLI, the
//! TUI, the broker layer and the tests all share one explanation of a message.

pub mod archive;
pub mod arrival;
pub mod body;
pub mod brief;
pub mod canary;
pub mod comeback;
pub mod convention;
pub mod destination;
pub mod discovery;
pub mod edit;
pub mod engine;
pub mod explain;
pub mod features;
pub mod filter;
pub mod fingerprint;
pub mod grouping;
pub mod identity;
pub mod json;
pub mod ledger;
pub mod message;
pub mod outcome;
pub mod packed;
pub mod protect;
pub mod quorum;
pub mod redirect;
pub mod replay;
pub mod sanitize;
pub mod selection;
pub mod snapshot;
pub mod symfony;
pub mod urgency;
pub mod value;
pub mod verdict;
pub mod watch;
pub mod xdeath;
