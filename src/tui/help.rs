//! The help overlay's layout, shared by `view` (which draws it) and `update` (which scrolls it,
//! and so must know where the last page starts): the key table's sections in one column, or in
//! two side by side where they fit.

use ratatui::layout::Rect;

use super::keys::{self, Binding};

/// Narrower than this (inside its border), the overlay is one column.
pub const TWO_COLUMNS: u16 = 100;

/// Sections of the help: a title and its bindings.
pub type Section = (&'static str, Vec<&'static Binding>);

/// The overlay's box on a screen of `area`: centred, at most 120 columns wide.
pub fn rect(area: Rect) -> Rect {
    let w = area.width.saturating_sub(4).min(120);
    let h = area.height.saturating_sub(2);
    Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    }
}

/// Whether a binding answers the help's search (`/` in help, as in k9s and lazygit): every
/// word of `query` is in its key, what it does or its section's title, case-insensitively.
pub fn matches(section: &str, b: &Binding, query: &str) -> bool {
    let hay = format!("{} {} {}", b.label, b.help, section).to_lowercase();
    query
        .split_whitespace()
        .all(|w| hay.contains(&w.to_lowercase()))
}

/// The sections holding a binding that matches `query`, with only those bindings; every
/// section when `query` is empty.
pub fn matching(query: &str) -> Vec<Section> {
    keys::help_sections()
        .into_iter()
        .map(|(title, list)| {
            let kept: Vec<&'static Binding> = list
                .into_iter()
                .filter(|b| matches(title, b, query))
                .collect();
            (title, kept)
        })
        .filter(|(_, list)| !list.is_empty())
        .collect()
}

/// The sections in the left and the right column for an inside `width` wide (the right one
/// empty when one column); a section is never split. While the help is searched, only what
/// matches, in one column.
pub fn columns_for(width: u16, query: &str) -> (Vec<Section>, Vec<Section>) {
    if query.trim().is_empty() {
        columns(width)
    } else {
        (matching(query), Vec::new())
    }
}

/// The sections in the left and the right column for an inside `width` wide (the right one
/// empty when one column); a section is never split.
pub fn columns(width: u16) -> (Vec<Section>, Vec<Section>) {
    let sections = keys::help_sections();
    let lines = |s: &Section| s.1.len() + 1;
    let total: usize = sections.iter().map(lines).sum();
    let (mut left, mut right) = (Vec::new(), Vec::new());
    let mut left_lines = 0;
    for section in sections {
        let n = lines(&section);
        if width < TWO_COLUMNS || (right.is_empty() && left_lines + n <= total.div_ceil(2) + 2) {
            left_lines += n;
            left.push(section);
        } else {
            right.push(section);
        }
    }
    (left, right)
}

/// Lines of the taller column, with `extra` lines (the configured commands) under the right
/// column, or under the only one.
pub fn tallest(width: u16, extra: usize, query: &str) -> usize {
    let (left, right) = columns_for(width, query);
    let lines = |c: &[Section]| c.iter().map(|s| s.1.len() + 1).sum::<usize>();
    if right.is_empty() {
        lines(&left) + extra
    } else {
        lines(&left).max(lines(&right) + extra)
    }
}

/// The first line of the last page on a screen of `screen` (width, height): scrolling stops
/// there, so the last page is full. An unknown screen (0×0) lets every line be the first.
pub fn max_scroll(screen: (u16, u16), extra: usize, query: &str) -> u16 {
    let (w, h) = screen;
    let inner = rect(Rect::new(0, 0, w, h));
    let (width, height) = (
        inner.width.saturating_sub(2),
        inner.height.saturating_sub(2),
    );
    let tallest = tallest(width, extra, query);
    let max = if h == 0 {
        tallest.saturating_sub(1)
    } else {
        tallest.saturating_sub(usize::from(height))
    };
    u16::try_from(max).unwrap_or(u16::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_keeps_only_the_bindings_that_match_in_their_sections() {
        let found = matching("select");
        let n: usize = found.iter().map(|s| s.1.len()).sum();
        assert!(n >= 3, "{n} bindings match");
        assert!(
            found
                .iter()
                .flat_map(|s| &s.1)
                .all(|b| matches("", b, "select") || b.help.contains("select"))
        );
        assert!(matching("no such key anywhere").is_empty());
        assert_eq!(columns_for(160, "").0.len(), columns(160).0.len());
    }

    #[test]
    fn every_binding_is_in_one_column_once() {
        for width in [40, 99, 100, 160] {
            let (l, r) = columns(width);
            let n: usize = l.iter().chain(&r).map(|s| s.1.len()).sum();
            assert_eq!(n, keys::BINDINGS.len(), "at {width}");
            assert_eq!(r.is_empty(), width < TWO_COLUMNS, "at {width}");
        }
    }

    #[test]
    fn the_last_page_is_full() {
        let one = tallest(74, 0, "");
        // 80×24: the box is 22 high, 20 lines inside.
        assert_eq!(usize::from(max_scroll((80, 24), 0, "")), one - 20);
        assert_eq!(max_scroll((200, 80), 0, ""), 0, "all of it fits");
        assert_eq!(usize::from(max_scroll((0, 0), 0, "")), one - 1);
        assert_eq!(
            usize::from(max_scroll((80, 24), 3, "")),
            one + 3 - 20,
            "commands below"
        );
    }
}
