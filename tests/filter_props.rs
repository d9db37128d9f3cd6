//! Properties of the filter language: parsing never panics whatever is typed, a parsed filter's
//! canonical form parses back to the same filter, and matching never panics on odd subjects.

use proptest::prelude::*;
use warren::domain::filter::{Filter, Subject};
use warren::domain::value::{HeaderValue, Table};

/// Fragments of the language, so that generated queries are often valid and exercise every
/// term, mixed with arbitrary text so that they are often not.
fn query() -> impl Strategy<Value = String> {
    let fragment = prop_oneof![
        Just("exception:".to_string()),
        Just("reason:".to_string()),
        Just("queue:".to_string()),
        Just("type:".to_string()),
        Just("header:".to_string()),
        Just("body:".to_string()),
        Just("age:>".to_string()),
        Just("age:<=".to_string()),
        Just("fw:".to_string()),
        Just("rejected".to_string()),
        Just("delivery_limit".to_string()),
        Just("1h30m".to_string()),
        Just("90s".to_string()),
        Just("-".to_string()),
        Just("\"".to_string()),
        Just("\\".to_string()),
        Just("=".to_string()),
        Just(":".to_string()),
        Just(" ".to_string()),
        Just("\t".to_string()),
        Just("é".to_string()),
        "[a-zA-Z0-9]{1,6}",
        any::<String>(),
    ];
    proptest::collection::vec(fragment, 0..12).prop_map(|v| v.concat())
}

fn subject<'a>(headers: &'a Table, body: &'a [u8], text: &'a str) -> Subject<'a> {
    Subject {
        verdict: text.into(),
        exception_type: Some(text),
        exception_message: None,
        reasons: vec!["rejected", text],
        origin_queue: Some(text),
        message_type: None,
        convention: text,
        headers,
        body,
        age_secs: Some(3600),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn parse_never_panics(input in any::<String>()) {
        let _ = Filter::parse(&input);
    }

    #[test]
    fn canonical_form_round_trips(input in query()) {
        if let Ok(f) = Filter::parse(&input) {
            let canon = f.to_string();
            let again = Filter::parse(&canon);
            prop_assert_eq!(again.as_ref(), Ok(&f), "{:?} → {:?}", input, canon);
        }
    }

    #[test]
    fn errors_point_inside_the_query(input in query()) {
        if let Err(e) = Filter::parse(&input) {
            prop_assert!(e.column >= 1 && e.column <= input.chars().count() + 1, "{}: {}", input, e);
            prop_assert!(!e.message.is_empty());
        }
    }

    #[test]
    fn matching_never_panics(
        input in query(),
        body in proptest::collection::vec(any::<u8>(), 0..64),
        text in any::<String>(),
        value in proptest::collection::vec(any::<u8>(), 0..16),
    ) {
        let mut headers = Table::new();
        headers.insert(text.clone(), HeaderValue::LongString(value));
        headers.insert("n", HeaderValue::I64(-5));
        if let Ok(f) = Filter::parse(&input) {
            let s = subject(&headers, &body, &text);
            // A single term and its negation: exactly one of them matches.
            let canon = f.to_string();
            if canon.split_whitespace().count() == 1
                && !canon.starts_with('-')
                && let Ok(neg) = Filter::parse(&format!("-{canon}"))
            {
                prop_assert_ne!(f.matches(&s), neg.matches(&s), "{}", canon);
            }
            let _ = f.matches(&s);
        }
    }
}
