//! Wrapping with a hanging indent: a detail line too long for its pane goes on under its own
//! text, not at column 0, so a wrapped timeline entry still reads as one entry ("via orders
//! key order.created · last ≈06:52:15" stays under "via"). ratatui's `Wrap` restarts each row
//! at the left edge; this breaks the line itself, at spaces where it can, keeping each span's
//! style.

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthChar;

/// One character with its span's style: a row is built of these.
type Cell = (char, Style);

/// Extra columns a continuation row is indented beyond the line's own leading spaces.
const HANG: usize = 2;

/// `line` as rows of at most `width` columns, each continuation row indented under the
/// line's text (its leading spaces plus [`HANG`], at most half the width).
pub(super) fn hanging(line: Line<'_>, width: usize) -> Vec<Line<'static>> {
    let chars: Vec<Cell> = line
        .spans
        .iter()
        .flat_map(|s| s.content.chars().map(move |c| (c, s.style)))
        .collect();
    let cols: usize = chars.iter().map(|&(c, _)| c.width().unwrap_or(0)).sum();
    if width == 0 || cols <= width {
        return vec![owned(line)];
    }
    let lead = chars.iter().take_while(|&&(c, _)| c == ' ').count();
    let indent = (lead + HANG).min(width / 2);
    let mut rows: Vec<Vec<Cell>> = vec![Vec::new()];
    let mut used = 0;
    for (c, style) in chars {
        let w = c.width().unwrap_or(0);
        if used + w > width {
            let row = rows.last_mut().map(std::mem::take).unwrap_or_default();
            let (kept, carried) = split_at_space(row, indent);
            rows.pop();
            rows.push(kept);
            let mut next: Vec<Cell> = vec![(' ', Style::default()); indent];
            next.extend(carried);
            used = next.iter().map(|&(c, _)| c.width().unwrap_or(0)).sum();
            rows.push(next);
        }
        let continuation = rows.len() > 1;
        let Some(row) = rows.last_mut() else { break };
        // A continuation row does not start with the space it broke at.
        if c == ' ' && continuation && row.len() == indent {
            continue;
        }
        row.push((c, style));
        used += w;
    }
    rows.into_iter()
        .map(|r| Line::from(spans(r)).style(line.style))
        .collect()
}

/// Splits a full row at its last space after `indent` (the space dropped), so a word moves
/// whole to the next row; a row with no such space (one long word) is cut where it is full.
fn split_at_space(mut row: Vec<Cell>, indent: usize) -> (Vec<Cell>, Vec<Cell>) {
    let at = row
        .iter()
        .enumerate()
        .skip(indent + 1)
        .rev()
        .find(|(_, (c, _))| *c == ' ')
        .map(|(i, _)| i);
    match at {
        Some(i) => {
            let carried = row.split_off(i + 1);
            row.pop();
            (row, carried)
        }
        None => (row, Vec::new()),
    }
}

/// Runs of one style as spans.
fn spans(row: Vec<Cell>) -> Vec<Span<'static>> {
    let mut out: Vec<Span<'static>> = Vec::new();
    for (c, style) in row {
        match out.last_mut() {
            Some(s) if s.style == style => s.content.to_mut().push(c),
            _ => out.push(Span::styled(c.to_string(), style)),
        }
    }
    out
}

fn owned(line: Line<'_>) -> Line<'static> {
    Line {
        spans: line
            .spans
            .into_iter()
            .map(|s| Span::styled(s.content.into_owned(), s.style))
            .collect(),
        style: line.style,
        alignment: line.alignment,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(rows: &[Line<'_>]) -> Vec<String> {
        rows.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn a_wrapped_line_goes_on_under_its_own_text() {
        let line = Line::from(vec![
            Span::raw("    via orders key "),
            Span::styled("order.created", Style::default().bold()),
            Span::raw(" · last ≈06:52:15"),
        ]);
        let rows = hanging(line, 30);
        assert_eq!(
            text(&rows),
            vec![
                "    via orders key",
                "      order.created · last",
                "      ≈06:52:15",
            ]
        );
        assert!(rows.iter().all(|r| r.width() <= 30));
        // The styled word keeps its style on its new row.
        assert!(
            rows[1]
                .spans
                .iter()
                .any(|s| s.content == "order.created" && s.style == Style::default().bold())
        );
    }

    #[test]
    fn a_line_that_fits_and_a_word_too_long_for_any_row() {
        assert_eq!(text(&hanging(Line::raw("  short"), 30)), vec!["  short"]);
        let rows = hanging(Line::raw("  abcdefghijklmnopqrstuvwxyz"), 10);
        assert!(rows.iter().all(|r| r.width() <= 10), "{:?}", text(&rows));
        assert_eq!(
            text(&rows).concat().replace(' ', ""),
            "abcdefghijklmnopqrstuvwxyz"
        );
        // No width at all: the line as it is.
        assert_eq!(hanging(Line::raw("x y"), 0).len(), 1);
    }
}
