//! AMQP connections (lapin) and the conversions between lapin's types and the domain's: field
//! values and tables, basic properties, and a delivery turned into a [`DeadLetter`].
//!
//! Connecting tries each cluster node in turn and, when none answers, says for each one what
//! went wrong in the user's words, with passwords never shown.

use std::path::{Path, PathBuf};
use std::time::Duration;

use lapin::protocol::AMQPErrorKind;
use lapin::tcp::OwnedTLSConfig;
use lapin::types::{
    AMQPValue, ByteArray, DecimalValue, FieldArray, FieldTable, LongString, ShortString,
};
use lapin::uri::{AMQPAuthority, AMQPScheme, AMQPUri, AMQPUserInfo};
use lapin::{BasicProperties, Connection, ConnectionProperties, ErrorKind};

use crate::domain::message::{DeadLetter, Delivery, Properties};
use crate::domain::value::{HeaderValue, MAX_DEPTH, Table};

/// How long one node gets to answer (TCP, TLS and the AMQP handshake together).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a connection could not be made.
#[derive(Debug, thiserror::Error)]
pub enum AmqpError {
    #[error("no AMQP URL given: pass at least one, e.g. amqp://localhost:5672")]
    NoUrls,
    #[error("cannot read the CA file {}: {source}. Check the path given for the CA certificate.", path.display())]
    CaFile {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Every node failed; one entry per URL, in the order tried.
    #[error("{}", render_attempts(.0))]
    Unreachable(Vec<ConnectAttempt>),
}

/// One node tried while connecting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectAttempt {
    /// The URL without credentials, path or query: `amqp://host:5672`.
    pub url: String,
    /// What happened, in the user's words (already mentions the URL).
    pub failure: String,
}

fn render_attempts(attempts: &[ConnectAttempt]) -> String {
    match attempts {
        [one] => one.failure.clone(),
        many => {
            let mut out = format!("could not connect to any of {} RabbitMQ nodes:", many.len());
            for a in many {
                out.push_str("\n  - ");
                out.push_str(&a.failure);
            }
            out
        }
    }
}

/// A URL as it may be shown: scheme, host and port only. Anything unparsable is shown as
/// `<invalid URL>` rather than echoed, since it may hold a password.
pub fn display_url(url: &str) -> String {
    match url::Url::parse(url.trim()) {
        Ok(u) => {
            let port = u
                .port()
                .unwrap_or(if u.scheme() == "amqps" { 5671 } else { 5672 });
            match u.host_str() {
                Some(host) => format!("{}://{}:{}", u.scheme(), host, port),
                None => format!("{}://<no host>", u.scheme()),
            }
        }
        Err(_) => "<invalid URL>".to_string(),
    }
}

/// Connects to the first node that answers. `urls` are tried in order, each with
/// [`CONNECT_TIMEOUT`]. Credentials: `username`/`password` when non-empty, else those in the
/// URL, else guest/guest. `vhost` always replaces the URL's path. `amqps://` verifies the
/// server certificate against the system roots, or against `ca_file` (PEM) when given.
pub async fn connect(
    urls: &[String],
    vhost: &str,
    username: &str,
    password: &str,
    ca_file: Option<&Path>,
) -> Result<Connection, AmqpError> {
    connect_named(urls, vhost, username, password, ca_file, "warren").await
}

/// [`connect`] with the connection name operators see in the management UI (`warren`,
/// `warren-replay-consume`, …), so each of Warren's connections says what it is for.
pub async fn connect_named(
    urls: &[String],
    vhost: &str,
    username: &str,
    password: &str,
    ca_file: Option<&Path>,
    name: &str,
) -> Result<Connection, AmqpError> {
    if urls.is_empty() {
        return Err(AmqpError::NoUrls);
    }
    let cert_chain = match ca_file {
        Some(path) => Some(
            std::fs::read_to_string(path).map_err(|source| AmqpError::CaFile {
                path: path.to_path_buf(),
                source,
            })?,
        ),
        None => None,
    };
    let mut attempts = Vec::new();
    for raw in urls {
        let shown = display_url(raw);
        let uri = match build_uri(raw, vhost, username, password) {
            Ok(uri) => uri,
            Err(why) => {
                attempts.push(ConnectAttempt {
                    failure: format!("{shown}: {why}"),
                    url: shown,
                });
                continue;
            }
        };
        let user = uri.authority.userinfo.username.clone();
        let tls = OwnedTLSConfig {
            identity: None,
            cert_chain: cert_chain.clone(),
        };
        let props = ConnectionProperties::default().with_connection_name(name.into());
        let attempt = async {
            let runtime = lapin::runtime::default_runtime()?;
            Connection::connect_uri_with_config(uri, props, tls, runtime).await
        };
        match tokio::time::timeout(CONNECT_TIMEOUT, attempt).await {
            Ok(Ok(conn)) => return Ok(conn),
            Ok(Err(e)) => attempts.push(ConnectAttempt {
                failure: describe_connect_error(&shown, &user, vhost, &e),
                url: shown,
            }),
            Err(_) => attempts.push(ConnectAttempt {
                failure: format!(
                    "RabbitMQ at {shown} did not answer within {} s: check the host and port, \
                     and that no firewall drops the connection",
                    CONNECT_TIMEOUT.as_secs()
                ),
                url: shown,
            }),
        }
    }
    Err(AmqpError::Unreachable(attempts))
}

