//! Edit, then replay, in the TUI: the message under the cursor as `domain::edit`'s document in
//! an editor inside Warren, checked as it is typed (or handed to `$EDITOR`); saved with changes,
//! it opens the replay modal on the edited copy with a diff of what changed. The replay's home
//! (`ops::edit`) reads the message again, archives its original and replays the edited copy.

use ratatui_textarea::TextArea;

use crate::domain::edit;
use crate::domain::message::DeadLetter;

/// Warren's editor on one message.
#[derive(Clone, Debug)]
pub struct EditModal {
    pub vhost: String,
    pub queue: String,
    /// The message's key: the replay selects exactly it.
    pub key: String,
    pub original: DeadLetter,
    /// The document as it was opened.
    pub document: String,
    pub area: TextArea<'static>,
    pub check: Check,
}

/// What the document reads as now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Check {
    /// As it was: saving replays nothing.
    Unchanged,
    /// It does not read: the line and why.
    Problem(String),
    /// It reads, with these changes.
    Changes(Vec<String>),
}

/// The edited copy a replay modal replays: the document as saved, what changed, and the lines
/// that differ from the original document (`-` removed, `+` added).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EditedCopy {
    pub text: String,
    pub changes: Vec<String>,
    pub diff: Vec<(char, String)>,
}

impl EditModal {
    pub fn new(vhost: String, queue: String, key: String, original: DeadLetter) -> EditModal {
        let document = edit::document(&queue, std::slice::from_ref(&original));
        let mut modal = EditModal {
            vhost,
            queue,
            key,
            original,
            area: TextArea::from(document.lines().map(str::to_string)),
            document,
            check: Check::Unchanged,
        };
        modal.recheck();
        modal
    }

    pub fn text(&self) -> String {
        let mut t = self.area.lines().join("\n");
        t.push('\n');
        t
    }

    /// Replaces the text (back from `$EDITOR`).
    pub fn set_text(&mut self, text: &str) {
        self.area = TextArea::from(text.lines().map(str::to_string));
        self.recheck();
    }

    /// Reads the document as the replay's home will.
    pub fn recheck(&mut self) {
        self.check = match edit::read(&self.text(), std::slice::from_ref(&self.original)) {
            Ok(None) => Check::Unchanged,
            Ok(Some(e)) => Check::Changes(
                e.messages
                    .iter()
                    .flat_map(|m| m.changes.iter().cloned())
                    .collect(),
            ),
            Err(p) => Check::Problem(p.to_string()),
        };
    }

    /// The copy to replay, when the document reads and changed something.
    pub fn copy(&self) -> Option<EditedCopy> {
        let Check::Changes(changes) = &self.check else {
            return None;
        };
        let text = self.text();
        Some(EditedCopy {
            diff: diff(&self.document, &text),
            changes: changes.clone(),
            text,
        })
    }
}

/// The lines that differ between two documents, as a line diff does.
pub fn diff(before: &str, after: &str) -> Vec<(char, String)> {
    use similar::{ChangeTag, TextDiff};
    TextDiff::from_lines(before, after)
        .iter_all_changes()
        .filter_map(|c| {
            let tag = match c.tag() {
                ChangeTag::Delete => '-',
                ChangeTag::Insert => '+',
                ChangeTag::Equal => return None,
            };
            Some((tag, c.value().trim_end_matches('\n').to_string()))
        })
        .collect()
}
