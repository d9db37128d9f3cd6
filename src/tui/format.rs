//! Small text helpers for the views: times, durations, sizes. Times are shown in UTC so that
//! colleagues in different zones read the same clock as the broker's logs.

use jiff::Timestamp;

/// `10:12:31`, or `2025-09-28 10:12` when not on the same UTC day as `now`.
pub fn time(t: Timestamp, now: Timestamp) -> String {
    let same_day = t.as_second().div_euclid(86_400) == now.as_second().div_euclid(86_400);
    if same_day {
        t.strftime("%H:%M:%S").to_string()
    } else {
        t.strftime("%Y-%m-%d %H:%M").to_string()
    }
}

/// A compact duration: `45s`, `47m`, `2h 14m`, `3d 4h`.
pub fn duration(secs: u64) -> String {
    let (d, h, m) = (secs / 86_400, (secs % 86_400) / 3_600, (secs % 3_600) / 60);
    if d > 0 {
        format!("{d}d {h}h")
    } else if h > 0 {
        format!("{h}h {m:02}m")
    } else if m > 0 {
        format!("{m}m")
    } else {
        format!("{secs}s")
    }
}

/// A compact duration shown to the minute (list cells: they redraw once a minute, not every second).
pub fn age(secs: u64) -> String {
    if secs < 60 {
        "<1m".into()
    } else {
        duration(secs)
    }
}

/// `41 B`, `3.2 KiB`, `1.5 MiB`.
pub fn bytes(n: u64) -> String {
    const K: f64 = 1024.0;
    let f = n as f64;
    if f < K {
        format!("{n} B")
    } else if f < K * K {
        format!("{:.1} KiB", f / K)
    } else {
        format!("{:.1} MiB", f / (K * K))
    }
}

/// Pads or cuts `s` (already sanitised) to exactly `width` display columns.
pub fn fit(s: &str, width: usize) -> String {
    let mut out = String::new();
    let mut w = 0;
    let total: usize = s.chars().map(char_width).sum();
    let budget = if total > width {
        width.saturating_sub(1)
    } else {
        width
    };
    for c in s.chars() {
        let cw = char_width(c);
        if w + cw > budget {
            break;
        }
        out.push(c);
        w += cw;
    }
    if total > width && width > 0 {
        out.push('…');
        w += 1;
    }
    out.extend(std::iter::repeat_n(' ', width.saturating_sub(w)));
    out
}

/// Display columns of one character, as ratatui measures it (ratatui's own width table, so the
/// padding agrees with what it draws).
pub(crate) fn char_width(c: char) -> usize {
    let mut buf = [0u8; 4];
    ratatui::text::Span::raw(&*c.encode_utf8(&mut buf)).width()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(duration(5), "5s");
        assert_eq!(duration(47 * 60 + 3), "47m");
        assert_eq!(duration(2 * 3600 + 14 * 60), "2h 14m");
        assert_eq!(duration(3 * 86_400 + 4 * 3600), "3d 4h");
        assert_eq!(age(30), "<1m");
    }

    #[test]
    fn fit_pads_and_cuts() {
        assert_eq!(fit("abc", 5), "abc  ");
        assert_eq!(fit("abcdef", 4), "abc…");
        assert_eq!(
            fit("日本語", 4),
            "日… ",
            "a wide char that does not fit leaves a space"
        );
        assert_eq!(fit("", 0), "");
    }
}
