//! The management API's replies as the broker sends them, read with serde and turned into the
//! domain's types. Tolerant by design, because brokers differ by version and plugin: every field
//! is optional and one of the wrong type reads as absent, and a list entry that is not an
//! object, or lacks what identifies it (a queue's name, a binding's ends), is skipped — one odd
//! entry never costs the whole list.

use serde::de::{Deserialize, DeserializeOwned, Deserializer};
use serde_json::Value;

use crate::domain::discovery::{
    self, DestinationType, ExchangeInfo, ExchangeKind, JsonMap, QueueInfo, QueueType,
};

use super::{ConnectionInfo, WhoAmI};

/// A value read as `T` when it is one, and as nothing when the broker sent something else.
#[derive(Debug)]
pub(super) struct Lenient<T>(Option<T>);

impl<T> Default for Lenient<T> {
    fn default() -> Self {
        Lenient(None)
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        Ok(Lenient(T::deserialize(v).ok()))
    }
}

impl<T> Lenient<T> {
    fn get(self) -> Option<T> {
        self.0
    }
}

impl Lenient<String> {
    /// Absent, or the empty string some versions send for "none".
    fn non_empty(self) -> Option<String> {
        self.0.filter(|s| !s.is_empty())
    }
}

impl Lenient<JsonMap> {
    /// An object, or empty for the `[]` / `""` / missing forms brokers send for "nothing".
    fn object(self) -> JsonMap {
        self.0.unwrap_or_default()
    }
}

/// One reply read as `T`; `None` when it is not a JSON object (a struct would otherwise accept
/// a list positionally).
pub(super) fn one<T: DeserializeOwned>(v: &Value) -> Option<T> {
    v.is_object().then(|| T::deserialize(v).ok()).flatten()
}

/// Every entry of a list reply that reads as `T`; an answer that is not a list has none.
pub(super) fn entries<T: DeserializeOwned>(items: &[Value]) -> impl Iterator<Item = T> {
    items.iter().filter_map(one)
}

/// The vhost an entry of an all-vhosts listing names.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct InVhost {
    vhost: Lenient<String>,
}

/// A list reply's entries, or none when it is not a list.
pub(super) fn array(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or(&[])
}

/// What a list reply holds: its entries, each taken by `keep` as it is read (a list, or the
/// `items` of a paged shape), or `None` when it is neither.
pub(super) fn each_entry<T>(
    body: &str,
    keep: impl FnMut(&Value) -> Option<T>,
) -> Result<Option<Vec<T>>, serde_json::Error> {
    if body.trim().is_empty() {
        return Ok(Some(Vec::new()));
    }
    let mut de = serde_json::Deserializer::from_str(body);
    let listing = serde::de::DeserializeSeed::deserialize(Listing(keep), &mut de)?;
    de.end()?;
    Ok(listing)
}

/// Reads a listing one entry at a time: each entry is parsed into a `Value`, kept as the domain's
/// type and dropped before the next, so a listing costs its text and what is kept, never a tree of
/// the whole reply (a 50 MB listing parsed whole took about 1 GB).
struct Listing<F>(F);

impl<'de, T, F: FnMut(&Value) -> Option<T>> serde::de::DeserializeSeed<'de> for Listing<F> {
    type Value = Option<Vec<T>>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, T, F: FnMut(&Value) -> Option<T>> serde::de::Visitor<'de> for Listing<F> {
    type Value = Option<Vec<T>>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        mut self,
        mut seq: A,
    ) -> Result<Self::Value, A::Error> {
        let mut kept = Vec::new();
        while let Some(entry) = seq.next_element::<Value>()? {
            kept.extend((self.0)(&entry));
        }
        Ok(Some(kept))
    }

    /// The paged shape: `{"items": [...], ...}`.
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut keep = Some(self.0);
        let mut found = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match (key.as_ref(), keep.take()) {
                ("items", Some(f)) => found = map.next_value_seed(Listing(f))?,
                (_, f) => {
                    keep = f;
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        Ok(found)
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }
}

