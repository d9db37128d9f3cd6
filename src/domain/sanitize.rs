//! Terminal-safe text. Everything that came from a broker (bodies, header values, queue names,
//! exception messages) passes through here before it reaches a terminal, a list cell or a log
//! line a person will read: control characters, escape sequences, bidi overrides and invisible
//! format characters become visible escapes, invalid UTF-8 is shown as `\xNN`, and the length is
//! bounded with a marker that says how much was cut.
//!
//! Escapes used: `\e` (ESC), `\0`, `\t`, `\n`, `\r`, `\xNN` for other C0 controls and DEL (NN
//! below 80) and for bytes that are not valid UTF-8 (NN 80 and above), `\u{NNNN}` for C1
//! controls, bidi controls and invisible format characters. Backslashes themselves are left as
//! they are: the point is safety and legibility, not a reversible encoding (the lossless form is
//! the JSON export).

/// How line breaks and tabs are treated; everything else is escaped the same way in all modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Every control character escaped, `\n` and `\t` included.
    Exact,
    /// `Exact`, surrounding whitespace trimmed, and a bare `…` as the cut marker (list cells).
    OneLine,
    /// `\n` (and `\r\n`) kept as a real line break, a tab expanded to spaces.
    MultiLine,
}

/// Spaces a tab becomes in multi-line text (stack traces indent frames with tabs).
const TAB_SPACES: &str = "    ";

/// Shows arbitrary bytes (a body, a header value) as one line of terminal-safe text of at most
/// `max_chars` characters. Invalid UTF-8 is shown byte by byte as `\xNN`.
pub fn display_bytes(bytes: &[u8], max_chars: usize) -> String {
    render(bytes, max_chars, Mode::Exact)
}

/// Shows a string as one line of terminal-safe text of at most `max_chars` characters, with
/// every control character (newlines and tabs included) as a visible escape.
pub fn display(s: &str, max_chars: usize) -> String {
    render(s.as_bytes(), max_chars, Mode::Exact)
}

/// Like [`display`], for list cells: surrounding whitespace trimmed and a cut marked by `…`
/// alone, so that the cell keeps as much of the text as fits.
pub fn one_line(s: &str, max_chars: usize) -> String {
    render(s.trim().as_bytes(), max_chars, Mode::OneLine)
}

/// Terminal-safe text that keeps its line breaks (stack traces, bodies): `\n` and `\r\n` stay
/// real line breaks, a tab becomes four spaces, everything else is escaped as in [`display`].
pub fn multi_line(s: &str, max_chars: usize) -> String {
    render(s.as_bytes(), max_chars, Mode::MultiLine)
}

/// [`multi_line`] for bytes that may not be UTF-8 (a body).
pub fn multi_line_bytes(bytes: &[u8], max_chars: usize) -> String {
    render(bytes, max_chars, Mode::MultiLine)
}

/// [`one_line`] text that fits in `cols` terminal columns (wide CJK and emoji count two), cut
/// with `…` when it does not. For table cells, where characters are not columns.
pub fn width_safe_truncate(s: &str, cols: usize) -> String {
    use unicode_width::UnicodeWidthChar;
    // Every character is at least one column wide here (controls are escaped), so `cols`
    // characters are always enough to fill `cols` columns.
    let safe = one_line(s, cols);
    let width = |c: char| c.width().unwrap_or(0);
    if safe.chars().map(width).sum::<usize>() <= cols {
        return safe;
    }
    let mut out = String::new();
    let mut used = 0;
    for c in safe.chars() {
        let w = width(c);
        if used + w > cols.saturating_sub(1) {
            break;
        }
        out.push(c);
        used += w;
    }
    if cols > 0 {
        out.push('…');
    }
    out
}

