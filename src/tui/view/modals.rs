//! The modals and overlays of a replay, archive or restore: the form, its dry run and the
//! progress of a run.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Clear, Gauge, Paragraph, Wrap};

use super::{BANNER_CHARS, centered, queue_title};
use crate::domain::sanitize;
use crate::tui::event::{JobKind, ReplayPreview};
use crate::tui::format;
use crate::tui::keys::{self, Scope};
use crate::tui::state::{
    ArchiveKind, ArchiveModal, ModalField, Question, ReplayModal, ReplayRun, RestoreModal, State,
};
use crate::tui::theme::Theme;
use crate::worker::protocol::ArchivePlace;

/// A dry run moves nothing, so it has no progress to show: its answer is what the replay would
/// do, in the words `warren replay --dry-run` uses, wrapped rather than cut.
fn dry_run(state: &State, run: &ReplayRun, frame: &mut Frame, area: Rect) {
    let t = &state.settings.theme;
    let width = area.width.saturating_sub(4).min(100);
    let inner_w = usize::from(width.saturating_sub(2)).max(1);
    let queue = queue_title(state, &run.vhost, &run.queue, 40);
    let (title, lines): (String, Vec<Line>) = match &run.outcome {
        None => (
            format!(" Dry run from {queue} "),
            vec![Line::styled(" working out what would move…", t.muted)],
        ),
        Some(o) => match &o.error {
            Some(e) => (
                format!(" Dry run from {queue} — failed "),
                vec![Line::styled(
                    format!(" {}", sanitize::one_line(e, 600)),
                    t.danger,
                )],
            ),
            None if o.cancelled => (
                format!(" Dry run from {queue} — stopped "),
                vec![Line::styled(" stopped: nothing was published", t.warn)],
            ),
            None => (
                format!(" Dry run from {queue} — nothing was published "),
                o.summary
                    .iter()
                    .map(|l| {
                        let style = if l.trim_start().starts_with(['!', '✗']) {
                            t.warn
                        } else {
                            t.base
                        };
                        // The CLI's indentation is ours; the rest is sanitised again.
                        let text = l.trim_start_matches(' ');
                        let indent = " ".repeat((l.len() - text.len()).min(8));
                        Line::styled(format!("{indent}{}", sanitize::one_line(text, 600)), style)
                    })
                    .collect(),
            ),
        },
    };
    let keys_text = if run.outcome.is_some() {
        " Enter/Esc  close"
    } else {
        " Esc  stop"
    };
    // Rows the wrapped lines take, plus a blank, the keys and the border.
    let rows: usize = lines
        .iter()
        .map(|l| l.width().div_ceil(inner_w).max(1))
        .sum();
    let height = u16::try_from(rows + 4).unwrap_or(u16::MAX);
    let rect = centered(area, width, height);
    frame.render_widget(Clear, rect);
    let block = modal_block(title, t.accent);
    let mut lines = lines;
    lines.push(Line::raw(""));
    lines.push(Line::styled(keys_text, t.accent));
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(block),
        rect,
    );
}

