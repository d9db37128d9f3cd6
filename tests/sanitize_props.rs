//! Properties of terminal-safe text: whatever bytes a broker hands us, what `sanitize` returns
//! contains nothing a terminal would act on, stays within its length, and is valid UTF-8.

use proptest::prelude::*;
use unicode_width::UnicodeWidthStr;
use warren::domain::sanitize::{
    display, display_bytes, middle_cut, multi_line, multi_line_bytes, one_line, width_safe_truncate,
};

/// Characters that must never appear in sanitised output (`\n` is checked separately).
fn forbidden(c: char) -> bool {
    let u = u32::from(c);
    (u < 0x20 && c != '\n')
        || (0x7f..=0x9f).contains(&u)
        || (0x202a..=0x202e).contains(&u)
        || (0x2066..=0x2069).contains(&u)
        || matches!(u, 0x200b..=0x200f | 0x061c | 0xfeff | 0x2028 | 0x2029)
}

fn check(out: &str, max: usize, newlines_allowed: bool) -> Result<(), TestCaseError> {
    prop_assert!(
        out.chars().count() <= max,
        "{} chars > {max}: {out:?}",
        out.chars().count()
    );
    prop_assert!(!out.chars().any(forbidden), "forbidden char in {out:?}");
    if !newlines_allowed {
        prop_assert!(!out.contains('\n'), "newline in one-line output {out:?}");
    }
    Ok(())
}

/// Strings rich in the characters that matter, not just random Unicode.
fn nasty_string() -> impl Strategy<Value = String> {
    let nasty = prop_oneof![
        Just('\u{1b}'),
        Just('\n'),
        Just('\r'),
        Just('\t'),
        Just('\0'),
        Just('\u{7f}'),
        Just('\u{85}'),
        Just('\u{9b}'),
        Just('\u{202e}'),
        Just('\u{2066}'),
        Just('\u{200b}'),
        Just('\u{feff}'),
        Just('\u{2028}'),
        Just('日'),
        Just('é'),
        Just('\\'),
        any::<char>(),
        proptest::char::range('a', 'z'),
    ];
    proptest::collection::vec(nasty, 0..200).prop_map(|v| v.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn bytes_are_always_safe(bytes in proptest::collection::vec(any::<u8>(), 0..400), max in 0usize..120) {
        check(&display_bytes(&bytes, max), max, false)?;
        check(&multi_line_bytes(&bytes, max), max, true)?;
    }

    #[test]
    fn strings_are_always_safe(s in nasty_string(), max in 0usize..120) {
        check(&display(&s, max), max, false)?;
        check(&one_line(&s, max), max, false)?;
        check(&multi_line(&s, max), max, true)?;
    }

    #[test]
    fn cells_fit_their_columns(s in nasty_string(), cols in 0usize..40) {
        let out = width_safe_truncate(&s, cols);
        prop_assert!(out.width() <= cols, "{:?} is {} columns > {}", out, out.width(), cols);
        check(&out, cols, false)?;
    }

    #[test]
    fn names_cut_in_the_middle_fit_their_columns(s in nasty_string(), cols in 0usize..40) {
        let out = middle_cut(&s, cols);
        prop_assert!(out.width() <= cols, "{:?} is {} columns > {}", out, out.width(), cols);
        check(&out, cols, false)?;
    }

    #[test]
    fn a_name_that_fits_is_shown_whole(s in "[a-zA-Z0-9._-]{0,40}", extra in 0usize..10) {
        prop_assert_eq!(middle_cut(&s, s.len() + extra), s);
    }

    #[test]
    fn safe_text_that_fits_is_unchanged(s in "[a-zA-Z0-9 .,:;!?/()_-]{0,60}") {
        prop_assert_eq!(display(&s, 60), s);
    }

    #[test]
    fn a_cut_is_marked(s in "[a-z]{50,300}", max in 1usize..49) {
        let out = display(&s, max);
        prop_assert!(out.ends_with('…') || out.contains("… (+"), "unmarked cut: {out:?}");
        // The marker's count, when shown, is exactly what was left out.
        if let Some(pos) = out.find("… (+") {
            let kept = out.get(..pos).map(str::len).unwrap_or(0);
            let expected = format!("… (+{} bytes)", s.len() - kept);
            prop_assert_eq!(out.get(pos..), Some(expected.as_str()));
        }
    }
}

#[test]
fn a_large_body_is_cut_quickly_and_reports_the_rest() {
    let body = vec![b'x'; 10_000_000];
    let out = display_bytes(&body, 200);
    assert!(out.chars().count() <= 200);
    let kept = out.chars().take_while(|c| *c == 'x').count();
    assert_eq!(
        out.get(kept..),
        Some(format!("… (+{} bytes)", 10_000_000 - kept).as_str())
    );
}
