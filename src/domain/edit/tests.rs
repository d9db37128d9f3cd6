use std::io::Read as _;

use super::*;
use crate::domain::message::DeadLetter;

fn msg(id: &str, body: &[u8]) -> DeadLetter {
    let mut m = DeadLetter {
        queue: "orders.dlq".into(),
        body: body.to_vec(),
        body_size: body.len() as u64,
        ..Default::default()
    };
    m.properties.message_id = Some(id.into());
    m.properties.content_type = Some("application/json".into());
    m.headers.insert("tenant", HeaderValue::string("acme"));
    m.headers.insert("attempts", HeaderValue::I32(3));
    m.headers.insert("x-death", HeaderValue::Array(vec![]));
    m.headers.insert("blob", HeaderValue::Bytes(vec![0, 1]));
    m
}

#[test]
fn an_unchanged_or_emptied_document_cancels() {
    let originals = [msg("m-1", br#"{"order":"x","n":1}"#), msg("m-2", b"{}")];
    let doc = document("orders.dlq", &originals);
    assert_eq!(read(&doc, &originals), Ok(None));
    assert_eq!(read("", &originals), Ok(None));
    assert_eq!(read("  \n# nothing\n", &originals), Ok(None));
}

#[test]
fn a_field_changed_is_the_one_change_and_only_its_message_moves() {
    let originals = [msg("m-1", br#"{"order":"x","n":1}"#), msg("m-2", b"{}")];
    let doc = document("orders.dlq", &originals);
    assert!(doc.contains("header tenant: \"acme\""), "{doc}");
    assert!(!doc.contains("header x-death"), "{doc}");
    assert!(
        doc.contains("# header blob (bytes) is kept as it is"),
        "{doc}"
    );
    let saved = doc.replacen("\"order\": \"x\"", "\"order\": 5", 1);
    let edits = read(&saved, &originals).unwrap().unwrap();
    assert_eq!(edits.unchanged, 1);
    let e = &edits.messages[0];
    assert_eq!(e.key, "id:m-1");
    assert_eq!(e.body, br#"{"order":5,"n":1}"#);
    assert_eq!(e.changes, vec![r#"body.order: "x" → 5"#]);
    assert!(e.set.is_empty() && e.removed.is_empty());
    assert_ne!(e.before, e.after);
    assert!(e.before.starts_with("sha256:") && e.before.len() == 71);
    // Applied to the message as it is taken again: x-death and the bytes header are kept.
    let mut taken = originals[0].clone();
    e.apply(&mut taken);
    assert_eq!(taken.body, e.body);
    assert!(taken.headers.contains_key("x-death") && taken.headers.contains_key("blob"));
}

#[test]
fn headers_and_properties_are_set_added_and_removed() {
    let originals = [msg("m-1", b"{}")];
    let doc = document("q", &originals);
    let saved = doc
        .replace("header tenant: \"acme\"\n", "")
        .replace(
            "header attempts: 3",
            "header attempts: 0\nheader \"odd name\": [1, \"a\"]",
        )
        .replace("property type: null", "property type: \"order.v2\"");
    let e = read(&saved, &originals)
        .unwrap()
        .unwrap()
        .messages
        .remove(0);
    assert_eq!(e.removed, vec!["tenant"]);
    assert_eq!(e.set.len(), 2);
    assert!(e.set.contains(&("attempts".into(), HeaderValue::I64(0))));
    assert_eq!(e.properties.kind.as_deref(), Some("order.v2"));
    assert_eq!(e.body, b"{}");
    assert_eq!(e.before, e.after);
    assert!(
        e.changes
            .iter()
            .any(|c| c == "header tenant: \"acme\" → removed")
    );
}

#[test]
fn what_cannot_be_read_is_refused_with_its_line() {
    let originals = [msg("m-1", br#"{"a":1}"#)];
    let doc = document("q", &originals);
    let line_of =
        |needle: &str, text: &str| text.lines().position(|l| l.contains(needle)).unwrap() + 1;
    let bad = doc.replace("\"a\": 1", "\"a\": ");
    let p = read(&bad, &originals).unwrap_err();
    assert!(p.reason.starts_with("the body is not JSON"), "{p}");
    assert_eq!(p.line, line_of("\"a\":", &bad) + 1);
    let bad = doc.replace("header tenant: \"acme\"", "header tenant: acme");
    let p = read(&bad, &originals).unwrap_err();
    assert_eq!(p.line, line_of("header tenant", &bad));
    assert!(p.reason.contains("not JSON"), "{p}");
    let bad = doc.replace("header tenant: \"acme\"", "header x-death: []");
    assert!(
        read(&bad, &originals)
            .unwrap_err()
            .reason
            .contains("cannot be edited")
    );
    let bad = doc.replace("property app_id: null", "property user_id: \"root\"");
    assert!(
        read(&bad, &originals)
            .unwrap_err()
            .reason
            .contains("cannot be edited")
    );
    let bad = doc.replace("=== message 1 of 1", "=== message 7 of 1");
    assert!(
        read(&bad, &originals)
            .unwrap_err()
            .reason
            .contains("no message 7")
    );
    // A JSON content type with a body that is no longer JSON.
    let bad = doc.replace("--- body: JSON ---", "--- body: text ---");
    let bad = bad.replace("\"a\": 1", "\"a\": oops");
    let p = read(&bad, &originals).unwrap_err();
    assert!(p.reason.contains("content type says JSON"), "{p}");
}

#[test]
fn a_gzip_body_is_edited_decoded_and_published_encoded() {
    use std::io::Write as _;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(br#"{"order":"x"}"#).unwrap();
    let mut m = msg("m-1", &gz.finish().unwrap());
    m.properties.content_encoding = Some("gzip".into());
    let originals = [m];
    let doc = document("q", &originals);
    assert!(doc.contains("--- body: JSON, gzip (decoded here, gzip again when saved) ---"));
    let saved = doc.replace("\"order\": \"x\"", "\"order\": \"y\"");
    let e = read(&saved, &originals)
        .unwrap()
        .unwrap()
        .messages
        .remove(0);
    let mut plain = String::new();
    flate2::read::GzDecoder::new(e.body.as_slice())
        .read_to_string(&mut plain)
        .unwrap();
    assert_eq!(plain, r#"{"order":"y"}"#);
}

#[test]
fn text_and_bytes_round_trip_exactly() {
    let mut text = msg("t", b"line one\n# not a comment\nlast\n");
    text.properties.content_type = Some("text/plain".into());
    let mut bytes = msg("b", &[0xff, 0x00, 0x1b, 0x07]);
    bytes.properties.content_type = None;
    let originals = [text, bytes];
    let doc = document("q", &originals);
    assert_eq!(read(&doc, &originals), Ok(None), "{doc}");
    let saved = doc.replace("last\n", "last edited\n");
    let e = read(&saved, &originals).unwrap().unwrap();
    assert_eq!(
        e.messages[0].body,
        b"line one\n# not a comment\nlast edited\n"
    );
    assert_eq!(e.unchanged, 1);
    let saved = doc.replace("/wAbBw==", "AAE=");
    let e = read(&saved, &originals).unwrap().unwrap();
    assert_eq!(e.messages[0].body, vec![0, 1]);
}

#[test]
fn bidi_and_invisible_characters_reach_the_editor_escaped_and_come_back_as_they_were() {
    // Trojan Source: a right-to-left override shows an editor's line reordered. Every value
    // in the document is JSON, where `\u202e` is the same character; a text body holding one
    // is shown as its exact bytes.
    const RLO: &str = "\u{202e}";
    let mut json = msg("m-1", format!(r#"{{"to":"cdp{RLO}exe.pdf"}}"#).as_bytes());
    json.headers
        .insert("note", HeaderValue::string(format!("a{RLO}b\u{200b}c")));
    json.headers
        .insert(format!("odd{RLO}name"), HeaderValue::I32(1));
    json.properties.kind = Some(format!("order{RLO}.v2"));
    let mut text = msg("m-2", format!("plain {RLO}text").as_bytes());
    text.properties.content_type = Some("text/plain".into());
    let originals = [json, text];
    let doc = document("q", &originals);
    assert!(
        !doc.chars()
            .any(|c| crate::domain::sanitize::is_unsafe(c) && c != '\n'),
        "{doc:?}"
    );
    assert!(doc.contains(r#""to": "cdp\u202eexe.pdf""#), "{doc}");
    assert!(doc.contains(r#"header note: "a\u202eb\u200bc""#), "{doc}");
    assert!(doc.contains(r#"header "odd\u202ename": 1"#), "{doc}");
    assert!(doc.contains(r#"property type: "order\u202e.v2""#), "{doc}");
    assert!(doc.contains("--- body: base64 ---"), "{doc}");
    assert_eq!(read(&doc, &originals), Ok(None), "unchanged: {doc}");

    let saved = doc.replace(r#""to": "cdp"#, r#""to": "CDP"#);
    let e = read(&saved, &originals)
        .unwrap()
        .unwrap()
        .messages
        .remove(0);
    assert_eq!(e.body, format!(r#"{{"to":"CDP{RLO}exe.pdf"}}"#).as_bytes());
    assert!(e.set.is_empty() && e.removed.is_empty(), "{:?}", e.set);
    assert_eq!(
        e.properties.kind.as_deref(),
        Some(format!("order{RLO}.v2").as_str())
    );
}