pub(super) fn replay_modal(state: &State, modal: &ReplayModal, frame: &mut Frame, area: Rect) {
    let t = &state.settings.theme;
    let width = area.width.saturating_sub(4).min(90);
    let mut lines: Vec<Line> = Vec::new();
    let title = match &modal.preview {
        Some(p) => format!(
            " Replay {} message{} from {} ",
            p.count,
            if p.count == 1 { "" } else { "s" },
            queue_title(state, &modal.vhost, &modal.queue, 40)
        ),
        None => format!(
            " Replay {} from {} ",
            sanitize::one_line(&modal.what, 40),
            queue_title(state, &modal.vhost, &modal.queue, 40)
        ),
    };
    lines.push(Line::from(vec![
        field(t, "What"),
        Span::raw(sanitize::one_line(&modal.what, MODAL_LIST_CHARS)),
    ]));
    if let Some(e) = &modal.edited {
        lines.extend(edited_lines(t, e));
    }
    match &modal.preview {
        None => lines.push(Line::styled(
            " working out where each message goes…",
            t.muted,
        )),
        Some(p) => lines.extend(replay_destination(t, p)),
    }
    lines.extend(replay_settings(t, modal, state.settings.canary_above));
    if let Some(p) = &modal.preview {
        if p.replayed_before > 0 {
            lines.push(Line::styled(
                format!(
                    " ! {} of them were replayed before and failed again",
                    p.replayed_before
                ),
                t.warn,
            ));
        }
        for w in &p.warnings {
            lines.push(Line::from(vec![
                Span::styled(" ! ", t.warn),
                Span::styled(sanitize::one_line(w, MODAL_LIST_CHARS), t.warn),
            ]));
        }
        if modal.needs_typed_count() {
            let style = if modal.field == ModalField::Count {
                t.selected
            } else {
                t.base
            };
            lines.push(Line::from(vec![
                Span::styled(format!(" Type {} to confirm: ", p.count), t.danger),
                Span::styled(format!("[{:<8}]", modal.typed), style),
            ]));
        }
    }
    // The same words as the footer's (`ReplayModal::enter_does`).
    let enter = format!("Enter  {}", modal.enter_does());
    let accept = match modal.blocked() {
        _ if modal.field != ModalField::Count => Span::styled(enter, t.accent),
        None if modal.dry_run => Span::styled(enter, t.accent),
        None => Span::styled(enter, t.danger),
        Some(why) => Span::styled(format!("{enter} ({why})"), t.muted),
    };
    draw_modal(state, title, lines, accept, width, frame, area);
}

/// Most diff lines the modal shows of an edit.
const DIFF_LINES: usize = 12;

/// An edited copy in the replay modal: what changed, and the lines of the document that did.
fn edited_lines(t: &Theme, e: &crate::tui::edit::EditedCopy) -> Vec<Line<'static>> {
    let mut out = vec![Line::from(vec![
        field(t, "Edited"),
        Span::raw(sanitize::one_line(&e.changes.join("; "), MODAL_LIST_CHARS)),
    ])];
    for (tag, text) in e.diff.iter().take(DIFF_LINES) {
        let style = if *tag == '-' { t.danger } else { t.accent };
        out.push(Line::styled(
            format!("   {tag} {}", sanitize::one_line(text, 120)),
            style,
        ));
    }
    if e.diff.len() > DIFF_LINES {
        out.push(Line::styled(
            format!("   … {} more changed lines", e.diff.len() - DIFF_LINES),
            t.muted,
        ));
    }
    out.push(Line::styled(
        "   the original is archived before the edited copy is published",
        t.muted,
    ));
    out
}

/// The replay modal's settings: the body (untouched), attempts kept or reset, the rate and
/// whether it is a dry run, each with the key that changes it.
fn replay_settings(t: &Theme, modal: &ReplayModal, canary_above: u64) -> Vec<Line<'static>> {
    let mut out = vec![
        body_setting(t, modal),
        rate_setting(t, modal),
        canary_setting(t, modal, canary_above),
    ];
    out.extend(stamp_setting(t, modal));
    out.extend(record_setting(t, modal));
    out.push(backlog_setting(t, modal));
    out
}

/// The replay modal's key for `action`, as its settings show it.
fn modal_key(t: &Theme, action: keys::Action) -> Span<'static> {
    Span::styled(
        format!("  [{}]", keys::label(Scope::Modal, action).unwrap_or("?")),
        t.accent,
    )
}

/// The body (edited or untouched) and the attempts (kept or reset).
fn body_setting(t: &Theme, modal: &ReplayModal) -> Line<'static> {
    let body = if modal.edited.is_some() {
        "edited"
    } else {
        "untouched"
    };
    Line::from(vec![
        field(t, "Body"),
        Span::raw(format!("{body:<14}")),
        Span::styled("Attempts ", t.muted),
        Span::raw(if modal.keep_attempts {
            "kept "
        } else {
            "reset"
        }),
        modal_key(t, keys::Action::ToggleKeep),
    ])
}

