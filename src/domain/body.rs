//! A body as a person reads it: decoded by its `content_encoding` (gzip, deflate) and shown in
//! the format detected (JSON pretty-printed, XML and text as they are, anything else as a hex
//! dump). Display only: replay always publishes the bytes as they were read.
//!
//! Decoding is bounded: a decompression bomb stops at the cap with a note saying so, a corrupt
//! stream says so and shows the raw bytes, and nothing here panics on any input.

use std::borrow::Cow;
use std::io::Read;

use super::amqp10::{self, sections::Section};
use super::message::DeadLetter;
use super::sanitize;

/// Most bytes a body decodes to. A 1 MiB gzip body of zeros would otherwise be a gigabyte.
pub const DECODE_CAP: usize = 4 * 1024 * 1024;
/// Bytes per hex dump line.
const HEX_WIDTH: usize = 16;
/// Characters a hex dump line takes (offset, 16 hex pairs, ASCII column, newline).
const HEX_LINE_CHARS: usize = 79;

/// A compression Warren decodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    Gzip,
    Deflate,
}

impl Encoding {
    pub fn label(self) -> &'static str {
        match self {
            Encoding::Gzip => "gzip",
            Encoding::Deflate => "deflate",
        }
    }
}

/// The format a body's (decoded) bytes are in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Json,
    Xml,
    Text,
    Binary,
}

impl Format {
    pub fn label(self) -> &'static str {
        match self {
            Format::Json => "JSON",
            Format::Xml => "XML",
            Format::Text => "text",
            Format::Binary => "binary",
        }
    }
}

/// What decoding did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decoding {
    /// No compression named (none, `identity`, or a charset such as `UTF-8`, which Spring and
    /// others put in `content_encoding`): the bytes as they are.
    Plain,
    /// Decoded whole.
    Decoded(Encoding),
    /// The output reached the cap: the first `cap` bytes are shown.
    Capped { encoding: Encoding, cap: usize },
    /// The stored body was cut at the browse cap, so the stream ends early: what it gave.
    Truncated(Encoding),
    /// Not a valid stream: the raw bytes are shown.
    Corrupt { encoding: Encoding, reason: String },
    /// A compression Warren does not decode (`br`, `zstd`, …): the raw bytes are shown.
    Unsupported(String),
    /// AMQP 1.0 body sections the broker passed on encoded (`type: amqp-1.0`), decoded: what
    /// the section holds is shown.
    Amqp(Section),
    /// `type: amqp-1.0`, but the sections do not decode (cut at the browse cap, or malformed):
    /// the raw bytes are shown.
    AmqpUnreadable { reason: String, cut: bool },
}

/// A body ready to show: the bytes to show (decoded when possible), how, and in what format.
#[derive(Clone, Debug, PartialEq)]
pub struct Body<'a> {
    pub bytes: Cow<'a, [u8]>,
    pub decoding: Decoding,
    pub format: Format,
}

