//! URLs: the management and AMQP URLs a target uses, the credentials a URL carries, and each
//! API's URL derived from the other's on RabbitMQ's default ports.

use super::*;

/// A target's URLs, and the credentials the first URL that carried any gave.
pub(super) struct Urls {
    pub(super) management: Vec<Url>,
    pub(super) amqp: Vec<Url>,
    pub(super) credentials: Option<UrlCredentials>,
}

/// The management and AMQP URLs (the command line's, else the context's, else localhost's),
/// each derived from the other on RabbitMQ's default ports, and the credentials one carried.
pub(super) fn urls_of(
    overrides: &Overrides,
    ctx: Option<&ContextConfig>,
    has_url_override: bool,
    context_name: &str,
) -> Result<Urls, ConfigError> {
    // URLs, with any credentials pulled out.
    let mut url_creds: Option<UrlCredentials> = None;
    let mut take = |text: &str, what: &'static str| -> Result<Url, ConfigError> {
        let (url, creds) = parse_url(text, what)?;
        if url_creds.is_none() {
            url_creds = creds;
        }
        Ok(url)
    };
    let (mut management_urls, mut amqp_urls) = (Vec::new(), Vec::new());
    if has_url_override {
        if let Some(m) = &overrides.management_url {
            management_urls.push(take(m, "management")?);
        }
        if let Some(a) = &overrides.amqp_url {
            amqp_urls.push(take(a, "AMQP")?);
        }
    } else if let Some(c) = ctx {
        for m in c.management_urls.to_vec() {
            management_urls.push(take(&m, "management")?);
        }
        for a in c.amqp_urls.to_vec() {
            amqp_urls.push(take(&a, "AMQP")?);
        }
    } else {
        management_urls.push(take("http://127.0.0.1:15672", "management")?);
        amqp_urls.push(take("amqp://127.0.0.1:5672", "AMQP")?);
    }
    // One URL is derived from the other only on RabbitMQ's default ports: a broker on another
    // port says nothing about where its other API listens, and guessing reaches another broker.
    if management_urls.is_empty() {
        management_urls = amqp_urls
            .iter()
            .map(|u| {
                management_url_for(u).ok_or_else(|| ConfigError::CannotDerive {
                    context: context_name.to_string(),
                    url: u.to_string(),
                })
            })
            .collect::<Result<_, _>>()?;
    }
    // Without a derivable AMQP URL the list stays empty: commands that need only the management
    // API work, and the first AMQP use says what to pass (`Session::amqp`).
    if amqp_urls.is_empty() {
        amqp_urls = management_urls.iter().filter_map(amqp_url_for).collect();
    }
    if management_urls.is_empty() {
        return Err(ConfigError::NoUrls {
            context: context_name.to_string(),
            what: "management",
        });
    }
    Ok(Urls {
        management: management_urls,
        amqp: amqp_urls,
        credentials: url_creds,
    })
}

/// `user` and maybe `password` from a URL's userinfo.
pub(super) type UrlCredentials = (String, Option<String>);

/// Parses a URL, checks its scheme, and splits off `user:password@` (percent-decoded).
fn parse_url(text: &str, what: &'static str) -> Result<(Url, Option<UrlCredentials>), ConfigError> {
    let bad = |reason: String| ConfigError::BadUrl {
        what,
        url: redact_url(text),
        reason,
    };
    let mut url = Url::parse(text.trim()).map_err(|e| bad(parse_failure(text, what, &e)))?;
    let allowed: &[&str] = if what == "AMQP" {
        &["amqp", "amqps"]
    } else {
        &["http", "https"]
    };
    if !allowed.contains(&url.scheme()) {
        return Err(bad(format!("the scheme must be {}", allowed.join(" or "))));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(bad("it names no host".to_string()));
    }
    let decode = |s: &str| percent_decode_str(s).decode_utf8_lossy().into_owned();
    let creds = if url.username().is_empty() {
        None
    } else {
        Some((decode(url.username()), url.password().map(decode)))
    };
    let _ = url.set_password(None);
    let _ = url.set_username("");
    Ok((url, creds))
}

/// Why a URL did not parse, in the user's words: most often the scheme was left out.
fn parse_failure(text: &str, what: &str, e: &url::ParseError) -> String {
    let scheme = if what == "AMQP" { "amqp" } else { "http" };
    match e {
        url::ParseError::RelativeUrlWithoutBase => format!(
            "it has no scheme: write it as {scheme}://{}",
            redact_url(text.trim())
        ),
        other => other.to_string(),
    }
}

/// The management URL of the node an AMQP URL points at, on RabbitMQ's default ports only:
/// `amqp://h:5672` (or no port) → `http://h:15672/`, `amqps://h:5671` → `https://h:15671/`. Any
/// other port gives `None`: the management port of such a broker cannot be guessed.
pub fn management_url_for(amqp: &Url) -> Option<Url> {
    let (scheme, default, port) = if amqp.scheme() == "amqps" {
        ("https", 5671, 15671)
    } else {
        ("http", 5672, 15672)
    };
    if amqp.port().is_some_and(|p| p != default) {
        return None;
    }
    Url::parse(&format!("{scheme}://{}:{port}/", bracket(amqp.host_str()?))).ok()
}

/// The AMQP URL of the node a management URL points at, on the default ports only:
/// `http://h:15672` → `amqp://h:5672`, `https://h:15671` → `amqps://h:5671`. Another port, no
/// port, or a path prefix (a proxy) gives `None`.
pub fn amqp_url_for(management: &Url) -> Option<Url> {
    let (scheme, default, port) = if management.scheme() == "https" {
        ("amqps", 15671, 5671)
    } else {
        ("amqp", 15672, 5672)
    };
    if management.port() != Some(default) || !management.path().trim_end_matches('/').is_empty() {
        return None;
    }
    Url::parse(&format!(
        "{scheme}://{}:{port}",
        bracket(management.host_str()?)
    ))
    .ok()
}

fn bracket(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

/// The vhost named by an AMQP URL's path: `/orders` → `orders`, `/%2F` → `/`; none or empty →
/// `None` (the default vhost).
pub(super) fn vhost_of_amqp_url(url: &Url) -> Option<String> {
    let path = url.path().strip_prefix('/').unwrap_or(url.path());
    if path.is_empty() {
        return None;
    }
    Some(percent_decode_str(path).decode_utf8_lossy().into_owned())
}