/// The rate (as typed, while its field has the focus) and the dry run.
fn rate_setting(t: &Theme, modal: &ReplayModal) -> Line<'static> {
    let rate_style = if modal.field == ModalField::Rate {
        t.selected
    } else {
        t.base
    };
    Line::from(vec![
        field(t, "Rate"),
        Span::styled(
            format!(
                "[{:>5}]",
                if modal.field == ModalField::Rate {
                    modal.rate_text.clone()
                } else {
                    modal.rate.to_string()
                }
            ),
            rate_style,
        ),
        Span::raw(" msg/s   "),
        Span::styled("Dry run  ", t.muted),
        Span::styled(
            if modal.dry_run { "ON " } else { "off" },
            if modal.dry_run { t.accent } else { t.base },
        ),
        modal_key(t, keys::Action::ToggleDryRun),
        Span::styled("  +/- Tab", t.muted),
    ])
}

/// The canary: decided by the replay's own rule (`domain::canary::applies`), said before the run.
fn canary_setting(t: &Theme, modal: &ReplayModal, canary_above: u64) -> Line<'static> {
    let canary = if modal.dry_run && modal.canary.is_some() {
        Span::styled("none in a dry run", t.muted)
    } else {
        Span::raw(crate::domain::canary::modal_words(
            modal.canary,
            modal.count(),
            canary_above,
        ))
    };
    Line::from(vec![
        field(t, "Canary"),
        canary,
        modal_key(t, keys::Action::CycleCanary),
    ])
}

/// Symfony's failure stamp, only for a plan that has it as a header.
fn stamp_setting(t: &Theme, modal: &ReplayModal) -> Option<Line<'static>> {
    let strippable = modal
        .preview
        .as_ref()
        .is_some_and(|p| p.failure_stamp_strippable);
    if !modal.strip_failure_stamp && !strippable {
        return None;
    }
    Some(Line::from(vec![
        field(t, "Symfony"),
        if modal.strip_failure_stamp {
            Span::raw("stamp stripped: a second failure comes back")
        } else {
            Span::styled("stamp kept: Symfony drops a second failure", t.warn)
        },
        modal_key(t, keys::Action::ToggleFailureStamp),
    ]))
}

/// Where the run is recorded, only when the shared audit stream is in question.
fn record_setting(t: &Theme, modal: &ReplayModal) -> Option<Line<'static>> {
    let asked = modal
        .preview
        .as_ref()
        .is_some_and(|p| p.create_audit.is_some());
    if !asked {
        return None;
    }
    let (text, style) = match modal.create_audit {
        None => (
            "the shared audit stream is missing: s creates it for the whole rota; Enter keeps this run on this machine's record",
            t.warn,
        ),
        Some(true) => ("shared: Warren creates the audit stream first", t.ok),
        Some(false) => ("this machine's only (asked once for this context)", t.muted),
    };
    Some(Line::from(vec![
        field(t, "Record"),
        Span::styled(text, style),
    ]))
}

/// The cap on the target's ready messages (as typed, while its field has the focus).
fn backlog_setting(t: &Theme, modal: &ReplayModal) -> Line<'static> {
    let typing = modal.field == ModalField::Backlog;
    Line::from(vec![
        field(t, "Backlog"),
        Span::styled(
            format!(
                "[{:>5}]",
                match (typing, modal.max_backlog) {
                    (true, _) => modal.backlog_text.clone(),
                    (false, 0) => "off".to_string(),
                    (false, n) => n.to_string(),
                }
            ),
            if typing { t.selected } else { t.base },
        ),
        Span::raw(if modal.max_backlog == 0 {
            " no cap"
        } else {
            " ready at most in the target"
        }),
        Span::styled("  Tab; 0: off", t.muted),
    ])
}

/// Where a replay goes: its targets, the queues they reach (a fan-out or none in the danger
/// colour), and the headers it removes and adds.
fn replay_destination(t: &Theme, p: &ReplayPreview) -> Vec<Line<'static>> {
    let fan_out = p.reaches.len() > 1;
    let reaches = if p.reaches.is_empty() {
        Span::styled("no queue (unroutable: messages stay in the DLQ)", t.danger)
    } else if fan_out {
        Span::styled(
            format!("{} queues: {}", p.reaches.len(), list(&p.reaches)),
            t.danger,
        )
    } else {
        Span::raw(format!("{} only", list(&p.reaches)))
    };
    vec![
        Line::from(vec![field(t, "To"), Span::raw(list(&p.targets))]),
        Line::from(vec![field(t, "Reaches"), reaches]),
        Line::from(vec![field(t, "Removes"), Span::raw(list(&p.removes))]),
        Line::from(vec![field(t, "Adds"), Span::raw(list(&p.adds))]),
    ]
}

