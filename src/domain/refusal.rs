//! Why an operation refused before anything moved, typed: the operations' one home
//! (`crate::ops`) says which refusal it is, the front ends decide by the variant (the exit
//! code, the modal) and show its one wording ([`fmt::Display`]). Pure, like `rights`, whose
//! read-only reasons and acts it carries rather than repeats.

use std::fmt;

use super::rights::{Act, ReadOnly, refusal};
use super::sanitize::one_line;

/// A refusal before anything moved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Read-only forbids `act`; `why` says whose word it is (the flag, the context, the
    /// broker's own permissions).
    ReadOnly { act: Act, why: ReadOnly },
    /// A run would consume `queue`, an auto-delete queue that dies with its last consumer;
    /// `verb` is the run's ("replay", "archive", "discard").
    AutoDelete { queue: String, verb: &'static str },
    /// Warren's store cannot open, or cannot keep the run's start: `why`, then what did not
    /// happen (`undone`: "nothing moved", "nothing restored", …).
    Store { why: String, undone: &'static str },
    /// No message matches the selection at the head of the queue (`undone`: "nothing moved",
    /// "nothing deleted", "nothing to edit").
    NothingSelected { undone: &'static str },
    /// More messages selected than one edit takes.
    TooManyToEdit { selected: usize, max: usize },
    /// Reading `queue` again would spend quorum deliveries, and the operator said no.
    NotReadAgain { queue: String },
    /// The plan refused: each reason (a target refused, an archived message not vouched
    /// for, …), after what did not happen.
    Plan {
        undone: &'static str,
        refusals: Vec<String>,
    },
    /// The broker would refuse the run's publishes (no write permission on a target): its
    /// words, then what did not happen.
    Target { why: String, undone: &'static str },
    /// The archive cannot be used as asked (not a stream, missing, not the archive), in words.
    Archive(String),
    /// The operator did not let Warren create the archive stream.
    ArchiveNotCreated,
    /// The originals of an edit could not be archived, so no edited copy is published.
    OriginalsNotKept { why: String },
    /// A front end could not ask what the operation needs asked (no terminal, no editor):
    /// its words, then what did not happen, when it says.
    CannotAsk {
        why: String,
        undone: Option<&'static str>,
    },
    /// A new redirect refused (a missing queue, a wait queue, a chain): why.
    Redirect(String),
    /// `from` has no redirect to remove.
    NotRedirected { from: String },
    /// Warren's store did not keep a group's note (nothing was published either).
    NoteNotKept { why: String },
    /// A refusal another layer already worded (the broker's session, the archive's keeper).
    Said(String),
}

impl Refusal {
    /// Whether read-only is the reason, by whichever word.
    pub fn is_read_only(&self) -> bool {
        matches!(self, Refusal::ReadOnly { .. })
    }
}

impl From<String> for Refusal {
    fn from(text: String) -> Refusal {
        Refusal::Said(text)
    }
}

impl From<&str> for Refusal {
    fn from(text: &str) -> Refusal {
        Refusal::Said(text.to_string())
    }
}

/// Why a run that consumes (replay, archive, discard) refuses an auto-delete queue: its
/// consumer would be the queue's last, and its cancel would delete the queue with whatever the
/// run handed back, did not select or was still arriving. The words the plan and the run share.
pub fn auto_delete(queue: &str, verb: &str) -> String {
    let queue = one_line(queue, 100);
    format!(
        "refused to {verb} '{queue}': it is an auto-delete queue, which RabbitMQ deletes with every \
         message in it when its last consumer cancels, and this run consumes: when it ended, the \
         queue and what it handed back or did not take would be gone. Nothing moved. \
         `warren show`, `groups` and `export` read it without consuming. To {verb} its messages, \
         first move them to a queue that is not auto-delete (for example a shovel with \
         src-delete-after = queue-length), and declare the dead-letter queue without auto-delete \
         for the dead letters to come"
    )
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::ReadOnly { act, why } => f.write_str(&refusal(*act, why)),
            Refusal::AutoDelete { queue, verb } => f.write_str(&auto_delete(queue, verb)),
            Refusal::Store { why, undone } | Refusal::Target { why, undone } => {
                write!(f, "{why}; {undone}")
            }
            Refusal::NothingSelected { undone } => write!(
                f,
                "{undone}: no message matches the selection at the head of the queue"
            ),
            Refusal::TooManyToEdit { selected, max } => write!(
                f,
                "{selected} messages selected: one edit takes at most {max}; narrow the selection (--limit, --filter, --group); nothing moved"
            ),
            Refusal::NotReadAgain { queue } => {
                write!(f, "nothing was read from '{}'", one_line(queue, 80))
            }
            Refusal::Plan { undone, refusals } => write!(f, "{undone}: {}", refusals.join("; ")),
            Refusal::ArchiveNotCreated => f.write_str(
                "nothing moved: the archive stream was not created (--local keeps the archive in a file instead)",
            ),
            Refusal::OriginalsNotKept { why } => write!(
                f,
                "the originals could not be archived ({}); nothing moved",
                one_line(why, 400)
            ),
            Refusal::CannotAsk { why, undone: None } => f.write_str(why),
            Refusal::CannotAsk {
                why,
                undone: Some(undone),
            } => write!(f, "{why}; {undone}"),
            Refusal::Redirect(why) => write!(f, "{why}; no redirect changed"),
            Refusal::NotRedirected { from } => write!(
                f,
                "'{}' is not redirected; no redirect changed",
                one_line(from, 100)
            ),
            Refusal::NoteNotKept { why } => write!(f, "the note was not kept: {why}"),
            Refusal::Archive(text) | Refusal::Said(text) => f.write_str(text),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each refusal in the words the operator read before it was typed.
    #[test]
    fn each_refusal_says_what_the_words_said_before() {
        let cases: Vec<(Refusal, &str)> = vec![
            (
                Refusal::ReadOnly {
                    act: Act::Discard,
                    why: ReadOnly::Flag,
                },
                "read-only: Warren was started with --read-only; discard is disabled (nothing deleted). Reading stays open: `warren show`, `warren archive list`",
            ),
            (
                Refusal::Store {
                    why: "the store is locked".into(),
                    undone: "nothing restored",
                },
                "the store is locked; nothing restored",
            ),
            (
                Refusal::NothingSelected {
                    undone: "nothing deleted",
                },
                "nothing deleted: no message matches the selection at the head of the queue",
            ),
            (
                Refusal::TooManyToEdit {
                    selected: 101,
                    max: 100,
                },
                "101 messages selected: one edit takes at most 100; narrow the selection (--limit, --filter, --group); nothing moved",
            ),
            (
                Refusal::NotReadAgain {
                    queue: "orders\n.dlq".into(),
                },
                "nothing was read from 'orders\\n.dlq'",
            ),
            (
                Refusal::Plan {
                    undone: "nothing moved",
                    refusals: vec!["a".into(), "b".into()],
                },
                "nothing moved: a; b",
            ),
            (
                Refusal::Target {
                    why: "no write permission on exchange 'x'".into(),
                    undone: "nothing moved",
                },
                "no write permission on exchange 'x'; nothing moved",
            ),
            (
                Refusal::ArchiveNotCreated,
                "nothing moved: the archive stream was not created (--local keeps the archive in a file instead)",
            ),
            (
                Refusal::OriginalsNotKept {
                    why: "stream full".into(),
                },
                "the originals could not be archived (stream full); nothing moved",
            ),
            (
                Refusal::CannotAsk {
                    why: "no editor".into(),
                    undone: Some("nothing moved"),
                },
                "no editor; nothing moved",
            ),
            (
                Refusal::CannotAsk {
                    why: "no terminal".into(),
                    undone: None,
                },
                "no terminal",
            ),
            (
                Refusal::Redirect("'b' does not exist".into()),
                "'b' does not exist; no redirect changed",
            ),
            (
                Refusal::NotRedirected { from: "a".into() },
                "'a' is not redirected; no redirect changed",
            ),
            (
                Refusal::NoteNotKept {
                    why: "the store is locked".into(),
                },
                "the note was not kept: the store is locked",
            ),
            (Refusal::Archive("not a stream".into()), "not a stream"),
            (Refusal::from("worded elsewhere"), "worded elsewhere"),
        ];
        for (r, text) in cases {
            assert_eq!(r.to_string(), text, "{r:?}");
        }
        let r = Refusal::AutoDelete {
            queue: "tmp.dlq".into(),
            verb: "archive",
        };
        assert_eq!(r.to_string(), auto_delete("tmp.dlq", "archive"));
        assert!(
            r.to_string()
                .starts_with("refused to archive 'tmp.dlq': it is an auto-delete queue")
        );
        assert!(r.to_string().contains("Nothing moved."));
    }

    #[test]
    fn read_only_is_told_by_the_variant_whoever_said_it() {
        for why in [
            ReadOnly::Flag,
            ReadOnly::Context("prod".into()),
            ReadOnly::Broker("no write permission".into()),
        ] {
            let r = Refusal::ReadOnly {
                act: Act::Replay,
                why,
            };
            assert!(r.is_read_only());
        }
        // Words that mention read-only are not a read-only refusal.
        assert!(!Refusal::Said("read-only: something".into()).is_read_only());
    }
}