/// The lapin URI for one node with the credentials and vhost applied.
fn build_uri(raw: &str, vhost: &str, username: &str, password: &str) -> Result<AMQPUri, String> {
    let url = url::Url::parse(raw.trim())
        .map_err(|e| format!("not a valid AMQP URL ({e}); expected amqp://host:5672"))?;
    let scheme = match url.scheme() {
        "amqp" => AMQPScheme::AMQP,
        "amqps" => AMQPScheme::AMQPS,
        other => {
            return Err(format!(
                "unsupported scheme '{other}': use amqp:// or amqps:// (the management API's \
                 http:// URL is configured separately)"
            ));
        }
    };
    let host = match url.host() {
        Some(url::Host::Domain(d)) => d.to_string(),
        Some(url::Host::Ipv4(ip)) => ip.to_string(),
        Some(url::Host::Ipv6(ip)) => ip.to_string(),
        None => return Err("the URL has no host".to_string()),
    };
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8()
            .map(|c| c.into_owned())
            .map_err(|_| "the URL's credentials are not valid UTF-8 once decoded".to_string())
    };
    let url_user = decode(url.username())?;
    let url_pass = decode(url.password().unwrap_or(""))?;
    let (user, pass) = if !username.is_empty() {
        (username.to_string(), password.to_string())
    } else if !url_user.is_empty() {
        (url_user, url_pass)
    } else {
        ("guest".to_string(), "guest".to_string())
    };
    // lapin's `connection.open` panics on a vhost above 255 bytes (`&str` into a short string).
    if vhost.len() > 255 {
        return Err(format!(
            "the vhost name is {} bytes; AMQP allows 255",
            vhost.len()
        ));
    }
    // lapin's own parser reads the query options (heartbeat, frame_max, ...); the rest we set.
    let mut uri: AMQPUri = url
        .as_str()
        .parse()
        .map_err(|e: String| format!("not a valid AMQP URL: {e}"))?;
    uri.scheme = scheme.clone();
    uri.authority = AMQPAuthority {
        userinfo: AMQPUserInfo {
            username: user,
            password: pass,
        },
        host,
        port: url.port().unwrap_or(match scheme {
            AMQPScheme::AMQPS => 5671,
            AMQPScheme::AMQP => 5672,
        }),
    };
    uri.vhost = vhost.to_string();
    // lapin refuses any frame above the negotiated size, and RabbitMQ sends a message's
    // properties in one frame however large the `x-death` it adds makes them: a header just
    // under the frame when published is over it when dead-lettered. So Warren takes the largest
    // frame the broker offers (lapin keeps the lower of the two), up to `MAX_FRAME`, which bounds
    // how deep a header can be nested and so the stack lapin's parser needs (`DEEP_STACK`).
    // `?frame_max=` in the URL asks for less.
    if uri.query.frame_max.is_none() {
        uri.query.frame_max = Some(MAX_FRAME);
    }
    Ok(uri)
}

/// The largest frame Warren accepts: twice RabbitMQ's default `frame_max` (128 KiB), so a
/// broker configured with `frame_max = 262144` lets Warren read a message whose properties
/// filled a default frame before the broker added `x-death`.
pub const MAX_FRAME: u32 = 262_144;

/// True when lapin closed the connection over a frame larger than the negotiated size: a
/// message whose properties do not fit one frame (RabbitMQ never splits them).
pub fn frame_too_large(e: &lapin::Error) -> bool {
    match e.kind() {
        ErrorKind::ProtocolError(amqp) => {
            amqp.get_id() == 501 || amqp.get_message().as_str().contains("frame too large")
        }
        _ => e.to_string().contains("frame too large"),
    }
}

fn describe_connect_error(shown: &str, user: &str, vhost: &str, e: &lapin::Error) -> String {
    match e.kind() {
        ErrorKind::ProtocolError(amqp) => {
            let code = amqp.get_id();
            let full = amqp.get_message().as_str();
            // RabbitMQ repeats the code name at the start of the text.
            let text = full.split_once(" - ").map_or(full, |(_, rest)| rest);
            match code {
                403 => format!(
                    "RabbitMQ at {shown} refused user '{user}': wrong username or password \
                     (ACCESS_REFUSED)"
                ),
                530 => format!(
                    "RabbitMQ at {shown} refused user '{user}' access to vhost '{vhost}' \
                     ({text}; NOT_ALLOWED): check the vhost name and the user's permissions"
                ),
                _ => format!("RabbitMQ at {shown} closed the connection: {text} ({code})"),
            }
        }
        ErrorKind::IOError(io) => match io.kind() {
            std::io::ErrorKind::ConnectionRefused => format!(
                "nothing accepts connections at {shown} (connection refused): is RabbitMQ \
                 running there, and is this its AMQP port (5672, or 5671 for amqps)?"
            ),
            std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::UnexpectedEof => format!(
                "RabbitMQ at {shown} dropped the connection during the handshake ({io}): a \
                 wrong username or password, a TLS port reached with amqp:// (or the reverse), \
                 or a broker that is shutting down"
            ),
            _ if shown.starts_with("amqps") => format!(
                "TLS connection to {shown} failed: {io}. Check the server certificate, the CA \
                 file and that the host name matches the certificate"
            ),
            _ => format!("cannot reach {shown}: {io}"),
        },
        _ => format!("cannot connect to {shown}: {e}"),
    }
}

/// True when a lapin error is the broker refusing something on a channel (e.g. 404 NOT_FOUND),
/// as opposed to the connection failing.
pub fn soft_error_code(e: &lapin::Error) -> Option<(u16, String)> {
    match e.kind() {
        ErrorKind::ProtocolError(amqp) if matches!(amqp.kind(), AMQPErrorKind::Soft(_)) => {
            Some((amqp.get_id(), amqp.get_message().to_string()))
        }
        _ => None,
    }
}

