//! A read that may spend deliveries again, asked for in one place: where the session says what
//! reading a queue again would cost (`SessionError::NeedsConsent`), the front end is asked
//! (`Front::read_again`: the CLI on its terminal or by `--read-again`), and only its yes reads
//! again. An operation's selection (archive, discard) and a look (show, groups, export) both
//! read through it.

use std::future::Future;

use super::{Front, Refusal, Stop, replay::stop_of};
use crate::broker::session::{ReadConsent, SessionError};

/// Reads with `first`; on a read that would cost deliveries again, asks `front` and reads again
/// only on its yes. A no is `Refusal::NotReadAgain`; a front end that cannot ask says why
/// (`Refusal::CannotAsk`).
pub(crate) async fn consented<T, Fut>(
    front: &mut dyn Front,
    first: ReadConsent,
    read: impl Fn(ReadConsent) -> Fut,
) -> Result<T, Stop>
where
    Fut: Future<Output = Result<T, SessionError>>,
{
    match read(first).await {
        Err(SessionError::NeedsConsent { queue, text }) => match front.read_again(&queue, &text) {
            Ok(true) => read(ReadConsent::ReadAgain).await.map_err(stop_of),
            Ok(false) => Err(Stop::Refused(Refusal::NotReadAgain { queue })),
            Err(why) => Err(Stop::Refused(Refusal::CannotAsk { why, undone: None })),
        },
        other => other.map_err(stop_of),
    }
}