/// The archive or discard modal: what goes, how many, where to (or that a snapshot is written
/// first, and where), the reason, and the typed count a large discard needs.
pub(super) fn archive_modal(state: &State, modal: &ArchiveModal, frame: &mut Frame, area: Rect) {
    let t = &state.settings.theme;
    let width = area.width.saturating_sub(4).min(90);
    let plural = if modal.count == 1 { "" } else { "s" };
    let title = match modal.kind {
        ArchiveKind::Archive => format!(
            " Archive {} message{plural} from {} ",
            modal.count,
            queue_title(state, &modal.vhost, &modal.queue, 40)
        ),
        ArchiveKind::Discard => format!(
            " Discard {} message{plural} from {} for good ",
            modal.count,
            queue_title(state, &modal.vhost, &modal.queue, 40)
        ),
    };
    let mut lines: Vec<Line> = vec![Line::from(vec![
        field(t, "What"),
        Span::raw(sanitize::one_line(&modal.what, MODAL_LIST_CHARS)),
    ])];
    match modal.kind {
        ArchiveKind::Archive => {
            let to = match (&modal.question, modal.place) {
                (Some(q), _) => Line::from(vec![
                    field(t, "To"),
                    Span::styled(
                        format!(
                            "{}. s: create it · l: keep this vhost's archive in a local file (asked once)",
                            sanitize::one_line(q, MODAL_LIST_CHARS)
                        ),
                        t.warn,
                    ),
                ]),
                (None, ArchivePlace::Create) => Line::from(vec![
                    field(t, "To"),
                    Span::raw("the vhost's archive stream, created now (you said s)"),
                ]),
                (None, ArchivePlace::Local) => Line::from(vec![
                    field(t, "To"),
                    Span::raw("the local archive file (you said l)"),
                ]),
                (None, ArchivePlace::AsConfigured) => Line::from(vec![
                    field(t, "To"),
                    Span::raw(
                        "the vhost's archive stream (warren.archive unless the context names another), or the local archive file where there is no stream",
                    ),
                ]),
            };
            lines.push(to);
            lines.push(Line::from(vec![
                field(t, "Adds"),
                Span::raw(crate::domain::archive::HEADERS.join(", ")),
            ]));
            lines.push(Line::from(vec![
                field(t, "Keeps"),
                Span::raw("body, properties and every other header (x-death included)"),
            ]));
            lines.push(Line::from(vec![
                field(t, "Reason"),
                Span::styled(
                    format!("[{}▏]", sanitize::one_line(&modal.reason_text(), 70)),
                    t.selected,
                ),
            ]));
            lines.push(Line::from(vec![
                field(t, "Safe"),
                Span::styled(
                    "each leaves the queue only once the archive holds it; restore puts it back",
                    t.muted,
                ),
            ]));
        }
        ArchiveKind::Discard => {
            lines.push(Line::from(vec![
                field(t, "To"),
                Span::styled("nowhere: deleted for good", t.danger),
            ]));
            lines.push(Line::from(vec![
                field(t, "Snapshot"),
                Span::raw(
                    "written first to discarded/<queue>-<time>.jsonl beside Warren's store (`warren open` reads it); only what it holds is deleted",
                ),
            ]));
            if modal.needs_typed_count() {
                lines.push(Line::from(vec![
                    Span::styled(format!(" Type {} to confirm: ", modal.count), t.danger),
                    Span::styled(format!("[{:<8}]", modal.typed), t.selected),
                ]));
            }
        }
    }
    let enter = format!("Enter  {}", modal.verb());
    let accept = match modal.blocked() {
        None => Span::styled(enter, t.danger),
        Some(why) => Span::styled(format!("{enter} ({why})"), t.muted),
    };
    draw_modal(state, title, lines, accept, width, frame, area);
}