/// A string too long for an AMQP short string (queue and exchange names, routing keys,
/// consumer tags, most properties): the broker allows 255 bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} is {len} bytes; AMQP allows 255")]
pub struct TooLong {
    pub what: &'static str,
    pub len: usize,
}

/// Every lapin short string Warren builds from a runtime value goes through here: lapin's own
/// `From<&str>` panics above 255 bytes, and names and routing keys come from headers, bodies
/// and the command line. `what` names the value in the error ("routing key", "queue name").
pub fn short(what: &'static str, s: &str) -> Result<ShortString, TooLong> {
    ShortString::try_new(s).map_err(|_| TooLong { what, len: s.len() })
}

/// Why a domain value or table cannot be sent over AMQP.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    #[error("header name '{0}…' is longer than the 255 bytes AMQP allows")]
    LongHeaderName(String),
    #[error("property {name} is longer than the 255 bytes AMQP allows")]
    LongProperty { name: &'static str },
    #[error(
        "header '{header}' is nested {depth} levels deep and was read without its AMQP bytes \
         (from the management API or an edited snapshot), so it cannot be sent as it was; \
         the message is left in the DLQ"
    )]
    TooDeepWithoutBytes { header: String, depth: usize },
    #[error(
        "header '{header}' holds a deeply nested value whose saved bytes are not valid AMQP \
         ({why}); the message is left in the DLQ"
    )]
    BadRaw { header: String, why: String },
    #[error(
        "header '{header}' is nested deeper than {MAX_DEPTH} levels; the message is left in the DLQ"
    )]
    TooDeep { header: String },
}

impl ConvertError {
    /// The same error naming the header it happened in (nested values do not know their name).
    fn in_header(self, name: &str) -> ConvertError {
        let header = name.chars().take(40).collect::<String>();
        match self {
            ConvertError::TooDeepWithoutBytes { depth, .. } => {
                ConvertError::TooDeepWithoutBytes { header, depth }
            }
            ConvertError::BadRaw { why, .. } => ConvertError::BadRaw { header, why },
            ConvertError::TooDeep { .. } => ConvertError::TooDeep { header },
            other => other,
        }
    }
}

/// How many levels of tables and arrays a lapin value has, counted without recursion (a
/// header can be nested as deep as a frame allows: about 52,000 levels in a `MAX_FRAME` frame).
pub fn amqp_depth(v: &AMQPValue) -> usize {
    // Most header values are scalars: no walk, no stack to allocate.
    if !matches!(v, AMQPValue::FieldTable(_) | AMQPValue::FieldArray(_)) {
        return 0;
    }
    let mut deepest = 0;
    let mut stack = vec![(v, 0usize)];
    while let Some((v, level)) = stack.pop() {
        match v {
            AMQPValue::FieldTable(t) => {
                deepest = deepest.max(level + 1);
                stack.extend(t.inner().values().map(|c| (c, level + 1)));
            }
            AMQPValue::FieldArray(a) => {
                deepest = deepest.max(level + 1);
                stack.extend(a.as_slice().iter().map(|c| (c, level + 1)));
            }
            _ => {}
        }
    }
    deepest
}

/// A lapin field value as a domain value. Lossless: every AMQP type has its own variant, and a
/// value nested deeper than [`MAX_DEPTH`] becomes [`HeaderValue::TooDeep`] holding its exact
/// AMQP encoding (no recursion over it, here or later).
pub fn value_from_amqp(v: &AMQPValue) -> HeaderValue {
    let depth = amqp_depth(v);
    if depth > MAX_DEPTH {
        return HeaderValue::TooDeep {
            depth,
            raw: encode_value(v),
        };
    }
    value_from_amqp_within(v)
}

/// The conversion of a value known to be at most `MAX_DEPTH` deep: the recursion is bounded.
fn value_from_amqp_within(v: &AMQPValue) -> HeaderValue {
    match v {
        AMQPValue::Boolean(b) => HeaderValue::Bool(*b),
        AMQPValue::ShortShortInt(i) => HeaderValue::I8(*i),
        AMQPValue::ShortShortUInt(u) => HeaderValue::U8(*u),
        AMQPValue::ShortInt(i) => HeaderValue::I16(*i),
        AMQPValue::ShortUInt(u) => HeaderValue::U16(*u),
        AMQPValue::LongInt(i) => HeaderValue::I32(*i),
        AMQPValue::LongUInt(u) => HeaderValue::U32(*u),
        AMQPValue::LongLongInt(i) => HeaderValue::I64(*i),
        AMQPValue::Float(f) => HeaderValue::F32(*f),
        AMQPValue::Double(d) => HeaderValue::F64(*d),
        AMQPValue::DecimalValue(d) => HeaderValue::Decimal {
            scale: d.scale,
            value: d.value,
        },
        AMQPValue::ShortString(s) => HeaderValue::ShortString(s.as_str().as_bytes().to_vec()),
        AMQPValue::LongString(s) => HeaderValue::LongString(s.as_bytes().to_vec()),
        AMQPValue::FieldArray(a) => {
            HeaderValue::Array(a.as_slice().iter().map(value_from_amqp_within).collect())
        }
        AMQPValue::Timestamp(t) => HeaderValue::Timestamp(*t),
        AMQPValue::FieldTable(t) => HeaderValue::Table(
            t.inner()
                .iter()
                .map(|(k, v)| (k.as_str().to_string(), value_from_amqp_within(v)))
                .collect(),
        ),
        AMQPValue::ByteArray(b) => HeaderValue::Bytes(b.as_slice().to_vec()),
        AMQPValue::Void => HeaderValue::Void,
    }
}

