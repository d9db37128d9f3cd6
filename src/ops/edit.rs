//! Edit, then replay: part of the replay's home (`ops::replay` calls it for `warren replay
//! --edit` and the TUI's editor). The selected messages are read whole and handed to the
//! operator as one document (`domain::edit`) through the front end; what comes back is read and
//! checked here, and only the messages that changed are replayed, each as edited. After the
//! go-ahead and before anything moves, copies of their originals go to the archive, so the
//! exact message that died can always be restored.

use std::sync::Arc;

use super::ports::ReplayPort;
use super::{Front, Refusal, Stop};
use crate::broker::archive::Place;
use crate::broker::session::ReplaySpec;
use crate::domain::archive::Stamp;
use crate::domain::edit::{self, Edits};
use crate::domain::message::DeadLetter;
use crate::domain::sanitize::one_line;
use crate::domain::selection::Selection;

/// What the operator edited, and where their originals will be kept.
pub(super) struct Asked {
    pub(super) edits: Arc<Edits>,
    /// The originals of the edited messages, as read.
    pub(super) originals: Vec<DeadLetter>,
    pub(super) place: Place,
}

/// Reads the selection whole, has the operator edit it, and narrows `spec` to exactly the
/// edited messages. `Stop::Declined` when the document came back unchanged or empty.
pub(super) async fn ask<B: ReplayPort>(
    s: &B,
    spec: &mut ReplaySpec,
    how: super::replay::EditArchive,
    dry_run: bool,
    front: &mut dyn Front,
) -> Result<Asked, Stop> {
    let sel = super::archive::select(s, spec, usize::MAX, front).await?;
    let messages: Vec<DeadLetter> = sel.messages.into_iter().map(|e| e.message).collect();
    if messages.is_empty() {
        return Err(Stop::Refused(Refusal::NothingSelected {
            undone: "nothing to edit",
        }));
    }
    if messages.len() > edit::MAX_MESSAGES {
        return Err(Stop::Refused(Refusal::TooManyToEdit {
            selected: messages.len(),
            max: edit::MAX_MESSAGES,
        }));
    }
    let edits = edited(&spec.queue, &messages, front)?;
    for m in &edits.messages {
        front.say(&format!(
            "edited {}: {}",
            one_line(&m.key, 120),
            one_line(&m.changes.join("; "), 600)
        ));
    }
    if edits.unchanged > 0 {
        front.say(&format!(
            "{} message(s) left as they were stay in the queue",
            edits.unchanged
        ));
    }
    let keys = edits.keys();
    let originals = messages
        .into_iter()
        .filter(|m| keys.contains(&crate::domain::identity::message_key(m)))
        .collect();
    spec.selection = Selection::Keys(keys);
    spec.limit = None;
    let place = super::archive::place(s, how.local, how.create, dry_run, front).await?;
    s.retention_refusal(&place).await.map_err(Stop::refused)?;
    let edits = Arc::new(edits);
    spec.edits = Some(edits.clone());
    Ok(Asked {
        edits,
        originals,
        place,
    })
}

/// The document, edited until it reads or the operator gives up.
fn edited(queue: &str, messages: &[DeadLetter], front: &mut dyn Front) -> Result<Edits, Stop> {
    let mut text = edit::document(queue, messages);
    let mut problem: Option<String> = None;
    loop {
        text = match front.edit(&text, problem.as_deref()) {
            Ok(Some(saved)) => saved,
            Ok(None) => return Err(Stop::Declined),
            Err(why) => {
                return Err(Stop::Refused(Refusal::CannotAsk {
                    why,
                    undone: Some("nothing moved"),
                }));
            }
        };
        match edit::read(&text, messages) {
            Ok(Some(edits)) => return Ok(edits),
            Ok(None) => {
                front.say("the document was left unchanged or emptied: nothing moved");
                return Err(Stop::Declined);
            }
            Err(p) => problem = Some(p.to_string()),
        }
    }
}

/// After the go-ahead: copies of the originals kept in the archive before the first edited
/// copy is published. `Err`: not kept, so nothing moves.
pub(super) async fn keep_originals<B: ReplayPort>(
    s: &B,
    asked: &Asked,
    queue: &str,
    run_id: &str,
    front: &mut dyn Front,
) -> Result<(), Stop> {
    let stamp = Stamp {
        from: queue.to_string(),
        by: format!(
            "{}@{}",
            crate::store::current_os_user(),
            s.operator().broker_user
        ),
        reason: format!("the original of a message edited and replayed in run {run_id}"),
    };
    s.keep_copies(&asked.place, &stamp, &asked.originals)
        .await
        .map_err(|why| Stop::Refused(Refusal::OriginalsNotKept { why }))?;
    front.say(&format!(
        "{} original(s) archived in {} before the edited copies are replayed",
        asked.originals.len(),
        asked.place.label()
    ));
    Ok(())
}