impl Body<'_> {
    /// The compression that was decoded, when the bytes shown are decoded ones.
    pub fn decoded_from(&self) -> Option<Encoding> {
        match &self.decoding {
            Decoding::Decoded(e) | Decoding::Truncated(e) => Some(*e),
            Decoding::Capped { encoding, .. } => Some(*encoding),
            _ => None,
        }
    }

    /// What the bytes shown were decoded from, for a label ("gzip", "AMQP 1.0 amqp-value").
    pub fn decoded_label(&self) -> Option<String> {
        match &self.decoding {
            Decoding::Amqp(section) => Some(format!("AMQP 1.0 {}", section.label())),
            _ => self.decoded_from().map(|e| e.label().to_string()),
        }
    }

    /// What the operator must know about the bytes shown, when anything.
    pub fn note(&self) -> Option<String> {
        match &self.decoding {
            Decoding::Plain | Decoding::Decoded(_) => None,
            Decoding::Amqp(_) => Some(
                "(an AMQP 1.0 body the broker passed on encoded, type amqp-1.0: decoded for reading; a replay sends it as it is)"
                    .to_string(),
            ),
            Decoding::AmqpUnreadable { reason, cut } => Some(format!(
                "(an AMQP 1.0 body, type amqp-1.0, that does not decode{}: {}; showing the raw bytes)",
                if *cut { " as far as it was read (browse cap)" } else { "" },
                sanitize::one_line(reason, 120)
            )),
            Decoding::Capped { encoding, cap } => Some(format!(
                "(decoded first {cap} bytes: the {} stream holds more; Warren stops there)",
                encoding.label()
            )),
            Decoding::Truncated(e) => Some(format!(
                "(decoded first {} bytes: the stored body is cut at the browse cap, so the {} stream ends early)",
                self.bytes.len(),
                e.label()
            )),
            Decoding::Corrupt { encoding, reason } => Some(format!(
                "(not a valid {} stream: {}; showing the raw bytes)",
                encoding.label(),
                sanitize::one_line(reason, 120)
            )),
            Decoding::Unsupported(name) => Some(format!(
                "(content_encoding {} is not one Warren decodes; showing the raw bytes)",
                sanitize::one_line(name, 40)
            )),
        }
    }
}

/// A message's body ready to show: an AMQP-encoded body (`type: amqp-1.0`) decoded from its
/// sections, any other by its `content_encoding` ([`decode`]).
pub fn decode_message(m: &DeadLetter, cap: usize) -> Body<'_> {
    if !amqp10::encoded_body(&m.properties) {
        return decode(
            &m.body,
            m.properties.content_encoding.as_deref(),
            m.body_complete(),
            cap,
        );
    }
    match amqp10::body(&m.body) {
        Ok(mut r) => {
            r.bytes.truncate(cap);
            Body {
                format: detect(&r.bytes),
                bytes: Cow::Owned(r.bytes),
                decoding: Decoding::Amqp(r.section),
            }
        }
        Err(e) => Body {
            bytes: Cow::Borrowed(&m.body),
            format: detect(&m.body),
            decoding: Decoding::AmqpUnreadable {
                reason: e.to_string(),
                cut: !m.body_complete(),
            },
        },
    }
}

/// Decodes `raw` by `content_encoding` (up to `cap` bytes of output) and detects its format.
/// `complete` says whether `raw` is the whole body (it may be cut at the browse cap).
pub fn decode<'a>(
    raw: &'a [u8],
    content_encoding: Option<&str>,
    complete: bool,
    cap: usize,
) -> Body<'a> {
    let plain = |decoding| Body {
        bytes: Cow::Borrowed(raw),
        format: detect(raw),
        decoding,
    };
    let encoding = match content_encoding.map(|e| e.trim().to_ascii_lowercase()) {
        None => return plain(Decoding::Plain),
        Some(e) if raw.is_empty() || is_not_compression(&e) => return plain(Decoding::Plain),
        Some(e) if e == "gzip" || e == "x-gzip" => Encoding::Gzip,
        Some(e) if e == "deflate" => Encoding::Deflate,
        Some(_) => {
            let name = content_encoding.unwrap_or_default().trim().to_string();
            return plain(Decoding::Unsupported(name));
        }
    };
    let mut out = Vec::new();
    let limit = u64::try_from(cap).unwrap_or(u64::MAX).saturating_add(1);
    let read = match encoding {
        Encoding::Gzip => flate2::read::MultiGzDecoder::new(raw)
            .take(limit)
            .read_to_end(&mut out),
        // HTTP's "deflate" is a zlib stream, but some producers send raw deflate: the zlib
        // header (a checksum over its two bytes) tells them apart.
        Encoding::Deflate if zlib_header(raw) => flate2::read::ZlibDecoder::new(raw)
            .take(limit)
            .read_to_end(&mut out),
        Encoding::Deflate => flate2::read::DeflateDecoder::new(raw)
            .take(limit)
            .read_to_end(&mut out),
    };
    let decoding = match read {
        Ok(_) if out.len() > cap => {
            out.truncate(cap);
            Decoding::Capped { encoding, cap }
        }
        Ok(_) => Decoding::Decoded(encoding),
        // A body cut at the browse cap ends mid-stream: what came before the cut is good.
        Err(_) if !complete => Decoding::Truncated(encoding),
        Err(e) => {
            return plain(Decoding::Corrupt {
                encoding,
                reason: e.to_string(),
            });
        }
    };
    Body {
        format: detect(&out),
        bytes: Cow::Owned(out),
        decoding,
    }
}