/// A domain value as a lapin field value, ready to publish.
///
/// `ShortString` becomes a lapin `LongString` with the same bytes: AMQP field tables have no
/// short-string type in RabbitMQ's dialect (`s` means a 16-bit integer there) and lapin writes
/// a short-string field with the invalid tag `_`: the broker then closes the whole connection
/// with INTERNAL_ERROR (seen on 3.10.8). So a value read back is a `LongString`; every other
/// variant round-trips exactly. `TooDeep` is decoded from its saved bytes without recursion.
pub fn value_to_amqp(v: &HeaderValue) -> Result<AMQPValue, ConvertError> {
    value_to_amqp_at(v, 1)
}

fn value_to_amqp_at(v: &HeaderValue, level: usize) -> Result<AMQPValue, ConvertError> {
    if level > MAX_DEPTH && matches!(v, HeaderValue::Table(_) | HeaderValue::Array(_)) {
        // Only a value built in code gets here; one read from outside is `TooDeep` instead.
        return Err(ConvertError::TooDeep {
            header: String::new(),
        });
    }
    Ok(match v {
        HeaderValue::Void => AMQPValue::Void,
        HeaderValue::Bool(b) => AMQPValue::Boolean(*b),
        HeaderValue::I8(i) => AMQPValue::ShortShortInt(*i),
        HeaderValue::U8(u) => AMQPValue::ShortShortUInt(*u),
        HeaderValue::I16(i) => AMQPValue::ShortInt(*i),
        HeaderValue::U16(u) => AMQPValue::ShortUInt(*u),
        HeaderValue::I32(i) => AMQPValue::LongInt(*i),
        HeaderValue::U32(u) => AMQPValue::LongUInt(*u),
        HeaderValue::I64(i) => AMQPValue::LongLongInt(*i),
        HeaderValue::F32(f) => AMQPValue::Float(*f),
        HeaderValue::F64(d) => AMQPValue::Double(*d),
        HeaderValue::Decimal { scale, value } => AMQPValue::DecimalValue(DecimalValue {
            scale: *scale,
            value: *value,
        }),
        HeaderValue::ShortString(b) | HeaderValue::LongString(b) => {
            AMQPValue::LongString(LongString::from(b.clone()))
        }
        HeaderValue::Timestamp(t) => AMQPValue::Timestamp(*t),
        HeaderValue::Table(t) => AMQPValue::FieldTable(table_to_amqp_at(t, level + 1)?),
        HeaderValue::Array(a) => AMQPValue::FieldArray(FieldArray::from(
            a.iter()
                .map(|v| value_to_amqp_at(v, level + 1))
                .collect::<Result<Vec<_>, _>>()?,
        )),
        HeaderValue::Bytes(b) => AMQPValue::ByteArray(ByteArray::from(b.clone())),
        HeaderValue::TooDeep { depth, raw } => {
            if raw.is_empty() {
                return Err(ConvertError::TooDeepWithoutBytes {
                    header: String::new(),
                    depth: *depth,
                });
            }
            // Received values fit in a frame; a bigger one (an edited snapshot) could nest
            // deeper than even lapin's enlarged stack allows.
            if raw.len() > MAX_FRAME as usize {
                return Err(ConvertError::BadRaw {
                    header: String::new(),
                    why: format!("{} bytes, more than a {MAX_FRAME}-byte frame", raw.len()),
                });
            }
            decode_value(raw).map_err(|why| ConvertError::BadRaw {
                header: String::new(),
                why,
            })?
        }
    })
}

/// A lapin table as a domain table. lapin keeps tables sorted by key (a `BTreeMap`), so the
/// order is the keys' order, not the wire order.
pub fn table_from_amqp(t: &FieldTable) -> Table {
    t.inner()
        .iter()
        .map(|(k, v)| (k.as_str().to_string(), value_from_amqp(v)))
        .collect()
}

/// A domain table as a lapin table. Fails on a key longer than 255 bytes, or on a deep value
/// that cannot be sent as it was received.
pub fn table_to_amqp(t: &Table) -> Result<FieldTable, ConvertError> {
    table_to_amqp_at(t, 1)
}

fn table_to_amqp_at(t: &Table, level: usize) -> Result<FieldTable, ConvertError> {
    let mut out = FieldTable::default();
    for (k, v) in t.iter() {
        let key = ShortString::try_new(k)
            .map_err(|_| ConvertError::LongHeaderName(k.chars().take(40).collect::<String>()))?;
        let value =
            value_to_amqp_at(v, level).map_err(|e| if level == 1 { e.in_header(k) } else { e })?;
        out.insert(key, value);
    }
    Ok(out)
}

/// The AMQP type letter lapin writes for a value, except that a short string is written as a
/// long string (`S`), as [`value_to_amqp`] sends it.
fn type_letter(v: &AMQPValue) -> u8 {
    match v {
        AMQPValue::ShortString(_) => b'S',
        other => other.get_type().get_id() as u8,
    }
}

