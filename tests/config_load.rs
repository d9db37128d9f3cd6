//! Configuration: the example file parses into its contexts, credentials come from environment
//! variables and commands, errors name what is known, and passwords never show.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use warren::config::{self, Config, ConfigError, Overrides};

fn example() -> Config {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config.example.toml");
    let text = std::fs::read_to_string(&path).expect("config.example.toml is readable");
    Config::parse(&text, &path).expect("config.example.toml parses")
}

fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k: &str| map.get(k).cloned()
}

fn parse(text: &str) -> Config {
    Config::parse(text, Path::new("/tmp/test-config.toml")).expect("test config parses")
}

#[test]
fn example_file_parses_into_its_contexts() {
    let c = example();
    assert_eq!(c.default_context.as_deref(), Some("local"));
    assert_eq!(
        c.contexts.keys().collect::<Vec<_>>(),
        vec!["local", "prod-eu"]
    );
    let settings = c.settings().expect("example settings are valid");
    assert_eq!(settings.discovery_patterns.len(), 2);
    assert_eq!(settings.browse.body_cap_bytes, 1024 * 1024);
    assert_eq!(settings.browse.page_size, 500);
    assert_eq!(settings.browse.quorum_safety_margin, 5);
    assert_eq!(settings.replay.window, 10_000);
    assert_eq!(settings.replay.rate, None);

    // The default context, with its password from the environment.
    let env = env_of(&[("WARREN_LOCAL_PASSWORD", "local-pw")]);
    let t = config::resolve(&c, &Overrides::default(), &env).expect("local context resolves");
    assert_eq!(t.context, "local");
    assert_eq!(t.management_urls[0].as_str(), "http://127.0.0.1:15672/");
    assert_eq!(t.amqp_urls[0].as_str(), "amqp://127.0.0.1:5672");
    assert_eq!(t.vhost, "/");
    assert!(!t.read_only);
    assert_eq!(t.credentials.username, "guest");
    assert_eq!(t.credentials.password.expose(), "local-pw");

    // The cluster context: three nodes each, TLS, read-only, a CA file, its password from a
    // command (`pass` is not installed here, so that fails, naming the context).
    let over = Overrides {
        context: Some("prod-eu".into()),
        ..Default::default()
    };
    match config::resolve(&c, &over, &env) {
        Err(ConfigError::PasswordCommand { context, .. }) => assert_eq!(context, "prod-eu"),
        other => panic!("expected the password command to fail, got {other:?}"),
    }
    let prod = &c.contexts["prod-eu"];
    assert_eq!(
        prod.ca_file.as_deref(),
        Some(Path::new("/etc/ssl/certs/prod-eu-ca.pem"))
    );
    assert!(prod.read_only);
    assert_eq!(prod.color, Some(config::ContextColor::Red));
    assert_eq!(prod.label.as_deref(), Some("PROD"));
}

#[test]
fn password_from_command_is_trimmed_and_failures_explained() {
    let c = parse(
        r#"
        [contexts.a]
        management_urls = ["https://rabbit.example.com:15671"]
        username = "ops"
        password_command = "printf '  s3cret-from-cmd \n'"
        read_only = true

        [contexts.b]
        amqp_urls = "amqp://b.example.com"
        password_command = "echo 'vault: sealed' >&2; exit 3"
        "#,
    );
    let over = Overrides {
        context: Some("a".into()),
        ..Default::default()
    };
    let t = config::resolve(&c, &over, &env_of(&[])).expect("context a resolves");
    assert_eq!(t.credentials.username, "ops");
    assert_eq!(t.credentials.password.expose(), "s3cret-from-cmd");
    assert!(t.read_only);
    // Derived AMQP URL: same host, amqps on 5671.
    assert_eq!(t.amqp_urls[0].as_str(), "amqps://rabbit.example.com:5671");

    let over = Overrides {
        context: Some("b".into()),
        ..Default::default()
    };
    let err = config::resolve(&c, &over, &env_of(&[])).expect_err("failing command is an error");
    let text = err.to_string();
    assert!(
        text.contains("context 'b'")
            && text.contains("exit status: 3")
            && text.contains("vault: sealed"),
        "{text}"
    );
}