/// The vhost of an entry of an all-vhosts listing (`None`: `vhost`, the one listed), and the
/// entry as the domain's type.
pub(super) fn in_vhost<T, W: DeserializeOwned>(
    item: &Value,
    vhost: Option<&str>,
    into_domain: &impl Fn(W) -> Option<T>,
) -> Option<(String, T)> {
    let v = match vhost {
        Some(v) => v.to_string(),
        None => one::<InVhost>(item)?.vhost.get()?,
    };
    Some((v, into_domain(one::<W>(item)?)?))
}

/// `GET /api/overview` with the columns Warren asks for.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(super) struct Overview {
    rabbitmq_version: Lenient<String>,
    product_version: Lenient<String>,
    product_name: Lenient<String>,
    cluster_name: Lenient<String>,
}

impl Overview {
    /// The version (3.x and 4.x say `rabbitmq_version`; some products only `product_version`),
    /// the product and the cluster name.
    pub(super) fn into_parts(self) -> (String, Option<String>, Option<String>) {
        let version = self
            .rabbitmq_version
            .get()
            .or_else(|| self.product_version.get())
            .unwrap_or_default();
        (version, self.product_name.get(), self.cluster_name.get())
    }
}

/// Tags are a list on 3.9+ and a comma-separated string before.
#[derive(Debug, serde::Deserialize)]
#[serde(untagged)]
enum Tags {
    List(Vec<Lenient<String>>),
    Joined(String),
}

impl Tags {
    fn into_vec(self) -> Vec<String> {
        match self {
            Tags::List(tags) => tags.into_iter().filter_map(Lenient::get).collect(),
            Tags::Joined(text) => text
                .split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_string)
                .collect(),
        }
    }
}

/// `GET /api/whoami`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(super) struct Whoami {
    name: Lenient<String>,
    tags: Lenient<Tags>,
}

impl Whoami {
    /// Who the broker says we are; `fallback` (the configured user) when it does not say.
    pub(super) fn into_domain(self, fallback: &str) -> WhoAmI {
        WhoAmI {
            name: self.name.get().unwrap_or_else(|| fallback.to_string()),
            tags: self.tags.get().map(Tags::into_vec).unwrap_or_default(),
        }
    }
}

/// `GET /api/permissions/{vhost}/{user}`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(super) struct Permissions {
    configure: Lenient<String>,
    write: Lenient<String>,
    read: Lenient<String>,
}

impl From<Permissions> for super::Permissions {
    fn from(p: Permissions) -> super::Permissions {
        super::Permissions {
            configure: p.configure.get().unwrap_or_default(),
            write: p.write.get().unwrap_or_default(),
            read: p.read.get().unwrap_or_default(),
        }
    }
}

/// One queue of `GET /api/queues/{vhost}` (the columns in `QUEUE_COLUMNS`) or
/// `GET /api/queues/{vhost}/{name}`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(super) struct Queue {
    name: Lenient<String>,
    #[serde(rename = "type")]
    kind: Lenient<String>,
    arguments: Lenient<JsonMap>,
    durable: Lenient<bool>,
    auto_delete: Lenient<bool>,
    policy: Lenient<String>,
    effective_policy_definition: Lenient<JsonMap>,
    delivery_limit: Lenient<i64>,
    messages: Lenient<u64>,
    messages_ready: Lenient<u64>,
    messages_unacknowledged: Lenient<u64>,
    consumers: Lenient<u64>,
    message_bytes: Lenient<u64>,
    messages_dlx: Lenient<u64>,
}

impl Queue {
    /// The queue, or `None` without a name.
    pub(super) fn into_domain(self) -> Option<QueueInfo> {
        let name = self.name.get()?;
        let arguments = discovery::bounded_arguments(self.arguments.object());
        // Older brokers leave `type` out; the argument says it then.
        let type_text = self.kind.get().or_else(|| {
            arguments
                .get("x-queue-type")
                .and_then(Value::as_str)
                .map(str::to_string)
        });
        let effective = self.effective_policy_definition.object();
        Some(QueueInfo {
            name,
            queue_type: type_text.map_or(QueueType::Classic, |t| QueueType::parse(&t)),
            durable: self.durable.get().unwrap_or(true),
            auto_delete: self.auto_delete.get().unwrap_or(true),
            arguments,
            policy: self.policy.non_empty(),
            effective_policy: (!effective.is_empty()).then_some(effective),
            reported_delivery_limit: self.delivery_limit.get(),
            messages: self.messages.get(),
            messages_ready: self.messages_ready.get(),
            messages_unacknowledged: self.messages_unacknowledged.get(),
            consumers: self.consumers.get(),
            message_bytes: self.message_bytes.get(),
            messages_dlx: self.messages_dlx.get(),
        })
    }
}