/// The AMQP field-value encoding (type letter and payload, big-endian, as lapin writes it) of
/// a value of any depth, built with an explicit stack instead of recursion.
pub fn encode_value(v: &AMQPValue) -> Vec<u8> {
    enum Step<'a> {
        Value(&'a AMQPValue),
        Key(&'a str),
        /// Writes the length of the table or array whose 4-byte length field is at `.0`.
        Close(usize),
    }
    fn long_bytes(out: &mut Vec<u8>, b: &[u8]) {
        out.extend_from_slice(&(b.len() as u32).to_be_bytes());
        out.extend_from_slice(b);
    }
    let mut out = Vec::new();
    let mut stack = vec![Step::Value(v)];
    while let Some(step) = stack.pop() {
        match step {
            Step::Key(k) => {
                // Keys come from lapin's `ShortString`: at most 255 bytes.
                out.push(k.len().min(255) as u8);
                out.extend_from_slice(&k.as_bytes()[..k.len().min(255)]);
            }
            Step::Close(at) => {
                let len = (out.len() - at - 4) as u32;
                out[at..at + 4].copy_from_slice(&len.to_be_bytes());
            }
            Step::Value(v) => {
                out.push(type_letter(v));
                match v {
                    AMQPValue::Boolean(b) => out.push(u8::from(*b)),
                    AMQPValue::ShortShortInt(i) => out.extend_from_slice(&i.to_be_bytes()),
                    AMQPValue::ShortShortUInt(u) => out.push(*u),
                    AMQPValue::ShortInt(i) => out.extend_from_slice(&i.to_be_bytes()),
                    AMQPValue::ShortUInt(u) => out.extend_from_slice(&u.to_be_bytes()),
                    AMQPValue::LongInt(i) => out.extend_from_slice(&i.to_be_bytes()),
                    AMQPValue::LongUInt(u) => out.extend_from_slice(&u.to_be_bytes()),
                    AMQPValue::LongLongInt(i) => out.extend_from_slice(&i.to_be_bytes()),
                    AMQPValue::Float(f) => out.extend_from_slice(&f.to_be_bytes()),
                    AMQPValue::Double(d) => out.extend_from_slice(&d.to_be_bytes()),
                    AMQPValue::DecimalValue(d) => {
                        out.push(d.scale);
                        out.extend_from_slice(&d.value.to_be_bytes());
                    }
                    AMQPValue::ShortString(s) => long_bytes(&mut out, s.as_str().as_bytes()),
                    AMQPValue::LongString(s) => long_bytes(&mut out, s.as_bytes()),
                    AMQPValue::Timestamp(t) => out.extend_from_slice(&t.to_be_bytes()),
                    AMQPValue::ByteArray(b) => long_bytes(&mut out, b.as_slice()),
                    AMQPValue::Void => {}
                    AMQPValue::FieldTable(t) => {
                        let at = out.len();
                        out.extend_from_slice(&[0; 4]);
                        stack.push(Step::Close(at));
                        for (k, v) in t.inner().iter().rev() {
                            stack.push(Step::Value(v));
                            stack.push(Step::Key(k.as_str()));
                        }
                    }
                    AMQPValue::FieldArray(a) => {
                        let at = out.len();
                        out.extend_from_slice(&[0; 4]);
                        stack.push(Step::Close(at));
                        for v in a.as_slice().iter().rev() {
                            stack.push(Step::Value(v));
                        }
                    }
                }
            }
        }
    }
    out
}

/// Reads one AMQP field value (type letter and payload) of any depth from `raw`, which must
/// hold exactly that value, with an explicit stack instead of recursion. The inverse of
/// [`encode_value`]; types are read as lapin reads them (RabbitMQ's dialect).
pub fn decode_value(raw: &[u8]) -> Result<AMQPValue, String> {
    enum Open {
        Table {
            end: usize,
            table: FieldTable,
            key: Option<ShortString>,
        },
        Array {
            end: usize,
            items: Vec<AMQPValue>,
        },
    }
    struct Reader<'a> {
        buf: &'a [u8],
        pos: usize,
    }
    impl<'a> Reader<'a> {
        fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
            let end = self.pos.checked_add(n).filter(|e| *e <= self.buf.len());
            let end = end.ok_or_else(|| format!("cut short at byte {}", self.pos))?;
            let s = &self.buf[self.pos..end];
            self.pos = end;
            Ok(s)
        }
        fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
            let mut a = [0; N];
            a.copy_from_slice(self.take(N)?);
            Ok(a)
        }
        fn u32(&mut self) -> Result<u32, String> {
            self.array().map(u32::from_be_bytes)
        }
    }
    let mut r = Reader { buf: raw, pos: 0 };
    let mut stack: Vec<Open> = Vec::new();
    loop {
        // Close every container that has been read to its end.
        let mut finished: Option<AMQPValue> = None;
        if let Some(top) = stack.last() {
            let end = match top {
                Open::Table { end, .. } | Open::Array { end, .. } => *end,
            };
            if r.pos > end {
                return Err(format!("a value runs past its container at byte {}", r.pos));
            }
            if r.pos == end {
                finished = match stack.pop() {
                    Some(Open::Table { table, .. }) => Some(AMQPValue::FieldTable(table)),
                    Some(Open::Array { items, .. }) => Some(AMQPValue::FieldArray(items.into())),
                    None => None,
                };
            }
        }
        let value = match finished {
            Some(v) => v,
            None => {
                if let Some(Open::Table { key, .. }) = stack.last_mut() {
                    let len = r.array::<1>()?[0] as usize;
                    let bytes = r.take(len)?;
                    let text = std::str::from_utf8(bytes)
                        .map_err(|_| format!("a table key is not UTF-8 at byte {}", r.pos))?;
                    *key = Some(ShortString::try_new(text).unwrap_or_default());
                }
                let letter = r.array::<1>()?[0];
                match letter {
                    b't' => AMQPValue::Boolean(r.array::<1>()?[0] != 0),
                    b'b' => AMQPValue::ShortShortInt(i8::from_be_bytes(r.array()?)),
                    b'B' => AMQPValue::ShortShortUInt(r.array::<1>()?[0]),
                    b's' | b'U' => AMQPValue::ShortInt(i16::from_be_bytes(r.array()?)),
                    b'u' => AMQPValue::ShortUInt(u16::from_be_bytes(r.array()?)),
                    b'I' => AMQPValue::LongInt(i32::from_be_bytes(r.array()?)),
                    b'i' => AMQPValue::LongUInt(r.u32()?),
                    b'l' | b'L' => AMQPValue::LongLongInt(i64::from_be_bytes(r.array()?)),
                    b'f' => AMQPValue::Float(f32::from_be_bytes(r.array()?)),
                    b'd' => AMQPValue::Double(f64::from_be_bytes(r.array()?)),
                    b'D' => {
                        let scale = r.array::<1>()?[0];
                        let value = r.u32()?;
                        AMQPValue::DecimalValue(DecimalValue { scale, value })
                    }
                    b'S' => {
                        let n = r.u32()? as usize;
                        AMQPValue::LongString(LongString::from(r.take(n)?.to_vec()))
                    }
                    b'x' => {
                        let n = r.u32()? as usize;
                        AMQPValue::ByteArray(ByteArray::from(r.take(n)?.to_vec()))
                    }
                    b'T' => AMQPValue::Timestamp(u64::from_be_bytes(r.array()?)),
                    b'V' => AMQPValue::Void,
                    b'F' | b'A' => {
                        let n = r.u32()? as usize;
                        let end = r.pos.checked_add(n).filter(|e| *e <= raw.len());
                        let end = end.ok_or_else(|| format!("cut short at byte {}", r.pos))?;
                        stack.push(if letter == b'F' {
                            Open::Table {
                                end,
                                table: FieldTable::default(),
                                key: None,
                            }
                        } else {
                            Open::Array {
                                end,
                                items: Vec::new(),
                            }
                        });
                        continue;
                    }
                    other => {
                        return Err(format!(
                            "unknown type letter 0x{other:02x} at byte {}",
                            r.pos - 1
                        ));
                    }
                }
            }
        };
        match stack.last_mut() {
            None => {
                return if r.pos == raw.len() {
                    Ok(value)
                } else {
                    Err(format!("{} bytes left over", raw.len() - r.pos))
                };
            }
            Some(Open::Table { table, key, .. }) => {
                table.insert(key.take().unwrap_or_default(), value);
            }
            Some(Open::Array { items, .. }) => items.push(value),
        }
    }
}