/// [`one_line`] text that fits in `cols` terminal columns, cut in the middle with `…` when it
/// does not: for names, whose end says what they are (`shipping-la…_skipped`, not
/// `shipping-label_…`). Wide characters count two columns; an escape is never split; the
/// result may be a column short when a wide character does not fit the room left.
pub fn middle_cut(s: &str, cols: usize) -> String {
    use unicode_width::UnicodeWidthChar;
    if cols == 0 {
        return String::new();
    }
    let s = s.trim();
    // Each character shows as at least one column (controls become escapes), so the first and
    // the last `cols` characters are all a cut can keep: the rest is never looked at.
    let piece = |c: char| {
        let mut buf = [0u8; 4];
        let shown = render(c.encode_utf8(&mut buf).as_bytes(), 16, Mode::Exact);
        // A zero-width character (a combining mark) still costs one of the `cols` characters
        // a cell may hold: counted as one column, the cut fits in characters and in columns.
        let width = shown.chars().map(|c| c.width().unwrap_or(0)).sum::<usize>();
        (shown, width.max(1))
    };
    let n = s.chars().count();
    if n <= cols {
        let whole: Vec<(String, usize)> = s.chars().map(piece).collect();
        if whole.iter().map(|p| p.1).sum::<usize>() <= cols {
            return whole.into_iter().map(|p| p.0).collect();
        }
    }
    let budget = cols - 1;
    // The end gets half the room (it names the kind); the start gets the rest.
    let mut tail: Vec<String> = Vec::new();
    let mut tail_used = 0;
    for c in s.chars().rev().take(cols) {
        let (p, w) = piece(c);
        if tail_used + w > budget / 2 {
            break;
        }
        tail.push(p);
        tail_used += w;
    }
    let mut head = String::new();
    let mut head_used = 0;
    for c in s.chars().take(cols) {
        let (p, w) = piece(c);
        if head_used + w > budget - tail_used {
            break;
        }
        head.push_str(&p);
        head_used += w;
    }
    head.push('…');
    head.extend(tail.into_iter().rev());
    head
}

/// One line for a sentence built from broker text (a verdict, an error a broker sent): each run
/// of whitespace, line breaks and tabs included, becomes one space, and everything else is
/// treated as by [`one_line`]. Safe to apply twice (escapes are plain text).
pub fn summary(s: &str, max_chars: usize) -> String {
    let collapsed = s.split_whitespace().collect::<Vec<_>>().join(" ");
    one_line(&collapsed, max_chars)
}

/// A JSON value as one line for a terminal or a pipe. serde_json already escapes C0 controls,
/// `"` and `\`; this also writes every other [`is_unsafe`] character (DEL, C1 controls, bidi
/// controls, zero-width and other invisible format characters) as `\uXXXX` (a surrogate pair
/// above U+FFFF), so the text holds the same JSON value and no byte a terminal acts on.
pub fn json_line(v: &serde_json::Value) -> String {
    escape_json_text(&v.to_string())
}