/// One policy of `GET /api/policies/{vhost}`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(super) struct Policy {
    name: Lenient<String>,
    pattern: Lenient<String>,
    #[serde(rename = "apply-to")]
    apply_to: Lenient<String>,
    priority: Lenient<i64>,
    definition: Lenient<JsonMap>,
}

impl Policy {
    /// The policy, or `None` without a name.
    pub(super) fn into_domain(self) -> Option<discovery::Policy> {
        Some(discovery::Policy {
            name: self.name.get()?,
            pattern: self.pattern.get().unwrap_or_default(),
            apply_to: self.apply_to.get().unwrap_or_else(|| "all".to_string()),
            priority: self.priority.get().unwrap_or(0),
            definition: self.definition.object(),
        })
    }
}

/// One exchange of `GET /api/exchanges/{vhost}?columns=name,type`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(super) struct Exchange {
    name: Lenient<String>,
    #[serde(rename = "type")]
    kind: Lenient<String>,
}

impl Exchange {
    /// The exchange, or `None` without a name.
    pub(super) fn into_domain(self) -> Option<ExchangeInfo> {
        Some(ExchangeInfo {
            name: self.name.get()?,
            kind: ExchangeKind::parse(&self.kind.get().unwrap_or_default()),
        })
    }
}

/// One binding of `GET /api/bindings/{vhost}` or an exchange's `bindings/source`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(super) struct Binding {
    source: Lenient<String>,
    destination: Lenient<String>,
    destination_type: Lenient<String>,
    routing_key: Lenient<String>,
    arguments: Lenient<JsonMap>,
}

impl Binding {
    /// The binding, or `None` when either end or the destination's kind is missing.
    pub(super) fn into_domain(self) -> Option<discovery::Binding> {
        let destination_type = match self.destination_type.get()?.as_str() {
            "exchange" => DestinationType::Exchange,
            _ => DestinationType::Queue,
        };
        Some(discovery::Binding {
            source: self.source.get()?,
            destination: self.destination.get()?,
            destination_type,
            routing_key: self.routing_key.get().unwrap_or_default(),
            arguments: self.arguments.object(),
        })
    }
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct ClientProperties {
    connection_name: Lenient<String>,
}

/// One connection of `GET /api/connections` or a vhost's `connections`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(super) struct Connection {
    name: Lenient<String>,
    user: Lenient<String>,
    vhost: Lenient<String>,
    /// Read as an object only: a struct would take a list's items positionally.
    client_properties: Lenient<Value>,
}