/// Values of `content_encoding` that name no compression: empty, `identity`, and charsets.
fn is_not_compression(e: &str) -> bool {
    matches!(
        e,
        "" | "identity"
            | "utf-8"
            | "utf8"
            | "us-ascii"
            | "ascii"
            | "latin1"
            | "utf-16"
            | "binary"
            | "7bit"
            | "8bit"
    ) || e.starts_with("iso-8859")
        || e.starts_with("windows-125")
}

/// A zlib header: compression method 8 and a header checksum that divides by 31 (RFC 1950).
pub(crate) fn zlib_header(b: &[u8]) -> bool {
    match b {
        [cmf, flg, ..] => cmf & 0x0f == 8 && (u16::from(*cmf) << 8 | u16::from(*flg)) % 31 == 0,
        _ => false,
    }
}

/// The format of `bytes`: JSON if it parses, XML if it looks like markup, text unless a good
/// share of it is bytes no text holds, else binary.
pub fn detect(bytes: &[u8]) -> Format {
    if bytes.is_empty() {
        return Format::Text;
    }
    if serde_json::from_slice::<serde_json::Value>(bytes).is_ok() {
        return Format::Json;
    }
    let invalid: usize = bytes.utf8_chunks().map(|c| c.invalid().len()).sum();
    let controls = bytes
        .iter()
        .filter(|&&b| b < 0x20 && !matches!(b, b'\n' | b'\r' | b'\t' | 0x1b))
        .count();
    if (invalid + controls) * 10 > bytes.len() {
        return Format::Binary;
    }
    let text = bytes
        .strip_prefix(b"\xef\xbb\xbf")
        .unwrap_or(bytes)
        .trim_ascii();
    let markup = text.starts_with(b"<")
        && text.ends_with(b">")
        && (text.starts_with(b"<?xml") || memchr::memmem::find(text, b"</").is_some());
    if markup { Format::Xml } else { Format::Text }
}

/// The body as terminal-safe text of at most about `max_chars` characters: JSON pretty-printed,
/// XML and text as they are, binary as a hex dump. Everything goes through the sanitiser.
pub fn text(body: &Body<'_>, max_chars: usize) -> String {
    match body.format {
        Format::Json => serde_json::from_slice::<serde_json::Value>(&body.bytes)
            .ok()
            .and_then(|v| serde_json::to_string_pretty(&v).ok())
            .map(|s| sanitize::multi_line(&s, max_chars))
            .unwrap_or_else(|| sanitize::multi_line_bytes(&body.bytes, max_chars)),
        Format::Xml | Format::Text => sanitize::multi_line_bytes(&body.bytes, max_chars),
        Format::Binary => hex_dump(&body.bytes, (max_chars / HEX_LINE_CHARS).max(1)),
    }
}