/// [`json_line`] for JSON that is already serialised. Unsafe characters can only occur inside
/// JSON strings (everything outside them is ASCII punctuation, digits and words), where
/// `\uXXXX` means the same character.
pub fn escape_json_text(json: &str) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        // Below U+0020 serde_json leaves only the whitespace between tokens and lines raw.
        if is_unsafe(c) && c >= ' ' {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                // Writing to a String cannot fail.
                let _ = write!(out, "\\u{u:04x}");
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// True for characters that must never reach a terminal as themselves: C0 controls, DEL, C1
/// controls, bidi controls, and invisible format characters that can hide or reorder text.
pub fn is_unsafe(c: char) -> bool {
    let u = u32::from(c);
    u < 0x20
        || (0x7f..=0x9f).contains(&u)
        || matches!(
            u,
            0x00ad                      // soft hyphen (invisible)
            | 0x061c                    // Arabic letter mark (bidi)
            | 0x0600..=0x0605
            | 0x06dd
            | 0x070f
            | 0x08e2                    // Arabic disputed end of ayah (format)
            | 0x180e                    // Mongolian vowel separator
            | 0x200b..=0x200f           // zero-width space/joiners, LRM, RLM
            | 0x2028 | 0x2029           // line and paragraph separators
            | 0x202a..=0x202e           // bidi embeddings and overrides
            | 0x2060..=0x2064           // word joiner, invisible operators
            | 0x2066..=0x206f           // bidi isolates, deprecated format characters
            | 0xfeff                    // zero-width no-break space / BOM
            | 0xfff9..=0xfffb           // interlinear annotation
            | 0x1_10bd | 0x1_10cd        // Kaithi number signs (format)
            | 0x1_3430..=0x1_343f       // Egyptian hieroglyph format controls
            | 0x1_bca0..=0x1_bca3
            | 0x1_d173..=0x1_d17a
            | 0xe_0000..=0xe_007f       // tag characters ("ASCII smuggling")
            | 0xe_0080..=0xe_00ff       // unassigned, ignorable: shown as nothing
            | 0xe_01f0..=0xe_0fff
        )
}

/// The visible escape for an unsafe character.
fn push_escape(c: char, out: &mut String) {
    use std::fmt::Write;
    let u = u32::from(c);
    // Writing to a String cannot fail.
    let _ = match c {
        '\u{1b}' => out.write_str("\\e"),
        '\0' => out.write_str("\\0"),
        '\t' => out.write_str("\\t"),
        '\n' => out.write_str("\\n"),
        '\r' => out.write_str("\\r"),
        _ if u < 0x80 => write!(out, "\\x{u:02x}"),
        _ => write!(out, "\\u{{{u:x}}}"),
    };
}

/// Builds the output within `max_chars`, cutting only between whole pieces (a character or a
/// whole escape) so that an escape is never half shown.
fn render(bytes: &[u8], max_chars: usize, mode: Mode) -> String {
    if max_chars == 0 {
        return String::new();
    }
    // Room for the marker when a cut is needed, computed for the largest possible cut so that the
    // real marker (which can only be shorter) always fits. The long form is used only when it
    // leaves at least as much room for the text as it takes; decided once, here.
    let long_marker =
        mode != Mode::OneLine && marker(bytes.len(), true).chars().count() * 2 <= max_chars;
    let marker_len = marker(bytes.len(), long_marker).chars().count();
    let mut b = Builder {
        out: String::new(),
        out_chars: 0,
        cut_at: (0, 0),
        budget_if_cut: max_chars.saturating_sub(marker_len),
        max_chars,
        long_marker,
    };
    let mut piece = String::new();
    let mut offset = 0usize;
    for chunk in bytes.utf8_chunks() {
        let valid = chunk.valid();
        let mut chars = valid.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            piece.clear();
            match (mode, c) {
                (Mode::MultiLine, '\n') => piece.push('\n'),
                (Mode::MultiLine, '\r') if matches!(chars.peek(), Some((_, '\n'))) => {
                    piece.push('\n');
                    chars.next();
                }
                (Mode::MultiLine, '\t') => piece.push_str(TAB_SPACES),
                _ if is_unsafe(c) => push_escape(c, &mut piece),
                _ => piece.push(c),
            }
            if !b.push(&piece, offset + i) {
                return b.cut(bytes.len(), mode);
            }
        }
        offset += valid.len();
        for &byte in chunk.invalid() {
            piece.clear();
            use std::fmt::Write;
            let _ = write!(piece, "\\x{byte:02x}");
            if !b.push(&piece, offset) {
                return b.cut(bytes.len(), mode);
            }
            offset += 1;
        }
    }
    b.out
}

struct Builder {
    out: String,
    out_chars: usize,
    /// Where to cut if the text turns out not to fit: output byte length and input offset of the
    /// last piece boundary that leaves room for the marker.
    cut_at: (usize, usize),
    budget_if_cut: usize,
    max_chars: usize,
    long_marker: bool,
}

impl Builder {
    /// Appends `piece` (which starts at input offset `start`) if it fits in `max_chars`; returns
    /// false when it does not, so the caller cuts.
    fn push(&mut self, piece: &str, start: usize) -> bool {
        if self.out_chars <= self.budget_if_cut {
            self.cut_at = (self.out.len(), start);
        }
        let n = piece.chars().count();
        if self.out_chars + n > self.max_chars {
            return false;
        }
        self.out.push_str(piece);
        self.out_chars += n;
        true
    }

    fn cut(mut self, total: usize, mode: Mode) -> String {
        let (out_len, in_offset) = self.cut_at;
        self.out.truncate(out_len);
        if mode == Mode::OneLine {
            // A cell ending in spaces before the marker wastes the little room it has.
            let trimmed = self.out.trim_end().len();
            self.out.truncate(trimmed);
        }
        let cut = total.saturating_sub(in_offset);
        self.out.push_str(&marker(cut, self.long_marker));
        self.out
    }
}

/// The cut marker: `… (+N bytes)`, or `…` alone where there is no room for more.
fn marker(cut_bytes: usize, long: bool) -> String {
    if long {
        format!("… (+{cut_bytes} bytes)")
    } else {
        "…".to_string()
    }
}

