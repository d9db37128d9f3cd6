//! Protect: the policy that makes a quorum DLQ free to read (its delivery limit lifted). The
//! one home of `warren protect` and the TUI's `P`, on its port (`ops::ports::ProtectPort`).

use super::ports::ProtectPort;
use super::rights::{self, Act};
use super::{Front, Stop};
use crate::domain::protect::ProtectPlan;

/// The policy that would be set, with what it replaces: a look, allowed read-only.
pub async fn look<B: ProtectPort>(b: &B, queue: &str) -> Result<ProtectPlan, Stop> {
    b.protect(queue, false).await
}

/// Whether this session may set it (asked before the operator is).
pub async fn admit<B: ProtectPort>(b: &B) -> Result<(), Stop> {
    rights::admit(b, Act::Protect).await.map_err(Stop::Refused)
}

/// Sets the policy and puts it on the record (locally and, with consent, on the broker): the
/// plan as set, and what the record could not keep.
pub async fn apply<B: ProtectPort>(
    b: &B,
    queue: &str,
    front: &mut dyn Front,
) -> Result<(ProtectPlan, Vec<String>), Stop> {
    admit(b).await?;
    let plan = b.protect(queue, true).await?;
    let consent = front.audit_consent(b.operator().create_streams);
    let notes = super::record::protect(b, queue, &plan, consent).await;
    Ok((plan, notes))
}