/// `00000000  7b 22 6f 72 …  |{"or…|`: printable ASCII only in the right column, at most
/// `max_lines` lines and then how many bytes were left out.
pub fn hex_dump(bytes: &[u8], max_lines: usize) -> String {
    let mut out = String::new();
    for (i, chunk) in bytes.chunks(HEX_WIDTH).enumerate() {
        if i >= max_lines {
            out.push_str(&format!(
                "… {} more bytes\n",
                bytes.len().saturating_sub(i * HEX_WIDTH)
            ));
            break;
        }
        let hex: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
        let ascii: String = chunk
            .iter()
            .map(|&b| {
                if (0x20..0x7f).contains(&b) {
                    b as char
                } else {
                    '.'
                }
            })
            .collect();
        out.push_str(&format!(
            "{:08x}  {:<width$}  |{ascii}|\n",
            i * HEX_WIDTH,
            hex.join(" "),
            width = HEX_WIDTH * 3 - 1
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::Compression;
    use flate2::write::{DeflateEncoder, GzEncoder, ZlibEncoder};
    use std::io::Write;

    fn gzip(b: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), Compression::fast());
        e.write_all(b).unwrap();
        e.finish().unwrap()
    }

    const JSON: &[u8] = br#"{"orderId":"o-17","lines":[{"sku":"A-1","qty":2}]}"#;

    #[test]
    fn formats() {
        assert_eq!(detect(br#"{"a":1}"#), Format::Json);
        assert_eq!(detect(b"hello \x1b[31m world"), Format::Text);
        assert_eq!(detect(&[0u8, 1, 2, 3, 0xff, 0xfe, 7, 8]), Format::Binary);
        assert_eq!(
            detect(b"<?xml version=\"1.0\"?><order id=\"1\"/>"),
            Format::Xml
        );
        assert_eq!(detect(b"  <order><id>1</id></order>\n"), Format::Xml);
        assert_eq!(detect(b"<not markup"), Format::Text);
        assert_eq!(detect(b""), Format::Text);
    }

    #[test]
    fn gzip_json_is_decoded_and_pretty_printed() {
        let packed = gzip(JSON);
        let b = decode(&packed, Some("gzip"), true, DECODE_CAP);
        assert_eq!(b.decoding, Decoding::Decoded(Encoding::Gzip));
        assert_eq!(b.format, Format::Json);
        assert_eq!(&*b.bytes, JSON);
        assert_eq!(b.note(), None);
        let t = text(&b, 10_000);
        assert!(t.contains("\"orderId\": \"o-17\""), "{t}");
        assert!(t.lines().count() > 3, "pretty-printed: {t}");
    }

    #[test]
    fn deflate_is_decoded_zlib_wrapped_or_raw() {
        let mut z = ZlibEncoder::new(Vec::new(), Compression::default());
        z.write_all(b"plain words").unwrap();
        let zlib = z.finish().unwrap();
        let mut d = DeflateEncoder::new(Vec::new(), Compression::default());
        d.write_all(b"plain words").unwrap();
        let raw = d.finish().unwrap();
        for packed in [zlib, raw] {
            let b = decode(&packed, Some(" Deflate "), true, DECODE_CAP);
            assert_eq!(b.decoding, Decoding::Decoded(Encoding::Deflate));
            assert_eq!(&*b.bytes, b"plain words");
            assert_eq!(b.format, Format::Text);
        }
    }

    #[test]
    fn a_corrupt_stream_says_so_and_shows_the_raw_bytes() {
        let mut packed = gzip(JSON);
        // Flip bytes in the middle of the compressed data.
        let mid = packed.len() / 2;
        for b in &mut packed[mid..mid + 4] {
            *b ^= 0xff;
        }
        for body in [&packed[..], b"definitely not gzip"] {
            let b = decode(body, Some("gzip"), true, DECODE_CAP);
            assert!(
                matches!(
                    b.decoding,
                    Decoding::Corrupt {
                        encoding: Encoding::Gzip,
                        ..
                    }
                ),
                "{:?}",
                b.decoding
            );
            assert_eq!(&*b.bytes, body, "the raw bytes are shown");
            let note = b.note().unwrap();
            assert!(note.contains("not a valid gzip stream"), "{note}");
            assert!(note.contains("showing the raw bytes"), "{note}");
        }
    }

    #[test]
    fn a_decompression_bomb_stops_at_the_cap() {
        let zeros = vec![0u8; 3 * DECODE_CAP];
        let packed = gzip(&zeros);
        assert!(packed.len() < 64 * 1024, "a bomb: {} bytes", packed.len());
        let b = decode(&packed, Some("gzip"), true, DECODE_CAP);
        assert_eq!(
            b.decoding,
            Decoding::Capped {
                encoding: Encoding::Gzip,
                cap: DECODE_CAP
            }
        );
        assert_eq!(b.bytes.len(), DECODE_CAP);
        assert_eq!(b.format, Format::Binary);
        assert!(
            b.note()
                .unwrap()
                .starts_with(&format!("(decoded first {DECODE_CAP} bytes"))
        );
        // And the text of it is bounded too.
        let t = text(&b, 64 * 1024);
        assert!(t.len() < 70 * 1024, "{}", t.len());
        assert!(t.ends_with("more bytes\n"), "{}", &t[t.len() - 40..]);
    }

    #[test]
    fn a_body_cut_at_the_browse_cap_decodes_as_far_as_it_goes() {
        let words: Vec<u8> = (0..20_000u32)
            .flat_map(|i| format!("line {i}\n").into_bytes())
            .collect();
        let packed = gzip(&words);
        let cut = &packed[..packed.len() / 2];
        let b = decode(cut, Some("gzip"), false, DECODE_CAP);
        assert_eq!(b.decoding, Decoding::Truncated(Encoding::Gzip));
        assert!(!b.bytes.is_empty() && b.bytes.len() < words.len());
        assert!(words.starts_with(&b.bytes));
        assert!(b.note().unwrap().contains("cut at the browse cap"));
    }

    #[test]
    fn binary_stays_a_hex_dump_and_unknown_encodings_show_raw_bytes() {
        let bin = [0u8, 1, 2, 3, 0xff, 0xfe, 7, 8];
        let packed = gzip(&bin);
        let b = decode(&packed, Some("gzip"), true, DECODE_CAP);
        assert_eq!(b.format, Format::Binary);
        assert_eq!(
            text(&b, 1000),
            format!("00000000  {:<47}  |........|\n", "00 01 02 03 ff fe 07 08")
        );
        let b = decode(b"\x1b[2Jbr bytes", Some("br"), true, DECODE_CAP);
        assert_eq!(b.decoding, Decoding::Unsupported("br".into()));
        assert!(b.note().unwrap().contains("content_encoding br"));
        assert!(!text(&b, 100).contains('\x1b'), "sanitised");
    }

    #[test]
    fn charsets_and_identity_are_not_compression() {
        for e in [
            None,
            Some("UTF-8"),
            Some("identity"),
            Some(""),
            Some("ISO-8859-1"),
        ] {
            let b = decode(JSON, e, true, DECODE_CAP);
            assert_eq!(b.decoding, Decoding::Plain, "{e:?}");
            assert_eq!(b.format, Format::Json);
        }
        // An empty body says gzip but holds nothing to decode.
        assert_eq!(
            decode(b"", Some("gzip"), true, 10).decoding,
            Decoding::Plain
        );
    }

    #[test]
    fn hex_dump_shows_only_printable_ascii() {
        let d = hex_dump(b"ab\x1b\x9b", 10);
        assert_eq!(d, format!("00000000  {:<47}  |ab..|\n", "61 62 1b 9b"));
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        for seed in 0u32..200 {
            let bytes: Vec<u8> = (0..(seed * 7 % 300))
                .map(|i| (i.wrapping_mul(2_654_435_761).wrapping_add(seed) >> 7) as u8)
                .collect();
            for enc in ["gzip", "deflate"] {
                for complete in [true, false] {
                    let b = decode(&bytes, Some(enc), complete, 1024);
                    assert!(b.bytes.len() <= bytes.len().max(1024));
                    let _ = text(&b, 1000);
                }
            }
        }
    }
}