/// A question an operation sent back before changing anything.
pub(super) fn question_modal(state: &State, q: &Question, frame: &mut Frame, area: Rect) {
    let t = &state.settings.theme;
    let width = area.width.saturating_sub(4).min(90);
    let lines = vec![Line::raw(sanitize::one_line(&q.text, 600))];
    let accept = Span::styled("Enter (or y)  create it and go on", t.danger);
    draw_modal(
        state,
        " Create it first? ".into(),
        lines,
        accept,
        width,
        frame,
        area,
    );
}

/// A confirmation modal: `lines` (wrapped with hanging indents, see [`hanging`]) and below
/// them `accept` (what Enter does) beside "Esc cancel", in a double border titled `title`,
/// centred, as tall as they need.
fn draw_modal<'a>(
    state: &'a State,
    title: String,
    mut lines: Vec<Line<'a>>,
    accept: Span<'a>,
    width: u16,
    frame: &mut Frame,
    area: Rect,
) {
    let t = &state.settings.theme;
    lines.push(Line::raw(""));
    let esc = Span::styled("Esc  cancel", t.accent);
    // Enter (with why it waits) and Esc on one line where they fit; on a narrow screen each
    // on its own, so that neither key is split from its word.
    let one_line = 3 + accept.width() + 6 + esc.width();
    let keys = if one_line <= usize::from(width.saturating_sub(2)) {
        vec![Line::from(vec![
            Span::raw("   "),
            accept,
            Span::raw("      "),
            esc,
        ])]
    } else {
        vec![
            Line::from(vec![Span::raw("   "), accept]),
            Line::from(vec![Span::raw("   "), esc]),
        ]
    };
    let keys_rows = keys.len();
    lines.extend(keys);
    let mut rows = hanging(lines, width.saturating_sub(2));
    let height = rows
        .iter()
        .fold(0u16, |h, r| h.saturating_add(r.height))
        .saturating_add(2);
    let rect = centered(area, width, height);
    frame.render_widget(Clear, rect);
    let block = modal_block(title, t.danger);
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    // The keys, and why Enter does nothing yet (a refusal), are never cut: on a short screen
    // they keep the modal's last rows and the fields give way above them, with a mark.
    let keys = rows.split_off(rows.len().saturating_sub(keys_rows));
    let keys_h = keys
        .iter()
        .fold(0u16, |h, r| h.saturating_add(r.height))
        .min(inner.height);
    let body = Rect {
        height: inner.height - keys_h,
        ..inner
    };
    let body_h = rows.iter().fold(0u16, |h, r| h.saturating_add(r.height));
    let cut = body_h > body.height;
    draw_hanging(frame, body, rows);
    if cut && body.height > 0 {
        let last = Rect {
            y: body.y + body.height - 1,
            height: 1,
            ..body
        };
        frame.render_widget(Clear, last);
        frame.render_widget(
            Paragraph::new(Span::styled(
                " … more lines hidden: a taller terminal shows them",
                t.muted,
            )),
            last,
        );
    }
    draw_hanging(
        frame,
        Rect {
            y: inner.y + inner.height - keys_h,
            height: keys_h,
            ..inner
        },
        keys,
    );
}