/// Drops a lapin value of any depth without overflowing the stack: lapin's types drop
/// recursively, about 100 bytes of stack per level, and a header can be 26,000 levels deep.
/// A deep value is dropped on a thread of its own with room for that; a shallow one here.
pub fn drop_deep(v: BasicProperties) {
    let deep = v
        .headers()
        .as_ref()
        .is_some_and(|h| h.inner().values().any(|v| amqp_depth(v) > MAX_DEPTH));
    if !deep {
        return;
    }
    // If no thread can be started the value is leaked (it is at most one frame), not dropped.
    let v = std::mem::ManuallyDrop::new(v);
    let _ = std::thread::Builder::new()
        .name("warren-drop".into())
        .stack_size(DEEP_STACK)
        .spawn(move || drop(std::mem::ManuallyDrop::into_inner(v)));
}

/// Stack for work over values nested as deep as a frame allows. lapin (amq-protocol) parses a
/// frame recursively on its IO thread, measured at about 5 KiB a level with dependencies at
/// `opt-level = 1`: a 5,000-deep header overflowed the default 2 MiB and 26,200 levels (the
/// most a 128 KiB frame can hold, 5 bytes a level) needed between 128 and 256 MiB; a
/// [`MAX_FRAME`] frame holds twice that. `main` gives every thread that does not ask for its
/// own size (lapin's IO thread) this much; it is address space, used only as deep as a header
/// actually goes.
pub const DEEP_STACK: usize = 1 << 30;

/// lapin basic properties as the domain's properties and headers.
pub fn properties_from_amqp(p: &BasicProperties) -> (Properties, Table) {
    let s = |v: &Option<ShortString>| v.as_ref().map(|s| s.as_str().to_string());
    let props = Properties {
        content_type: s(p.content_type()),
        content_encoding: s(p.content_encoding()),
        delivery_mode: *p.delivery_mode(),
        priority: *p.priority(),
        correlation_id: s(p.correlation_id()),
        reply_to: s(p.reply_to()),
        expiration: s(p.expiration()),
        message_id: s(p.message_id()),
        timestamp: *p.timestamp(),
        kind: s(p.kind()),
        user_id: s(p.user_id()),
        app_id: s(p.app_id()),
        cluster_id: s(p.cluster_id()),
    };
    let headers = p
        .headers()
        .as_ref()
        .map(table_from_amqp)
        .unwrap_or_default();
    (props, headers)
}

/// The domain's properties and headers as lapin basic properties, ready to publish. An empty
/// header table is sent as no headers.
pub fn properties_to_amqp(
    p: &Properties,
    headers: &Table,
) -> Result<BasicProperties, ConvertError> {
    fn short(v: &Option<String>, name: &'static str) -> Result<Option<ShortString>, ConvertError> {
        v.as_ref()
            .map(|s| {
                ShortString::try_new(s.as_str()).map_err(|_| ConvertError::LongProperty { name })
            })
            .transpose()
    }
    let mut out = BasicProperties::default();
    if let Some(v) = short(&p.content_type, "content_type")? {
        out = out.with_content_type(v);
    }
    if let Some(v) = short(&p.content_encoding, "content_encoding")? {
        out = out.with_content_encoding(v);
    }
    if !headers.is_empty() {
        out = out.with_headers(table_to_amqp(headers)?);
    }
    if let Some(v) = p.delivery_mode {
        out = out.with_delivery_mode(v);
    }
    if let Some(v) = p.priority {
        out = out.with_priority(v);
    }
    if let Some(v) = short(&p.correlation_id, "correlation_id")? {
        out = out.with_correlation_id(v);
    }
    if let Some(v) = short(&p.reply_to, "reply_to")? {
        out = out.with_reply_to(v);
    }
    if let Some(v) = short(&p.expiration, "expiration")? {
        out = out.with_expiration(v);
    }
    if let Some(v) = short(&p.message_id, "message_id")? {
        out = out.with_message_id(v);
    }
    if let Some(v) = p.timestamp {
        out = out.with_timestamp(v);
    }
    if let Some(v) = short(&p.kind, "type")? {
        out = out.with_type(v);
    }
    if let Some(v) = short(&p.user_id, "user_id")? {
        out = out.with_user_id(v);
    }
    if let Some(v) = short(&p.app_id, "app_id")? {
        out = out.with_app_id(v);
    }
    if let Some(v) = short(&p.cluster_id, "cluster_id")? {
        out = out.with_cluster_id(v);
    }
    Ok(out)
}