impl Connection {
    /// The connection, or `None` without the broker's name for it.
    pub(super) fn into_domain(self) -> Option<ConnectionInfo> {
        Some(ConnectionInfo {
            name: self.name.get()?,
            user: self.user.get(),
            vhost: self.vhost.get(),
            client_name: self
                .client_properties
                .get()
                .as_ref()
                .and_then(one::<ClientProperties>)
                .and_then(|p| p.connection_name.get()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn queue(v: Value) -> Option<QueueInfo> {
        one::<Queue>(&v).and_then(Queue::into_domain)
    }

    #[test]
    fn queue_json_shapes() {
        let q = queue(json!({
            "name": "q", "arguments": [], "effective_policy_definition": "",
            "type": "quorum", "messages": 3
        }))
        .unwrap();
        assert!(q.arguments.is_empty());
        assert_eq!(q.effective_policy, None);
        assert_eq!(q.queue_type, QueueType::Quorum);
        assert_eq!(q.messages, Some(3));
        assert_eq!(q.consumers, None);
        assert!(q.durable);
        let q = queue(json!({"name": "c", "effective_policy_definition": [], "arguments": {"x-queue-type": "stream"}})).unwrap();
        assert_eq!(q.queue_type, QueueType::Stream);
        assert!(queue(json!({"name": 5})).is_none());
        assert!(queue(json!({"type": "quorum"})).is_none());
        assert!(queue(json!(["q", "quorum"])).is_none());
        assert!(queue(json!("q")).is_none());
        let q = queue(json!({"name": "bare"})).unwrap();
        // Not said: read as auto-delete, without a consumer, which is safe either way.
        assert!(q.auto_delete);
        assert_eq!(
            QueueInfo {
                auto_delete: false,
                ..q
            },
            QueueInfo::named("bare")
        );
        assert!(
            !queue(json!({"name": "d", "auto_delete": false}))
                .unwrap()
                .auto_delete
        );
    }

    #[test]
    fn wrong_typed_fields_read_as_absent() {
        let q = queue(json!({
            "name": "q", "type": 7, "arguments": "x", "durable": "yes", "policy": "",
            "effective_policy_definition": {"delivery-limit": -1}, "delivery_limit": 2.5,
            "messages": -1, "messages_ready": "3", "messages_unacknowledged": null,
            "consumers": 1.0, "message_bytes": 10
        }))
        .unwrap();
        assert_eq!(q.queue_type, QueueType::Classic);
        assert!(q.arguments.is_empty() && q.durable);
        assert_eq!(q.policy, None);
        assert_eq!(
            q.effective_policy
                .and_then(|p| p.get("delivery-limit").cloned()),
            Some(json!(-1))
        );
        assert_eq!(q.reported_delivery_limit, None);
        assert_eq!(
            (q.messages, q.messages_ready, q.messages_unacknowledged),
            (None, None, None)
        );
        assert_eq!((q.consumers, q.message_bytes), (None, Some(10)));
        // A plugin's type is kept by name; `type` wins over the argument.
        let q = queue(json!({"name": "m", "type": "rabbit_mqtt_qos0_queue",
            "arguments": {"x-queue-type": "quorum"}, "policy": "p", "durable": false}))
        .unwrap();
        assert_eq!(q.queue_type.as_str(), "rabbit_mqtt_qos0_queue");
        assert_eq!(q.policy.as_deref(), Some("p"));
        assert!(!q.durable);
    }

    #[test]
    fn one_bad_entry_does_not_cost_the_list() {
        let list = json!([
            {"name": "a", "messages": 1},
            {"messages": 2},
            17,
            {"name": "b", "messages": "many"},
        ]);
        let names: Vec<String> = entries::<Queue>(array(&list))
            .filter_map(Queue::into_domain)
            .map(|q| q.name)
            .collect();
        assert_eq!(names, vec!["a", "b"]);
        assert_eq!(entries::<Queue>(array(&json!({"items": []}))).count(), 0);
    }

    #[test]
    fn a_listing_is_read_entry_by_entry_in_both_shapes() {
        let name = |item: &Value| {
            one::<Queue>(item)
                .and_then(Queue::into_domain)
                .map(|q| q.name)
        };
        let list = r#"[{"name": "a"}, 17, {"messages": 2}, {"name": "b", "x": [1, {"y": 2}]}]"#;
        assert_eq!(
            each_entry(list, name).unwrap(),
            Some(vec!["a".into(), "b".into()])
        );
        let paged = r#"{"page": 1, "items": [{"name": "c"}], "total": 1}"#;
        assert_eq!(each_entry(paged, name).unwrap(), Some(vec!["c".into()]));
        for not_a_list in [r#"{"page": 1}"#, "17", r#""x""#, "null", "true"] {
            assert_eq!(each_entry(not_a_list, name).unwrap(), None, "{not_a_list}");
        }
        assert_eq!(each_entry("  ", name).unwrap(), Some(vec![]));
        assert!(each_entry(r#"[{"name": "a"}"#, name).is_err());
        assert!(each_entry(r#"[{"name": "a"}] x"#, name).is_err());
        let all = r#"[{"vhost": "v", "name": "q"}, {"name": "no vhost"}]"#;
        let kept = each_entry(all, |i| in_vhost(i, None, &Queue::into_domain))
            .unwrap()
            .unwrap();
        assert_eq!(kept.len(), 1);
        assert_eq!((kept[0].0.as_str(), kept[0].1.name.as_str()), ("v", "q"));
    }

    #[test]
    fn policies_exchanges_and_bindings() {
        let p = one::<Policy>(&json!({"name": "p", "pattern": "^a", "priority": "high",
            "definition": {"message-ttl": 5}}))
        .and_then(Policy::into_domain)
        .unwrap();
        assert_eq!((p.apply_to.as_str(), p.priority), ("all", 0));
        assert_eq!(p.definition.get("message-ttl"), Some(&json!(5)));
        let p = one::<Policy>(&json!({"name": "q", "apply-to": "queues", "priority": 3,
            "definition": []}))
        .and_then(Policy::into_domain)
        .unwrap();
        assert_eq!((p.apply_to.as_str(), p.priority), ("queues", 3));
        assert!(p.definition.is_empty() && p.pattern.is_empty());
        assert!(
            one::<Policy>(&json!({"pattern": "x"}))
                .and_then(Policy::into_domain)
                .is_none()
        );

        let e = one::<Exchange>(&json!({"name": "x", "type": "topic"}))
            .and_then(Exchange::into_domain)
            .unwrap();
        assert_eq!(e.kind, ExchangeKind::Topic);
        let e = one::<Exchange>(&json!({"name": "", "type": null}))
            .and_then(Exchange::into_domain)
            .unwrap();
        assert_eq!(e.kind, ExchangeKind::Other(String::new()));

        let binding = |v: Value| one::<Binding>(&v).and_then(Binding::into_domain);
        let b = binding(json!({"source": "x", "destination": "y",
            "destination_type": "exchange", "routing_key": "k", "arguments": {"a": 1}}))
        .unwrap();
        assert_eq!(b.destination_type, DestinationType::Exchange);
        assert_eq!((b.routing_key.as_str(), b.arguments.len()), ("k", 1));
        let b = binding(
            json!({"source": "", "destination": "q", "destination_type": "queue",
            "routing_key": 5, "arguments": ""}),
        )
        .unwrap();
        assert_eq!(b, discovery::Binding::to_queue("", "q", ""));
        assert!(binding(json!({"source": "x", "destination": "q"})).is_none());
        assert!(binding(json!({"destination": "q", "destination_type": "queue"})).is_none());
    }

    #[test]
    fn overview_whoami_permissions_connections() {
        let (version, product, cluster) = one::<Overview>(&json!({
            "rabbitmq_version": 4, "product_version": "4.3.6", "cluster_name": "rabbit@h"
        }))
        .unwrap_or_default()
        .into_parts();
        assert_eq!(version, "4.3.6");
        assert_eq!((product, cluster.as_deref()), (None, Some("rabbit@h")));
        let (version, _, _) = one::<Overview>(&Value::Null)
            .unwrap_or_default()
            .into_parts();
        assert_eq!(version, "");

        let me = |v: Value| one::<Whoami>(&v).unwrap_or_default().into_domain("guest");
        assert_eq!(
            me(json!({"name": "ann", "tags": "management, monitoring"})).tags,
            vec!["management", "monitoring"]
        );
        let w = me(json!({"tags": ["administrator", 3, "management"]}));
        assert_eq!(w.name, "guest");
        assert_eq!(w.tags, vec!["administrator", "management"]);
        assert!(me(json!({"name": "ann", "tags": {"a": 1}})).tags.is_empty());
        assert_eq!(me(Value::Null).name, "guest");

        let p: super::super::Permissions =
            one::<Permissions>(&json!({"configure": "", "write": 1, "read": ".*"}))
                .unwrap_or_default()
                .into();
        assert_eq!(
            p,
            super::super::Permissions {
                configure: String::new(),
                write: String::new(),
                read: ".*".into()
            }
        );

        let list = json!([
            {"name": "c1", "user": "guest", "vhost": "/",
             "client_properties": {"connection_name": "warren"}},
            {"name": "c2", "client_properties": []},
            {"name": "c3", "client_properties": ["warren"]},
            {"user": "nameless"},
        ]);
        let conns: Vec<ConnectionInfo> = entries::<Connection>(array(&list))
            .filter_map(Connection::into_domain)
            .collect();
        assert_eq!(conns.len(), 3);
        assert_eq!(conns[0].client_name.as_deref(), Some("warren"));
        assert_eq!(conns[1].client_name, None);
        assert_eq!(conns[1].user, None);
        assert_eq!(conns[2].client_name, None);
    }
}
