//! Symfony's PhpSerializer: the envelope, stamps included, as `addslashes(serialize($envelope))`
//! in the body. Read as text from its head, each field bounded; never unserialized.

use jiff::Timestamp;

use super::{MAX_FIELD, Record};
use crate::domain::convention::parse_time;
use crate::domain::value::HeaderValue;

/// The body's head that is read (the stamps come before the message in an envelope).
const READ_BODY: usize = 64 * 1024;

/// A PhpSerializer envelope: the body opens with `O:36:"Symfony\Component\Messenger\Envelope"`,
/// escaped or not.
pub(super) fn envelope(body: &[u8]) -> bool {
    // Compared as it is read, stopping at the first byte that differs: every message a run
    // reads is asked this, and copying its head first cost more than the rest of the check.
    const HEAD: &[u8] = b"O:36:SymfonyComponentMessengerEnvelope";
    let mut head = body.iter().take(64).filter(|b| **b != b'\\' && **b != b'"');
    HEAD.iter().all(|want| head.next() == Some(want))
}

/// The body's head as PHP's `serialize` wrote it, without `addslashes`' escapes.
fn php_text(body: &[u8]) -> Vec<u8> {
    let head = body.get(..READ_BODY).unwrap_or(body);
    let escaped = head.starts_with(b"O:36:\\\"");
    if !escaped {
        return head.to_vec();
    }
    let mut out = Vec::with_capacity(head.len());
    let mut it = head.iter().copied();
    while let Some(b) = it.next() {
        if b != b'\\' {
            out.push(b);
            continue;
        }
        match it.next() {
            Some(b'0') => out.push(0),
            Some(c) => out.push(c),
            None => {}
        }
    }
    out
}

pub(super) fn record(body: &[u8]) -> Record {
    let t = php_text(body);
    let prop = |class: &str, name: &str| {
        let mut p = class.as_bytes().to_vec();
        p.push(0);
        p.extend_from_slice(name.as_bytes());
        p.extend_from_slice(b"\";");
        p
    };
    let error_class = prop("ErrorDetailsStamp", "exceptionClass");
    let error_message = prop("ErrorDetailsStamp", "exceptionMessage");
    let trace = prop("FlattenException", "traceAsString");
    let count = prop("RedeliveryStamp", "retryCount");
    let at = prop("RedeliveryStamp", "redeliveredAt");
    let transport = prop("SentToFailureTransportStamp", "originalReceiverName");
    let retry_counts = find_all(&t, &count)
        .filter_map(|i| php_int(t.get(i..)?))
        .collect();
    let exception_class = rfind(&t, &error_class).and_then(|i| php_string(t.get(i..)?));
    Record {
        exception_message: rfind(&t, &error_message).and_then(|i| php_string(t.get(i..)?)),
        trace: rfind(&t, &trace)
            .and_then(|i| php_string(t.get(i..)?))
            .map(|s| match &exception_class {
                Some(c) => format!("{c}\n{s}"),
                None => s,
            }),
        exception_class,
        retry_counts,
        redelivered_at: rfind(&t, &at).and_then(|i| php_date(t.get(i..)?)),
        transport: rfind(&t, &transport).and_then(|i| php_string(t.get(i..)?)),
        failed_before: rfind(&t, b"SentToFailureTransportStamp").is_some(),
        message_class: php_message_class(&t),
    }
}

fn find_all<'a>(hay: &'a [u8], needle: &'a [u8]) -> impl Iterator<Item = usize> + 'a {
    memchr::memmem::find_iter(hay, needle).map(move |i| i + needle.len())
}

fn rfind(hay: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::rfind(hay, needle).map(|i| i + needle.len())
}

/// `s:N:"…";` at the start of `t`: the N bytes, as text.
fn php_string(t: &[u8]) -> Option<String> {
    let rest = t.strip_prefix(b"s:")?;
    let colon = rest.iter().position(|b| *b == b':')?;
    let n: usize = std::str::from_utf8(rest.get(..colon)?).ok()?.parse().ok()?;
    let start = colon.checked_add(2)?;
    if rest.get(colon + 1) != Some(&b'"') || n > MAX_FIELD {
        return None;
    }
    let bytes = rest.get(start..start.checked_add(n)?)?;
    Some(String::from_utf8_lossy(bytes).trim().to_string())
}

/// `i:N;` at the start of `t`.
fn php_int(t: &[u8]) -> Option<i64> {
    let rest = t.strip_prefix(b"i:")?;
    let end = rest.iter().take(24).position(|b| *b == b';')?;
    std::str::from_utf8(rest.get(..end)?).ok()?.parse().ok()
}

/// A `DateTimeImmutable` in UTC: `O:17:"DateTimeImmutable":3:{s:4:"date";s:26:"…";…"UTC";}`.
fn php_date(t: &[u8]) -> Option<Timestamp> {
    let window = t.get(..t.len().min(256))?;
    let date = rfind(window, b"s:4:\"date\";").and_then(|i| php_string(window.get(i..)?))?;
    let zone = rfind(window, b"s:8:\"timezone\";").and_then(|i| php_string(window.get(i..)?));
    matches!(zone.as_deref(), Some("UTC" | "+00:00"))
        .then(|| parse_time(&HeaderValue::string(date)))
        .flatten()
}

/// The envelope's message: `Envelope\0message";O:N:"Class"`.
fn php_message_class(t: &[u8]) -> Option<String> {
    let i = rfind(t, b"Envelope\0message\";O:")?;
    let rest = t.get(i..)?;
    let colon = rest.iter().take(8).position(|b| *b == b':')?;
    let quoted = rest.get(colon + 1..)?;
    let quoted = quoted.strip_prefix(b"\"")?;
    let end = quoted.iter().take(512).position(|b| *b == b'"')?;
    Some(String::from_utf8_lossy(quoted.get(..end)?).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn php_fields_are_read_bounded() {
        let body = br#"O:36:\"Symfony\\Component\\Messenger\\Envelope\":2:{s:44:\"\0Symfony\\Component\\Messenger\\Envelope\0stamps\";a:1:{s:1:\"x\";a:1:{i:0;O:1:\"E\":1:{s:67:\"\0Symfony\\Component\\Messenger\\Stamp\\ErrorDetailsStamp\0exceptionClass\";s:16:\"App\\CardDeclined\";s:61:\"\0Symfony\\Component\\Messenger\\Stamp\\RedeliveryStamp\0retryCount\";i:2;s:61:\"\0Symfony\\Component\\Messenger\\Stamp\\RedeliveryStamp\0retryCount\";i:0;}}}s:45:\"\0Symfony\\Component\\Messenger\\Envelope\0message\";O:14:\"App\\ChargeCard\":1:{}}"#;
        assert!(envelope(body));
        let r = record(body);
        assert_eq!(r.exception_class.as_deref(), Some("App\\CardDeclined"));
        assert_eq!(r.retry_counts, vec![2, 0]);
        assert_eq!(r.message_class.as_deref(), Some("App\\ChargeCard"));
        assert!(!r.failed_before);
        // Lengths that lie, cut bodies, junk: nothing, never a panic.
        for junk in [&b"s:99999:\"x\""[..], b"s:5:\"ab", b"s:-1:\"", b"i:;", b""] {
            assert_eq!(php_string(junk), None);
            assert_eq!(php_int(junk), None);
        }
        for cut in 0..body.len() {
            let _ = record(&body[..cut]);
        }
    }
}