/// Feeds every property of `p`, headers included (their types too), into `h`: two property
/// sets that hash alike are, but for a collision, the same on the wire. Walks nested headers
/// with a stack of its own, so a header nested thousands of levels deep costs no recursion.
/// (What identifies a returned publish, once per message: formatting the properties as text
/// cost several times this.)
pub fn hash_properties(h: &mut impl std::hash::Hasher, p: &BasicProperties) {
    fn short(h: &mut impl std::hash::Hasher, tag: u8, v: &Option<ShortString>) {
        h.write_u8(tag);
        if let Some(s) = v {
            h.write_usize(s.as_str().len());
            h.write(s.as_str().as_bytes());
        }
    }
    short(h, 1, p.content_type());
    short(h, 2, p.content_encoding());
    short(h, 3, p.correlation_id());
    short(h, 4, p.reply_to());
    short(h, 5, p.expiration());
    short(h, 6, p.message_id());
    short(h, 7, p.kind());
    short(h, 8, p.user_id());
    short(h, 9, p.app_id());
    short(h, 10, p.cluster_id());
    h.write_u8(11);
    if let Some(m) = p.delivery_mode() {
        h.write_u8(*m);
    }
    h.write_u8(12);
    if let Some(m) = p.priority() {
        h.write_u8(*m);
    }
    h.write_u8(13);
    if let Some(t) = p.timestamp() {
        h.write_u64(*t);
    }
    h.write_u8(14);
    if let Some(headers) = p.headers() {
        hash_headers(h, headers);
    }
}

/// Feeds a header table into `h`, nested tables and arrays included, with a stack of its own.
fn hash_headers(h: &mut impl std::hash::Hasher, headers: &FieldTable) {
    // What is left to feed: a value, or a table's or an array's end (so nesting is part of the
    // hash, not only the sequence of leaves).
    enum Item<'a> {
        Value(&'a AMQPValue),
        Key(&'a str),
        End,
    }
    fn table<'a>(t: &'a FieldTable, stack: &mut Vec<Item<'a>>) {
        stack.push(Item::End);
        // Reversed, so keys come off the stack in the table's order.
        for (k, v) in t.inner().iter().rev() {
            stack.push(Item::Value(v));
            stack.push(Item::Key(k.as_str()));
        }
    }
    let mut stack: Vec<Item<'_>> = Vec::new();
    table(headers, &mut stack);
    while let Some(item) = stack.pop() {
        match item {
            Item::End => h.write_u8(0xff),
            Item::Key(k) => {
                h.write_usize(k.len());
                h.write(k.as_bytes());
            }
            Item::Value(v) => {
                hash_value(h, v);
                match v {
                    AMQPValue::FieldArray(a) => {
                        stack.push(Item::End);
                        for v in a.as_slice().iter().rev() {
                            stack.push(Item::Value(v));
                        }
                    }
                    AMQPValue::FieldTable(t) => table(t, &mut stack),
                    _ => {}
                }
            }
        }
    }
}

/// Feeds one header value into `h`: its type's tag, and a scalar's content (a table's or an
/// array's contents are `hash_headers`' to walk).
fn hash_value(h: &mut impl std::hash::Hasher, v: &AMQPValue) {
    match v {
        AMQPValue::Boolean(b) => {
            h.write_u8(b'T');
            h.write_u8(u8::from(*b));
        }
        AMQPValue::ShortShortInt(n) => {
            h.write_u8(b'b');
            h.write_i8(*n);
        }
        AMQPValue::ShortShortUInt(n) => {
            h.write_u8(b'B');
            h.write_u8(*n);
        }
        AMQPValue::ShortInt(n) => {
            h.write_u8(b's');
            h.write_i16(*n);
        }
        AMQPValue::ShortUInt(n) => {
            h.write_u8(b'u');
            h.write_u16(*n);
        }
        AMQPValue::LongInt(n) => {
            h.write_u8(b'I');
            h.write_i32(*n);
        }
        AMQPValue::LongUInt(n) => {
            h.write_u8(b'i');
            h.write_u32(*n);
        }
        AMQPValue::LongLongInt(n) => {
            h.write_u8(b'l');
            h.write_i64(*n);
        }
        AMQPValue::Float(f) => {
            h.write_u8(b'f');
            h.write_u32(f.to_bits());
        }
        AMQPValue::Double(f) => {
            h.write_u8(b'd');
            h.write_u64(f.to_bits());
        }
        AMQPValue::DecimalValue(d) => {
            h.write_u8(b'D');
            h.write_u8(d.scale);
            h.write_u32(d.value);
        }
        AMQPValue::ShortString(s) => {
            h.write_u8(b'S');
            h.write_usize(s.as_str().len());
            h.write(s.as_str().as_bytes());
        }
        AMQPValue::LongString(s) => {
            h.write_u8(b'L');
            h.write_usize(s.as_bytes().len());
            h.write(s.as_bytes());
        }
        AMQPValue::ByteArray(b) => {
            h.write_u8(b'x');
            h.write_usize(b.as_slice().len());
            h.write(b.as_slice());
        }
        AMQPValue::Timestamp(t) => {
            h.write_u8(b't');
            h.write_u64(*t);
        }
        AMQPValue::Void => h.write_u8(b'V'),
        AMQPValue::FieldArray(_) => h.write_u8(b'A'),
        AMQPValue::FieldTable(_) => h.write_u8(b'F'),
    }
}