#[test]
fn password_env_missing_names_the_variable() {
    let c = parse(
        r#"
        default_context = "x"
        [contexts.x]
        amqp_urls = ["amqp://h"]
        password_env = "WARREN_TEST_SURELY_UNSET"
        "#,
    );
    let err =
        config::resolve(&c, &Overrides::default(), &env_of(&[])).expect_err("missing env var");
    assert!(
        err.to_string().contains("WARREN_TEST_SURELY_UNSET"),
        "{err}"
    );
    let t = config::resolve(
        &c,
        &Overrides::default(),
        &env_of(&[("WARREN_TEST_SURELY_UNSET", "pw")]),
    )
    .unwrap();
    assert_eq!(t.credentials.password.expose(), "pw");
    assert_eq!(t.management_urls[0].as_str(), "http://h:15672/");
}

#[test]
fn unknown_context_lists_the_known_ones() {
    let c = example();
    let over = Overrides {
        context: Some("staging".into()),
        ..Default::default()
    };
    let err = config::resolve(&c, &over, &env_of(&[])).expect_err("unknown context");
    let text = err.to_string();
    assert!(
        text.contains("'staging'") && text.contains("local, prod-eu"),
        "{text}"
    );

    let two = parse(
        "[contexts.a]\namqp_urls = [\"amqp://a\"]\n[contexts.b]\namqp_urls = [\"amqp://b\"]\n",
    );
    let err = config::resolve(&two, &Overrides::default(), &env_of(&[])).expect_err("no default");
    assert!(
        err.to_string().contains("--context") && err.to_string().contains("a, b"),
        "{err}"
    );
}

#[test]
fn a_named_missing_config_file_is_an_error() {
    let over = Overrides {
        config_path: Some(PathBuf::from("/nonexistent/warren/config.toml")),
        ..Default::default()
    };
    match config::load(&over) {
        Err(ConfigError::Read { path, .. }) => {
            assert_eq!(path, PathBuf::from("/nonexistent/warren/config.toml"))
        }
        other => panic!("expected a read error, got {other:?}"),
    }
}

#[test]
fn urls_with_credentials_are_redacted_everywhere() {
    let over = Overrides {
        amqp_url: Some("amqps://ops:s3cr%2Fet@rabbit.example.com:5671/orders".into()),
        ..Default::default()
    };
    let t = config::resolve(&Config::default(), &over, &env_of(&[])).expect("one-off target");
    assert_eq!(t.context, config::COMMAND_LINE_CONTEXT);
    assert_eq!(t.vhost, "orders");
    assert_eq!(t.credentials.username, "ops");
    assert_eq!(t.credentials.password.expose(), "s3cr/et");
    assert_eq!(
        t.management_urls[0].as_str(),
        "https://rabbit.example.com:15671/"
    );
    let shown = format!("{t} {t:?}");
    assert!(!shown.contains("s3cr"), "password leaked: {shown}");
    assert!(shown.contains("***"));
    // The connection applies vhost and credentials to each URL (broker::amqp's URI tests cover
    // the encoding).
    assert_eq!(t.amqp_urls[0].scheme(), "amqps");
    assert_eq!(format!("{}", t.credentials.password), "***");

    // --vhost beats the URL's vhost; --read-only always applies.
    let over = Overrides {
        management_url: Some("http://ops:pw@h:15672".into()),
        vhost: Some("/".into()),
        read_only: true,
        ..Default::default()
    };
    let t = config::resolve(&Config::default(), &over, &env_of(&[])).unwrap();
    assert_eq!((t.vhost.as_str(), t.read_only), ("/", true));
    assert_eq!(t.amqp_urls[0].as_str(), "amqp://h:5672");

    // A bad URL's error does not repeat its password.
    let over = Overrides {
        management_url: Some("http://ops:hunter2@host:notaport".into()),
        ..Default::default()
    };
    let err = config::resolve(&Config::default(), &over, &env_of(&[])).expect_err("bad port");
    assert!(
        !err.to_string().contains("hunter2") && err.to_string().contains("host"),
        "{err}"
    );
    let over = Overrides {
        amqp_url: Some("http://ops:hunter2@host".into()),
        ..Default::default()
    };
    let err = config::resolve(&Config::default(), &over, &env_of(&[])).expect_err("wrong scheme");
    assert!(
        !err.to_string().contains("hunter2") && err.to_string().contains("amqp or amqps"),
        "{err}"
    );
}