/// `s` as part of a file name: ASCII letters, digits, `-`, `_` and `.` kept, anything else `_`,
/// at most `max` characters.
pub fn file_safe(s: &str, max: usize) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(max)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_unchanged() {
        assert_eq!(display("orders.dlq", 100), "orders.dlq");
        assert_eq!(display("Grüße – 日本", 100), "Grüße – 日本");
    }

    #[test]
    fn escape_sequences_become_visible() {
        assert_eq!(display("\u{1b}[31mred\u{1b}[0m", 100), "\\e[31mred\\e[0m");
        assert_eq!(display("a\u{7}b\u{7f}c\u{0}", 100), "a\\x07b\\x7fc\\0");
        assert_eq!(display("x\u{9b}31m", 100), "x\\u{9b}31m");
    }

    #[test]
    fn bidi_and_invisible_characters_become_visible() {
        assert_eq!(display("abc\u{202e}fed", 100), "abc\\u{202e}fed");
        assert_eq!(display("a\u{200b}b\u{feff}", 100), "a\\u{200b}b\\u{feff}");
        assert_eq!(display("\u{2066}x\u{2069}", 100), "\\u{2066}x\\u{2069}");
        assert_eq!(display("\u{e0041}", 100), "\\u{e0041}");
    }

    #[test]
    fn invalid_utf8_is_shown_byte_by_byte() {
        assert_eq!(display_bytes(b"ok\xff\xfe!", 100), "ok\\xff\\xfe!");
        assert_eq!(display_bytes(b"\xe2\x82", 100), "\\xe2\\x82");
    }

    #[test]
    fn newlines_and_tabs_depend_on_the_mode() {
        assert_eq!(display("a\nb\tc", 100), "a\\nb\\tc");
        assert_eq!(one_line("  a\r\nb\t \n", 100), "a\\r\\nb");
        assert_eq!(multi_line("a\r\n\tat B\rc", 100), "a\n    at B\\rc");
        assert_eq!(multi_line_bytes(b"x\n\xc0", 100), "x\n\\xc0");
    }

    #[test]
    fn truncation_says_how_much_was_cut() {
        let s = "a".repeat(100);
        let out = display(&s, 40);
        assert!(out.chars().count() <= 40, "{out}");
        let kept = out.chars().take_while(|c| *c == 'a').count();
        assert_eq!(
            out,
            format!("{}… (+{} bytes)", "a".repeat(kept), 100 - kept)
        );
    }

    #[test]
    fn truncation_never_splits_an_escape() {
        let out = display("\u{1b}\u{1b}\u{1b}\u{1b}", 5);
        assert_eq!(out, "\\e\\e…");
        let out = one_line("ab\u{202e}", 4);
        assert_eq!(out, "ab…");
    }

    #[test]
    fn small_limits() {
        assert_eq!(display("abc", 0), "");
        assert_eq!(display("abc", 1), "…");
        assert_eq!(display("abc", 3), "abc");
        assert_eq!(display("abcd", 3), "ab…");
        assert_eq!(one_line("日本語テキスト", 4), "日本語…");
    }

    #[test]
    fn summaries_are_one_line_and_escaped() {
        assert_eq!(summary("  a\n\tb  c ", 100), "a b c");
        assert_eq!(
            summary("x\u{1b}]0;pwned\u{7} \u{202e}y", 100),
            "x\\e]0;pwned\\x07 \\u{202e}y"
        );
        let once = summary("a\u{1b}[31m\u{200b}b", 100);
        assert_eq!(summary(&once, 100), once);
        assert!(summary(&"w ".repeat(500), 50).chars().count() <= 50);
    }

    #[test]
    fn json_escapes_what_a_terminal_acts_on() {
        let v = serde_json::json!({
            "reason": "a\u{1b}]0;pwned\u{7}b\u{7f}\u{9b}\u{202e}\u{2066}\u{200b}\u{feff}\u{e0041}",
            "plain": "Grüße 日本 \\ \"q\"",
        });
        let text = json_line(&v);
        assert!(
            text.is_ascii() || text.chars().all(|c| !is_unsafe(c)),
            "{text}"
        );
        for bad in [
            '\u{1b}',
            '\u{7}',
            '\u{7f}',
            '\u{9b}',
            '\u{202e}',
            '\u{2066}',
            '\u{200b}',
            '\u{feff}',
            '\u{e0041}',
        ] {
            assert!(!text.contains(bad), "{bad:?} in {text}");
        }
        assert!(
            text.contains(
                "\\u001b]0;pwned\\u0007b\\u007f\\u009b\\u202e\\u2066\\u200b\\ufeff\\udb40\\udc41"
            ),
            "{text}"
        );
        // The same value comes back.
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, v);
        assert!(text.contains("Grüße 日本"));
        // Lines of JSON stay lines.
        assert_eq!(
            escape_json_text("{\"a\":\"\u{202e}\"}\n{}\n"),
            "{\"a\":\"\\u202e\"}\n{}\n"
        );
    }

    #[test]
    fn width_counts_columns_not_characters() {
        assert_eq!(width_safe_truncate("orders.dlq", 20), "orders.dlq");
        assert_eq!(width_safe_truncate("日本語テキスト", 7), "日本語…");
        assert_eq!(width_safe_truncate("日本語", 6), "日本語");
        assert_eq!(width_safe_truncate("a\u{1b}[2J", 6), "a\\e[2J");
        assert_eq!(width_safe_truncate("abc", 0), "");
    }

    #[test]
    fn middle_cut_keeps_the_end_that_names_the_kind() {
        assert_eq!(
            middle_cut("shipping-label_skipped", 20),
            "shipping-l…l_skipped"
        );
        assert_eq!(
            middle_cut("shipping-label_error", 20),
            "shipping-label_error"
        );
        assert_eq!(middle_cut("shipping-label_error", 12), "shippi…error");
        assert_ne!(
            middle_cut("shipping-label_error", 14),
            middle_cut("shipping-label_skipped", 14),
            "the two MassTransit queues stay apart"
        );
        assert_eq!(
            middle_cut("  orders.dlq ", 20),
            "orders.dlq",
            "trimmed as a cell"
        );
    }

    #[test]
    fn middle_cut_counts_columns_and_keeps_escapes_whole() {
        use unicode_width::UnicodeWidthStr;
        assert_eq!(middle_cut("日本語のキュー", 14), "日本語のキュー");
        let cut = middle_cut("日本語のキュー", 9);
        assert!(cut.width() <= 9, "{cut}");
        assert!(cut.starts_with("日本") && cut.ends_with("キュー") || cut.contains('…'));
        // An escape is a whole piece: kept whole or left out, never half shown.
        let cut = middle_cut("a\u{1b}bcdefghij", 6);
        assert!(cut == "a\\e…ij" || !cut.contains('\\'), "{cut}");
        assert_eq!(middle_cut("x\u{202e}y", 20), "x\\u{202e}y");
    }

    /// Found by `sanitize_props` in CI: a zero-width character (here an unassigned ignorable
    /// one, U+E0080) was counted as no column, so the cut held more characters than `cols`.
    /// Such characters are escaped now, and any zero-width one costs a column.
    #[test]
    fn middle_cut_counts_zero_width_characters() {
        let s = "\0\u{1b}é\u{85}\u{85}\u{1b}\u{7f}\u{1b}\u{85}\u{e0080}\u{1b}";
        let out = middle_cut(s, 28);
        assert!(out.chars().count() <= 28, "{out:?}");
        assert!(!out.contains('\u{e0080}'), "{out:?}");
        let marks = "e\u{301}".repeat(20);
        let out = middle_cut(&marks, 10);
        assert!(out.chars().count() <= 10, "{out:?}");
    }

    #[test]
    fn middle_cut_tiny_widths_never_panic_or_overflow() {
        use unicode_width::UnicodeWidthStr;
        let inputs = [
            "",
            "a",
            "ab",
            "日",
            "日本",
            "\u{1b}\u{1b}\u{1b}",
            "e\u{301}e\u{301}e\u{301}",
            "shipping-label_skipped",
            "🦀🦀🦀🦀🦀",
        ];
        for s in inputs {
            for cols in 0..12 {
                let cut = middle_cut(s, cols);
                assert!(cut.width() <= cols, "{s:?} at {cols}: {cut:?}");
                assert!(!cut.chars().any(is_unsafe), "{s:?} at {cols}: {cut:?}");
            }
        }
        assert_eq!(middle_cut("abc", 0), "");
        assert_eq!(middle_cut("abcdef", 1), "…");
        assert_eq!(middle_cut("abcdef", 2), "a…");
    }
}