/// A counter header as u64 whatever integer type (or numeric string) carries it.
fn header_u64(headers: &Table, key: &str) -> Option<u64> {
    headers.get_i64(key).and_then(|v| u64::try_from(v).ok())
}

/// A delivery as a dead letter read from `queue` at `position`. The body is cut at `body_cap`
/// bytes (its memory released) while `body_size` keeps the real size. `x-delivery-count`
/// (quorum queues) and `x-stream-offset` (streams) are read from the headers.
pub fn dead_letter_from_delivery(
    queue: &str,
    position: u64,
    delivery: lapin::message::Delivery,
    body_cap: usize,
) -> DeadLetter {
    let (properties, mut headers) = properties_from_amqp(&delivery.properties);
    // The conversion measured every header: only one it kept as `TooDeep` is deeper than a
    // plain drop can take.
    let deep = headers
        .iter()
        .any(|(_, v)| matches!(v, HeaderValue::TooDeep { .. }));
    let stream_offset = header_u64(&headers, "x-stream-offset");
    if stream_offset.is_some() {
        unwrap_archived(&mut headers);
    }
    let mut body = delivery.data;
    let body_size = body.len() as u64;
    if body.len() > body_cap {
        body.truncate(body_cap);
        body.shrink_to_fit();
    }
    let dl = DeadLetter {
        queue: queue.to_string(),
        position,
        delivery: Delivery {
            exchange: delivery.exchange.as_str().to_string(),
            routing_key: delivery.routing_key.as_str().to_string(),
            redelivered: delivery.redelivered,
            delivery_count: header_u64(&headers, "x-delivery-count"),
            stream_offset,
        },
        properties,
        headers,
        body,
        body_size,
    };
    if deep {
        drop_deep(delivery.properties);
    }
    dl
}

/// A message read from Warren's archive stream gets its own headers back, exactly as they
/// were, from [`ORIGINAL_HEADERS`](crate::domain::archive::ORIGINAL_HEADERS), with the archive's
/// four and the stream's offset beside them. Anything else (not archived by Warren, or an
/// encoding that does not read back) stays as delivered.
fn unwrap_archived(headers: &mut Table) {
    use crate::domain::archive::{HEADERS, ORIGINAL_HEADERS};
    let Some(HeaderValue::LongString(raw)) = headers.get(ORIGINAL_HEADERS) else {
        return;
    };
    let Ok(AMQPValue::FieldTable(own)) = decode_value(raw) else {
        return;
    };
    let mut back = table_from_amqp(&own);
    let signed = [crate::domain::archive::ORIGINAL_USER_ID, "x-stream-offset"];
    for k in HEADERS.iter().copied().chain(signed) {
        if let Some(v) = headers.get(k) {
            back.insert(k, v.clone());
        }
    }
    *headers = back;
}

/// How many messages a queue holds, from a passive declare: the broker's own count, without the
/// management statistics' lag. A missing queue is a 404 that closes `channel`.
pub async fn passive_depth(channel: &lapin::Channel, queue: ShortString) -> lapin::Result<u64> {
    let q = channel
        .queue_declare(
            queue,
            lapin::options::QueueDeclareOptions {
                passive: true,
                ..lapin::options::QueueDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await?;
    Ok(u64::from(q.message_count()))
}

/// Declares a stream (the archive's, the audit's): durable, `x-queue-type = stream`, `x-max-age`
/// as configured. Needs configure permission on the name; the broker's refusal is returned in its
/// words.
pub async fn declare_stream(
    conn: &lapin::Connection,
    name: &str,
    max_age: Option<&str>,
) -> Result<(), DeclareError> {
    let name = short("the stream's name", name).map_err(|e| DeclareError::Other(e.to_string()))?;
    let ch = conn
        .create_channel()
        .await
        .map_err(|e| DeclareError::Other(e.to_string()))?;
    let mut args = lapin::types::FieldTable::default();
    args.insert(
        "x-queue-type".into(),
        lapin::types::AMQPValue::LongString(lapin::types::LongString::from("stream")),
    );
    if let Some(max_age) = max_age {
        args.insert(
            "x-max-age".into(),
            lapin::types::AMQPValue::LongString(lapin::types::LongString::from(max_age)),
        );
    }
    let r = ch
        .queue_declare(
            name,
            lapin::options::QueueDeclareOptions {
                durable: true,
                ..Default::default()
            },
            args,
        )
        .await;
    if ch.status().connected() {
        let _ = ch.close(200, "stream declared".into()).await;
    }
    match r {
        Ok(_) => Ok(()),
        Err(e) => Err(match soft_error_code(&e) {
            Some((403, text)) => DeclareError::NoPermission(text),
            Some((code, text)) => DeclareError::Other(format!("{text} ({code})")),
            None => DeclareError::Other(e.to_string()),
        }),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DeclareError {
    #[error("the broker refused to create it (configure permission is needed): {0}")]
    NoPermission(String),
    #[error("creating it failed: {0}")]
    Other(String),
}

#[cfg(test)]
#[path = "amqp_tests.rs"]
mod tests;