#[test]
fn a_password_key_in_the_file_is_rejected_without_quoting_it() {
    let err = Config::parse(
        "[contexts.x]\namqp_urls = [\"amqp://h\"]\npassword = \"hunter2\"\n",
        Path::new("/tmp/c.toml"),
    )
    .expect_err("password key is not allowed");
    let text = err.to_string();
    assert!(
        text.contains("line 3") && text.contains("password"),
        "{text}"
    );
    assert!(!text.contains("hunter2"), "{text}");
}

#[test]
fn no_file_and_no_urls_means_the_local_broker() {
    let t = config::resolve(&Config::default(), &Overrides::default(), &env_of(&[])).unwrap();
    assert_eq!(t.context, config::LOCAL_CONTEXT);
    assert_eq!(t.management_urls[0].as_str(), "http://127.0.0.1:15672/");
    assert_eq!(
        (
            t.credentials.username.as_str(),
            t.credentials.password.expose()
        ),
        ("guest", "guest")
    );
    let bad = parse("[discovery]\npatterns = [\"(unclosed\"]\n");
    let err = config::resolve(&bad, &Overrides::default(), &env_of(&[])).expect_err("bad regex");
    assert!(err.to_string().contains("(unclosed"), "{err}");
}

#[test]
fn a_context_has_a_colour_and_a_label() {
    let c = parse(
        r#"
[contexts.prod]
management_urls = ["http://127.0.0.1:15672"]
color = "Red"
label = " PROD "

[contexts.dev]
management_urls = ["http://127.0.0.1:15672"]
"#,
    );
    let over = |name: &str| Overrides {
        context: Some(name.into()),
        ..Default::default()
    };
    let prod = config::resolve(&c, &over("prod"), &|_| None).expect("prod resolves");
    assert_eq!(prod.color, Some(config::ContextColor::Red));
    assert_eq!(prod.label.as_deref(), Some("PROD"), "trimmed");
    let dev = config::resolve(&c, &over("dev"), &|_| None).expect("dev resolves");
    assert_eq!((dev.color, dev.label), (None, None));
}

#[test]
fn an_unknown_colour_is_a_config_error_that_lists_the_known_ones() {
    let text =
        "[contexts.prod]\nmanagement_urls = [\"http://127.0.0.1:15672\"]\ncolor = \"pink\"\n";
    let err = Config::parse(text, Path::new("/tmp/test-config.toml"))
        .expect_err("pink is not a colour Warren knows");
    let shown = err.to_string();
    assert!(matches!(err, ConfigError::Parse { line: 3, .. }), "{shown}");
    assert!(
        shown.contains("\"pink\" is not a colour Warren knows"),
        "{shown}"
    );
    assert!(shown.contains("red, green, yellow"), "{shown}");
}

#[test]
fn the_audit_stream_is_configured_per_context_and_a_bad_retention_is_refused() {
    let over = |name: &str| Overrides {
        context: Some(name.into()),
        ..Default::default()
    };
    let c = parse(
        "[contexts.prod]\nmanagement_urls = [\"http://127.0.0.1:15672\"]\naudit_stream = \"ops.audit\"\naudit_max_age = \"90D\"\ncreate_audit_stream = true\n\
         [contexts.off]\nmanagement_urls = [\"http://127.0.0.1:15672\"]\naudit_stream = \"\"\n\
         [contexts.dev]\nmanagement_urls = [\"http://127.0.0.1:15672\"]\n\
         [contexts.bad]\nmanagement_urls = [\"http://127.0.0.1:15672\"]\naudit_max_age = \"30 days\"\n",
    );
    let prod = config::resolve(&c, &over("prod"), &|_| None).expect("prod resolves");
    assert_eq!(prod.audit.stream.as_deref(), Some("ops.audit"));
    assert_eq!(prod.audit.max_age, "90D");
    assert_eq!(prod.audit.create, Some(true));
    let off = config::resolve(&c, &over("off"), &|_| None).expect("off resolves");
    assert_eq!(off.audit.stream, None);
    let dev = config::resolve(&c, &over("dev"), &|_| None).expect("dev resolves");
    assert_eq!(dev.audit.stream.as_deref(), Some("warren.audit"));
    assert_eq!(dev.audit.max_age, "30D");
    assert_eq!(dev.audit.create, None);
    let err = config::resolve(&c, &over("bad"), &|_| None).expect_err("not a max-age");
    assert!(err.to_string().contains("audit_max_age '30 days'"), "{err}");
}