/// The restore modal (`r` in the archive): how many, where they go, what was restored before
/// and is left out, the two toggles, and the typed count a large restore needs.
pub(super) fn restore_modal(state: &State, modal: &RestoreModal, frame: &mut Frame, area: Rect) {
    let t = &state.settings.theme;
    let width = area.width.saturating_sub(4).min(90);
    let key = |a: keys::Action| {
        Span::styled(
            format!("  [{}]", keys::label(Scope::Restore, a).unwrap_or("?")),
            t.accent,
        )
    };
    let title = match modal.count() {
        Some(n) => format!(
            " Restore {n} message{} from {} ",
            if n == 1 { "" } else { "s" },
            sanitize::middle_cut(&modal.queue, 40)
        ),
        None => format!(
            " Restore {} from {} ",
            sanitize::one_line(&modal.what, 40),
            sanitize::middle_cut(&modal.queue, 40)
        ),
    };
    let mut lines: Vec<Line> = vec![Line::from(vec![
        field(t, "What"),
        Span::raw(sanitize::one_line(&modal.what, MODAL_LIST_CHARS)),
    ])];
    lines.push(Line::from(vec![
        field(t, "Way"),
        Span::raw(if modal.how.replay {
            "replayed to where each failed (the replay's plan, retry budget reset)"
        } else {
            "back into the dead-letter queue each came from, as it was"
        }),
        key(keys::Action::ToggleOrigin),
    ]));
    match &modal.preview {
        None => lines.push(Line::styled(
            " reading the archive and working out where each message goes…",
            t.muted,
        )),
        Some(p) => {
            let to = if p.targets.is_empty() {
                Span::styled("nowhere", t.danger)
            } else {
                Span::raw(list(&p.targets))
            };
            lines.push(Line::from(vec![field(t, "To"), to]));
            lines.push(Line::from(vec![
                field(t, "Removes"),
                Span::raw(list(&p.removes)),
            ]));
            if !p.adds.is_empty() {
                lines.push(Line::from(vec![field(t, "Adds"), Span::raw(list(&p.adds))]));
            }
        }
    }
    let before = match &modal.preview {
        Some(p) if modal.how.again => {
            format!("{} restored before, restored again", p.restored_before)
        }
        Some(p) => format!("{} restored before, left out", p.restored_before),
        None if modal.how.again => "restored again".to_string(),
        None => "left out".to_string(),
    };
    lines.push(Line::from(vec![
        field(t, "Before"),
        Span::raw(before),
        key(keys::Action::ToggleAgain),
    ]));
    lines.push(Line::from(vec![
        field(t, "Safe"),
        Span::styled(
            "each is published with a confirm; the archive keeps its copy and Warren remembers it was restored",
            t.muted,
        ),
    ]));
    if let Some(p) = &modal.preview {
        for w in p.refusals.iter().chain(&p.warnings) {
            lines.push(Line::from(vec![
                Span::styled(" ! ", t.warn),
                Span::styled(sanitize::one_line(w, MODAL_LIST_CHARS), t.warn),
            ]));
        }
        if modal.needs_typed_count() {
            lines.push(Line::from(vec![
                Span::styled(format!(" Type {} to confirm: ", p.count), t.danger),
                Span::styled(format!("[{:<8}]", modal.typed), t.selected),
            ]));
        }
    }
    let accept = match modal.blocked() {
        None => Span::styled("Enter  restore", t.danger),
        Some(why) => Span::styled(
            format!("Enter  restore ({})", sanitize::one_line(&why, 200)),
            t.muted,
        ),
    };
    draw_modal(state, title, lines, accept, width, frame, area);
}

/// A line wrapped with a hanging indent: what follows its first span (a field's label, a
/// warning's `!`) wraps under itself, not under the label.
struct Hanging<'a> {
    label: Option<Line<'a>>,
    indent: u16,
    text: Paragraph<'a>,
    height: u16,
}

