//! Saving for the incident ticket, with one key: `Ctrl-S` writes the screen as plain text (k9s'
//! screen dump), `S` writes the picked messages as a snapshot file that `warren open` reads.
//!
//! `update` decides what to save and where (pure: [`screen`], [`snapshot`]) and leaves the
//! request in `Handover::save`, as a custom command's handover is left; the terminal loop, which
//! has the frame, performs it ([`perform`]: the only IO here) and reports back. The worker has
//! no part in it. Files go to the current directory, where an operator who ran
//! `warren` from a shell looks first, under a timestamped name that never overwrites a file.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use ratatui::buffer::Buffer;
use unicode_width::UnicodeWidthStr;

use super::event::{Failure, Report};
use super::state::{Focus, ListMode, State};
use crate::domain::message::DeadLetter;
use crate::domain::sanitize;
use crate::domain::snapshot::{self, SnapshotHeader};

/// A save `update` decided on, for the terminal loop to perform.
#[derive(Clone, Debug, PartialEq)]
pub enum Save {
    /// What is on screen, as plain text. Allowed read-only.
    Screen { path: PathBuf },
    /// `messages` as a snapshot file (`warren open` reads it). Allowed read-only.
    Snapshot {
        path: PathBuf,
        header: SnapshotHeader,
        messages: Vec<DeadLetter>,
    },
}

/// `Ctrl-S`: the screen, as it is when the key is pressed.
pub fn screen(state: &mut State) {
    state.handover.save = Some(Save::Screen {
        path: PathBuf::from(format!("warren-screen-{}.txt", stamp(state.now))),
    });
}

/// `S`: the group under the cursor in the group list, else the selected messages, else the one
/// under the cursor (what `r` would replay), as a snapshot file.
pub fn snapshot(state: &mut State) {
    let Some(b) = &state.msgs.browse else {
        state.banner.notice =
            Some("open a dead-letter queue first (Enter on the queue list)".into());
        return;
    };
    let rows: Vec<usize> =
        if state.msgs.list_mode == ListMode::Groups && state.focus != Focus::Queues {
            state
                .msgs
                .current_group()
                .map(|g| g.rows.clone())
                .unwrap_or_default()
        } else if !state.msgs.selected.is_empty() {
            (0..b.rows.len())
                .filter(|&i| state.msgs.selected.contains(b.rows[i].key.as_str()))
                .collect()
        } else {
            state
                .msgs
                .current_row()
                .and_then(|r| b.rows.iter().position(|x| x.key == r.key))
                .into_iter()
                .collect()
        };
    // Read back from the page's spill file: a message that cannot be read back is not written
    // as a stand-in, so a snapshot only ever holds what the broker held.
    let read: Result<Vec<DeadLetter>, std::io::Error> = rows
        .iter()
        .filter_map(|&i| b.rows.get(i))
        .map(|r| r.letter.packed().map(|p| p.unpack()))
        .collect();
    let messages = match read {
        Ok(m) => m,
        Err(e) => {
            state.banner.error = Some(format!(
                "nothing saved: a message could not be read back from the page's spill file ({e}); read the queue again (Ctrl-R) and save again"
            ));
            return;
        }
    };
    if messages.is_empty() {
        state.banner.notice = Some("nothing to save: the list is empty".into());
        return;
    }
    let o = &state.overview;
    let mut source = if o.broker_version.is_empty() {
        "Warren".to_string()
    } else {
        format!("RabbitMQ {}", o.broker_version)
    };
    if !o.context.is_empty() {
        source.push_str(&format!(" (context {})", o.context));
    }
    let header = SnapshotHeader {
        queue: b.queue.clone(),
        vhost: b.vhost.clone(),
        exported_at: state.now.to_string(),
        source,
    };
    state.handover.save = Some(Save::Snapshot {
        path: PathBuf::from(format!(
            "warren-{}-{}.jsonl",
            file_word(&b.queue),
            stamp(state.now)
        )),
        header,
        messages,
    });
}

/// `20261201-165003` (UTC).
fn stamp(now: Timestamp) -> String {
    now.strftime("%Y%m%d-%H%M%S").to_string()
}

/// A queue name as part of a file name: letters, digits, `.`, `-` and `_`; the rest `_`.
fn file_word(name: &str) -> String {
    let word: String = name
        .chars()
        .take(60)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let word = word.trim_start_matches('.');
    if word.is_empty() {
        "queue".into()
    } else {
        word.to_string()
    }
}

