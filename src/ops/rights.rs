//! Rights: whether this session may take messages off a queue, decided once per session and
//! asked by every operation before anything else.

use crate::broker::handle::Handle;
use crate::broker::rights::Publishing;
use crate::domain::refusal::Refusal;

pub use crate::domain::rights::{Act, ReadOnly, refusal};

/// Whether this session is read-only, and why: the flag and the context first (no broker
/// call), then the broker's own word (asked once per session; see `broker::rights`). A broker
/// that could not tell leaves the session writable: each run checks its targets and stops at
/// the first refused publish.
pub async fn read_only(s: &Handle) -> Option<ReadOnly> {
    if let Some(r) = configured(s) {
        return Some(r);
    }
    match s.publishing().await {
        Publishing::Refused(why) => Some(ReadOnly::Broker(why.clone())),
        Publishing::Allowed | Publishing::Unknown(_) => None,
    }
}

/// Read-only by the flag or the context alone (no broker call).
pub fn configured(s: &Handle) -> Option<ReadOnly> {
    ReadOnly::configured(
        s.target.read_only_flag,
        s.target.read_only,
        &s.target.context,
    )
}

/// The gate every operation passes first: `Err` with the refusal when this session is
/// read-only. Reading is never refused here.
pub async fn admit<R: super::ports::Rights>(r: &R, act: Act) -> Result<(), Refusal> {
    match r.read_only().await {
        None => Ok(()),
        Some(why) => Err(Refusal::ReadOnly { act, why }),
    }
}