fn hanging(lines: Vec<Line<'_>>, width: u16) -> Vec<Hanging<'_>> {
    lines
        .into_iter()
        .map(|mut line| {
            let indent = match line.spans.first() {
                Some(first) if line.spans.len() > 1 => {
                    u16::try_from(first.width()).unwrap_or(u16::MAX)
                }
                _ => 0,
            };
            let (label, indent) = if indent > 0 && indent < width {
                let first = line.spans.remove(0);
                (Some(Line::from(first)), indent)
            } else {
                (None, 0)
            };
            let text = Paragraph::new(line).wrap(Wrap { trim: false });
            let height = u16::try_from(text.line_count(width - indent).max(1)).unwrap_or(u16::MAX);
            Hanging {
                label,
                indent,
                text,
                height,
            }
        })
        .collect()
}

fn draw_hanging(frame: &mut Frame, area: Rect, rows: Vec<Hanging<'_>>) {
    let mut y = area.y;
    let bottom = area.y.saturating_add(area.height);
    for row in rows {
        if y >= bottom {
            break;
        }
        let height = row.height.min(bottom - y);
        if let Some(label) = row.label {
            frame.render_widget(
                label,
                Rect {
                    x: area.x,
                    y,
                    width: row.indent,
                    height: 1,
                },
            );
        }
        frame.render_widget(
            row.text,
            Rect {
                x: area.x + row.indent,
                y,
                width: area.width.saturating_sub(row.indent),
                height,
            },
        );
        y += height;
    }
}

/// The most of a list or a warning the replay modal shows (characters; about four lines at 80
/// columns).
const MODAL_LIST_CHARS: usize = 300;

pub(super) fn progress(state: &State, run: &ReplayRun, frame: &mut Frame, area: Rect) {
    if run.dry_run {
        return dry_run(state, run, frame, area);
    }
    let t = &state.settings.theme;
    let p = &run.progress;
    let width = area.width.saturating_sub(4).min(90);
    // A failure's cause, or the canary's note, wraps (up to six lines) under itself rather than
    // being cut at the border: drawn one column in, without its leading space.
    let note = progress_note(state, run);
    let note = Span::styled(note.content.trim_start().to_string(), note.style);
    let note = Paragraph::new(note).wrap(Wrap { trim: false });
    let note_height = u16::try_from(note.line_count(width.saturating_sub(3)))
        .unwrap_or(u16::MAX)
        .clamp(1, 6);
    let rect = centered(area, width, 8 + note_height);
    frame.render_widget(Clear, rect);
    let title = progress_title(state, run);
    let block = modal_block(title, t.danger);
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    let [gauge_area, counts, rate, msg, _, keys_area] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(note_height),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(inner);
    let ratio = if p.total == 0 {
        0.0
    } else {
        (p.done() as f64 / p.total as f64).clamp(0.0, 1.0)
    };
    frame.render_widget(
        Gauge::default()
            .gauge_style(t.accent)
            .ratio(ratio)
            .label(format!("{}/{}", p.done(), p.total)),
        gauge_area,
    );
    let moved_word = if run.dry_run { "would move" } else { "moved" };
    frame.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled(format!(" {moved_word} {}", p.moved), t.ok),
            Span::raw(format!("   returned {}", p.returned)),
            Span::styled(
                format!("   failed {}", p.failed),
                if p.failed > 0 { t.danger } else { t.base },
            ),
            Span::raw(format!("   remaining {}", p.remaining())),
        ])),
        counts,
    );
    frame.render_widget(Paragraph::new(Span::styled(rate_line(run), t.muted)), rate);
    let msg = Rect {
        x: msg.x.saturating_add(1),
        width: msg.width.saturating_sub(1),
        ..msg
    };
    frame.render_widget(note, msg);
    let keys_text = if run.outcome.is_some() {
        " Enter/Esc  close"
    } else {
        " Esc  stop safely"
    };
    frame.render_widget(Paragraph::new(Span::styled(keys_text, t.accent)), keys_area);
}

/// The rate and what is left: "50 msg/s (limit 50)   ETA 9s". A run without a limit (an
/// archive, a discard) says so, not "limit 0"; while the run waits (on the backlog cap, the
/// canary, a blocked broker) the ETA says it waits rather than climbing.
fn rate_line(run: &ReplayRun) -> String {
    let p = &run.progress;
    let limit = if run.rate == 0 {
        "no rate limit".to_string()
    } else {
        format!("limit {}", run.rate)
    };
    let eta = if run.outcome.is_some() {
        String::new()
    } else if p.backlog.is_some() {
        "   ETA — waiting on the backlog cap".into()
    } else if p.canary.is_some() {
        "   ETA — waiting on the canary".into()
    } else if p.blocked.is_some() {
        "   ETA — waiting on the broker".into()
    } else {
        format!(
            "   ETA {}",
            p.eta_secs().map_or("—".into(), format::duration)
        )
    };
    format!(" {:.0} msg/s ({limit}){eta}", p.rate)
}