/// The frame as plain text: one line per row, trailing blanks trimmed, no escape codes. A wide
/// character's second cell is skipped (it holds no symbol of its own).
pub fn screen_text(buf: &Buffer) -> String {
    let area = buf.area;
    let mut out = String::new();
    for y in area.top()..area.bottom() {
        let mut line = String::new();
        let mut skip = 0usize;
        for x in area.left()..area.right() {
            if skip > 0 {
                skip -= 1;
                continue;
            }
            let symbol = buf[(x, y)].symbol();
            line.push_str(symbol);
            skip = symbol.width().saturating_sub(1);
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Performs a save (the loop calls it; `screen` is the frame's text for [`Save::Screen`]) and
/// says how it went, as the report `update` shows.
pub fn perform(save: &Save, screen: &str) -> Report {
    let (path, text, what) = match save {
        Save::Screen { path } => (path, screen.to_string(), "the screen".to_string()),
        Save::Snapshot {
            path,
            header,
            messages,
        } => {
            let n = messages.len();
            let cut = messages.iter().filter(|m| !m.body_complete()).count();
            let mut what = format!(
                "{n} message{} from {}",
                if n == 1 { "" } else { "s" },
                sanitize::one_line(&header.queue, 60)
            );
            if cut > 0 {
                what.push_str(&format!(
                    " ({cut} with the body cut at the browse cap, as read)"
                ));
            }
            (path, snapshot::write(header, messages), what)
        }
    };
    match write_new(path, &text) {
        Ok(written) => {
            // The file's name first: it is what the operator needs, and it fits in 80 columns.
            let full = std::path::absolute(&written).unwrap_or(written);
            let name = full.file_name().map(|n| n.to_string_lossy().into_owned());
            let dir = full.parent().map(|d| d.display().to_string());
            let hint = if matches!(save, Save::Snapshot { .. }) {
                " — open it with: warren open FILE"
            } else {
                ""
            };
            Report::Notice(match (name, dir) {
                (Some(name), Some(dir)) => format!("saved {name} ({what}) in {dir}{hint}"),
                _ => format!("saved {what} to {}{hint}", full.display()),
            })
        }
        Err(e) => Report::Error(Failure::from(format!(
            "could not save {what} to {}: {e} — start Warren from a directory you can write to",
            path.display()
        ))),
    }
}

/// Writes `text` to `path`, or to `path` with `-2`, `-3`, … before the extension when a file of
/// that name exists (two saves in one second never overwrite each other, nor anything else).
fn write_new(path: &Path, text: &str) -> std::io::Result<PathBuf> {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = path
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    let mut candidate = path.to_path_buf();
    for n in 2..=100 {
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&candidate)
        {
            Ok(mut f) => {
                f.write_all(text.as_bytes())?;
                return Ok(candidate);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                candidate = path.with_file_name(format!("{stem}-{n}{ext}"));
            }
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        "a hundred files of that name exist already",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::layout::Rect;
    use ratatui::style::{Color, Style};

    #[test]
    fn the_screen_is_plain_text_without_escape_codes() {
        let mut buf = Buffer::empty(Rect::new(0, 0, 10, 2));
        buf.set_string(0, 0, "ok 日本", Style::default().fg(Color::Red));
        buf.set_string(0, 1, "x", Style::default());
        let text = screen_text(&buf);
        assert_eq!(text, "ok 日本\nx\n");
        assert!(!text.contains('\x1b'));
    }

    #[test]
    fn file_names_are_safe_words() {
        assert_eq!(file_word("shipping-label_error"), "shipping-label_error");
        assert_eq!(file_word("../etc/passwd"), "_etc_passwd");
        assert_eq!(file_word("a b/c\u{1b}"), "a_b_c_");
        assert_eq!(file_word(""), "queue");
    }

    #[test]
    fn a_second_save_in_the_same_second_does_not_overwrite() {
        let dir = std::env::temp_dir().join(format!("warren-save-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("warren-screen-20261201-165003.txt");
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_file(dir.join("warren-screen-20261201-165003-2.txt"));
        let first = write_new(&path, "one").unwrap();
        let second = write_new(&path, "two").unwrap();
        assert_eq!(first, path);
        assert_eq!(second, dir.join("warren-screen-20261201-165003-2.txt"));
        assert_eq!(std::fs::read_to_string(&first).unwrap(), "one");
        assert_eq!(std::fs::read_to_string(&second).unwrap(), "two");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
