use super::*;

#[test]
fn archive_keys_default_and_are_checked() {
    assert!(valid_max_age("30D") && valid_max_age("12h") && valid_max_age("1Y"));
    for bad in ["", "D", "30", "0D", "-3D", "30d ", "3 D", "30W"] {
        assert!(!valid_max_age(bad), "{bad}");
    }
    let none = |_: &str| None;
    let cfg = |t: &str| Config::parse(t, Path::new("c.toml")).unwrap();
    let o = Overrides::default();
    let t = resolve(&cfg(""), &o, &none).unwrap();
    assert_eq!(t.archive, ArchiveSettings::default());
    assert_eq!(t.archive.stream, "warren.archive");
    assert_eq!(t.archive.max_age, "30D");
    let t = resolve(
        &cfg("[contexts.a]\nmanagement_urls = [\"http://h:15672\"]\narchive_stream = \"ops.archive\"\narchive_max_age = \"7D\"\narchive_local = true\narchive_create = true\n"),
        &o,
        &none,
    )
    .unwrap();
    assert_eq!(
        t.archive,
        ArchiveSettings {
            stream: "ops.archive".into(),
            max_age: "7D".into(),
            local: true,
            create: true
        }
    );
    let e = resolve(
        &cfg(
            "[contexts.a]\nmanagement_urls = [\"http://h:15672\"]\narchive_max_age = \"a month\"\n",
        ),
        &o,
        &none,
    )
    .unwrap_err();
    assert!(e.to_string().contains("archive_max_age 'a month'"), "{e}");
}

#[test]
fn conventions_default_replace_and_refuse_blank_names() {
    let parse = |t: &str| Config::parse(t, Path::new("c.toml")).and_then(|c| c.settings());
    let d = parse("").unwrap().conventions;
    assert_eq!(d, Conventions::default());
    assert_eq!(d.retry_counter_headers, vec!["x-retry-count", "x-retries"]);
    assert_eq!(
        d.error_text_headers,
        vec!["x-last-error", "x-error", "x-exception"]
    );
    let own = parse("[conventions]\nretry_counter_headers = [\"attempt\"]\n")
        .unwrap()
        .conventions;
    assert_eq!(own.retry_counter_headers, vec!["attempt"]);
    // The other key keeps its default.
    assert_eq!(own.error_text_headers, d.error_text_headers);
    let blank = parse("[conventions]\nerror_text_headers = [\"x-error\", \" \"]\n");
    assert_eq!(
        blank.map(|_| ()).map_err(|e| e.to_string()),
        Err("conventions.error_text_headers lists an empty header name: remove it, or name the header".to_string())
    );
    assert!(parse("[conventions]\nretry_headers = []\n").is_err());
}

#[test]
fn redaction() {
    assert_eq!(
        redact_url("http://ops:s3cret@host:15672/"),
        "http://host:15672/"
    );
    assert_eq!(redact_url("amqp://ops:s3cret@host/vh"), "amqp://host/vh");
    assert_eq!(
        redact_url("amqp://ops:s3c@ret@bad host/x"),
        "amqp://bad host/x"
    );
    assert_eq!(redact_url("no scheme at all"), "no scheme at all");
    // A typo'd separator: nothing parses, and the password still must not show.
    assert_eq!(redact_url("amqp//user:PASS@host"), "amqp//***@host");
    assert_eq!(redact_url("http:/ops:PASS@h:15672/x"), "http://h:15672/x");
    assert_eq!(redact_url("user:PASS@host"), "***@host");
    assert_eq!(format!("{:?}", Secret::new("pw")), "***");
}

#[test]
fn derived_urls() {
    let a = Url::parse("amqps://rabbit.example.com:5671/orders").unwrap();
    assert_eq!(
        management_url_for(&a).unwrap().as_str(),
        "https://rabbit.example.com:15671/"
    );
    let m = Url::parse("http://[::1]:15672").unwrap();
    assert_eq!(amqp_url_for(&m).unwrap().as_str(), "amqp://[::1]:5672");
    assert_eq!(
        management_url_for(&Url::parse("amqp://h").unwrap())
            .unwrap()
            .as_str(),
        "http://h:15672/"
    );
    // Not a default port: nothing is guessed.
    assert_eq!(
        management_url_for(&Url::parse("amqp://h:5674").unwrap()),
        None
    );
    assert_eq!(
        management_url_for(&Url::parse("amqps://h:5672").unwrap()),
        None
    );
    assert_eq!(amqp_url_for(&Url::parse("http://h:15674").unwrap()), None);
    assert_eq!(amqp_url_for(&Url::parse("https://h").unwrap()), None);
    assert_eq!(
        amqp_url_for(&Url::parse("https://h:15671/rabbit/").unwrap()),
        None
    );
    assert_eq!(
        vhost_of_amqp_url(&Url::parse("amqp://h/%2F").unwrap()).as_deref(),
        Some("/")
    );
    assert_eq!(vhost_of_amqp_url(&Url::parse("amqp://h/").unwrap()), None);
}