/// The line under a run's figures: how it ended, or what it is doing and what Esc does now.
fn progress_note(state: &State, run: &ReplayRun) -> Span<'static> {
    let t = &state.settings.theme;
    let p = &run.progress;
    match &run.outcome {
        Some(o) => match &o.error {
            Some(e) => Span::styled(
                format!(" {}", sanitize::one_line(e, BANNER_CHARS)),
                t.danger,
            ),
            None if o.cancelled => Span::styled(
                " stopped: what moved stays moved, the rest is still in the queue",
                t.warn,
            ),
            None => Span::styled(format!(" {}", crate::tui::update::outcome_line(run)), t.ok),
        },
        None if run.cancelling => Span::styled(
            " stopping: settling what is in flight (Esc again stops at once)",
            t.warn,
        ),
        None if p.canary.is_some() => Span::styled(
            format!(
                " {}; nothing else moves meanwhile, Esc to stop",
                p.canary.as_ref().map(|c| c.to_string()).unwrap_or_default()
            ),
            t.warn,
        ),
        None if p.blocked.is_some() => Span::styled(
            format!(
                " broker blocked publishing ({}): waiting; Esc to stop",
                sanitize::one_line(p.blocked.as_deref().unwrap_or(""), 60)
            ),
            t.danger,
        ),
        None if p.backlog.is_some() => {
            let w = p.backlog.clone().unwrap_or_default();
            Span::styled(
                format!(
                    " waiting: {} holds {} ready, max {}; Esc to stop",
                    sanitize::one_line(&w.queue, 60),
                    w.ready,
                    w.max
                ),
                t.warn,
            )
        }
        None if matches!(run.job, JobKind::Restore(_)) => Span::styled(
            " each is published with a confirm and remembered as restored; Esc stops after what is in flight",
            t.muted,
        ),
        None if run.job == JobKind::Discard => Span::styled(
            " only what the snapshot holds is deleted; Esc stops after what is in flight",
            t.muted,
        ),
        None => Span::styled(
            " messages leave the queue only after the broker confirms the publish",
            t.muted,
        ),
    }
}

/// A run's title: what it does, from where, and whether it stopped, failed or is done.
fn progress_title(state: &State, run: &ReplayRun) -> String {
    let verb = match (&run.job, run.dry_run) {
        (_, true) => "Dry run",
        (JobKind::Replay, false) => "Replaying",
        (JobKind::Archive { .. }, false) => "Archiving",
        (JobKind::Discard, false) => "Discarding",
        (JobKind::Restore(_), false) => "Restoring",
    };
    match (&run.outcome, run.cancelling) {
        (Some(o), _) if o.cancelled => format!(
            " {verb} from {} — stopped ",
            queue_title(state, &run.vhost, &run.queue, 40)
        ),
        (Some(o), _) if o.error.is_some() => format!(
            " {verb} from {} — failed ",
            queue_title(state, &run.vhost, &run.queue, 40)
        ),
        (Some(_), _) => format!(
            " {verb} from {} — done ",
            queue_title(state, &run.vhost, &run.queue, 40)
        ),
        (None, true) => format!(
            " {verb} from {} — stopping… ",
            queue_title(state, &run.vhost, &run.queue, 40)
        ),
        (None, false) => format!(
            " {verb} from {} ",
            queue_title(state, &run.vhost, &run.queue, 40)
        ),
    }
}

/// The frame of a modal: a double border and its title, in the modal's colour.
fn modal_block<'a>(title: impl Into<std::borrow::Cow<'a, str>>, style: Style) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Double)
        .border_style(style)
        .title(Span::styled(title, style))
}

/// A modal's field label, padded so that the values line up.
fn field(t: &Theme, s: &str) -> Span<'static> {
    Span::styled(format!(" {s:<9} "), t.muted)
}

/// A modal's list, one line that wraps (the modal grows to fit it), within a bound that keeps
/// Enter and Esc on an 80×24 screen; `replay --dry-run` prints lists whole.
fn list(items: &[String]) -> String {
    let v: Vec<String> = items.iter().map(|s| sanitize::one_line(s, 120)).collect();
    sanitize::one_line(&v.join(", "), MODAL_LIST_CHARS)
}
