//! What MassTransit, Spring Cloud Stream and NServiceBus republish to their error queues after
//! a consumer failed, with the exact header names, envelopes and stack traces they write. The
//! broker does nothing but route: these messages are published where the framework puts them.

use jiff::Timestamp;
use lapin::ExchangeKind::{Direct, Fanout, Topic};
use serde_json::{Value, json};

use super::{
    Binding, Message, Scenario, ago, dead_letters, dl_routing_key, dlx, guid, json_props, s, table,
    work,
};
use crate::domain::message::Properties;
use crate::domain::value::{HeaderValue, Table};

const CARRIER_DOWN: &str = "Shipping.Carriers.CarrierUnavailableException";
const INVALID_OPERATION: &str = "System.InvalidOperationException";

/// The consumer's faults: (exception type, message, its line that threw, retries, minutes ago).
#[rustfmt::skip]
const SHIPPING_FAULTS: [(&str, &str, u32, i32, i64); 6] = [
    (CARRIER_DOWN,      "Carrier DHL unavailable",             48, 3, 41),
    (CARRIER_DOWN,      "Carrier DHL unavailable",             48, 3, 37),
    (CARRIER_DOWN,      "Carrier DHL unavailable",             48, 3, 36),
    (CARRIER_DOWN,      "Carrier DHL unavailable",             48, 3, 22),
    (INVALID_OPERATION, "Order 10457 has no shipping address", 31, 0, 19),
    (INVALID_OPERATION, "Order 10463 has no shipping address", 31, 0, 8),
];

/// Messages MassTransit skipped: no consumer on the endpoint handles their type.
const SHIPPING_SKIPPED: usize = 2;

/// MassTransit's endpoint `shipping-label` (an exchange and a queue of the same name, the
/// message type's exchange bound to it) and what its `_error` and `_skipped` queues receive:
/// the envelope as the body, the fault in `MT-Fault-*` headers, the host in `MT-Host-*`.
pub fn masstransit() -> Scenario {
    let mut messages: Vec<Message> = SHIPPING_FAULTS
        .iter()
        .enumerate()
        .map(|(i, &(exception, message, line, retries, minutes))| {
            let id = guid(&format!("shipping-label fault {i}"));
            let order = 10_450 + i * 3;
            let body = envelope(
                &id,
                "Shipping.Contracts:CreateShippingLabel",
                json!({"orderId": order, "carrier": "DHL", "service": "express", "weightKg": 1.2 + i as f64 * 0.4}),
            );
            let trace = format!(
                "   at Shipping.Consumers.CreateShippingLabelConsumer.Consume(ConsumeContext`1 context) in /src/Shipping.Worker/Consumers/CreateShippingLabelConsumer.cs:line {line}\n   \
                 at MassTransit.DependencyInjection.ScopeConsumerFactory`1.Send[TMessage](ConsumeContext`1 context, IPipe`1 next) in /_/src/MassTransit/DependencyInjection/DependencyInjection/ScopeConsumerFactory.cs:line 22\n   \
                 at MassTransit.Middleware.ConsumerMessageFilter`2.MassTransit.IFilter<MassTransit.ConsumeContext<TMessage>>.Send(ConsumeContext`1 context, IPipe`1 next) in /_/src/MassTransit/Middleware/ConsumerMessageFilter.cs:line 48"
            );
            let mut h = table([
                ("MT-Reason", s("fault")),
                ("MT-Fault-ExceptionType", s(exception)),
                ("MT-Fault-Message", s(message)),
                ("MT-Fault-StackTrace", s(&trace)),
                ("MT-Fault-Timestamp", s(&ago(minutes).to_string())),
                ("MT-Fault-InputAddress", s("rabbitmq://localhost/shipping-label")),
                ("MT-Fault-ConsumerType", s("Shipping.Consumers.CreateShippingLabelConsumer")),
                ("MT-Fault-MessageType", s("urn:message:Shipping.Contracts:CreateShippingLabel")),
            ]);
            if retries > 0 {
                h.insert("MT-Fault-RetryCount", HeaderValue::I32(retries));
            }
            add_masstransit_host(&mut h);
            masstransit_message("shipping-label_error", &id, &body).headers(h)
        })
        .collect();
    messages.extend((0..SHIPPING_SKIPPED).map(|i| {
        let id = guid(&format!("shipping-label skipped {i}"));
        let body = envelope(
            &id,
            "Shipping.Contracts:CancelShippingLabel",
            json!({"orderId": 10_470 + i, "reason": "customer-cancelled"}),
        );
        let mut h = table([("MT-Reason", s("skip"))]);
        add_masstransit_host(&mut h);
        masstransit_message("shipping-label_skipped", &id, &body).headers(h)
    }));
    Scenario {
        exchanges: vec![
            ("shipping-label", Fanout),
            ("shipping-label_error", Fanout),
            ("shipping-label_skipped", Fanout),
            ("Shipping.Contracts:CreateShippingLabel", Fanout),
        ],
        queues: vec![
            work("shipping-label", 0, "MassTransit endpoint"),
            dead_letters(
                "shipping-label_error",
                SHIPPING_FAULTS.len(),
                "MassTransit: 2 kinds of fault in CreateShippingLabelConsumer",
            ),
            dead_letters(
                "shipping-label_skipped",
                SHIPPING_SKIPPED,
                "MassTransit: no consumer for CancelShippingLabel",
            ),
        ],
        bindings: vec![
            Binding::queue("shipping-label", "shipping-label", ""),
            Binding::queue("shipping-label_error", "shipping-label_error", ""),
            Binding::queue("shipping-label_skipped", "shipping-label_skipped", ""),
            Binding::exchange(
                "shipping-label",
                "Shipping.Contracts:CreateShippingLabel",
                "",
            ),
        ],
        messages,
        ..Scenario::default()
    }
}

fn masstransit_message(exchange: &'static str, id: &str, envelope: &Value) -> Message {
    let props = Properties {
        content_type: Some("application/vnd.masstransit+json".into()),
        delivery_mode: Some(2),
        message_id: Some(id.to_string()),
        ..Properties::default()
    };
    Message::json(exchange, "", props, envelope)
}

/// The `MT-Host-*` headers: the worker whose consumer failed.
fn add_masstransit_host(h: &mut Table) {
    for (k, v) in [
        ("MT-Host-MachineName", s("shipping-worker-7f9c4")),
        ("MT-Host-ProcessName", s("Shipping.Worker")),
        ("MT-Host-ProcessId", HeaderValue::I32(1)),
        ("MT-Host-Assembly", s("Shipping.Worker")),
        ("MT-Host-AssemblyVersion", s("1.4.2.0")),
        ("MT-Host-MassTransitVersion", s("8.2.5.0")),
        ("MT-Host-FrameworkVersion", s("8.0.8")),
        ("MT-Host-OperatingSystemVersion", s("Unix 6.1.0.0")),
    ] {
        h.insert(k, v);
    }
}

/// MassTransit's message envelope around `message`, as sent by the orders API.
fn envelope(id: &str, kind: &str, message: Value) -> Value {
    json!({
        "messageId": id,
        "requestId": null,
        "correlationId": null,
        "conversationId": guid(&format!("conversation {id}")),
        "initiatorId": null,
        "sourceAddress": "rabbitmq://localhost/orders_api_bus_abc123",
        "destinationAddress": format!("rabbitmq://localhost/{kind}"),
        "responseAddress": null,
        "faultAddress": null,
        "messageType": [format!("urn:message:{kind}")],
        "message": message,
        "expirationTime": null,
        "sentTime": ago(12).to_string(),
        "headers": {},
        "host": {
            "machineName": "orders-api-5d8b7",
            "processName": "Orders.Api",
            "processId": 1,
            "assembly": "Orders.Api",
            "assemblyVersion": "2.3.0.0",
            "frameworkVersion": "8.0.8",
            "massTransitVersion": "8.2.5.0",
            "operatingSystemVersion": "Unix 6.1.0.0"
        }
    })
}

const NO_STOCK: &str = "com.example.inventory.InsufficientStockException";
const IN_RESERVE: &str =
    "\tat com.example.inventory.ReserveService.reserve(ReserveService.java:88)";
const NO_CONNECTION: &str = "java.sql.SQLTransientConnectionException";
const IN_POOL: &str =
    "\tat com.zaxxer.hikari.pool.HikariPool.createTimeoutException(HikariPool.java:696)";
const POOL_TIMEOUT: &str =
    "HikariPool-1 - Connection is not available, request timed out after 30000ms.";

/// The listener's failures: (root cause type, its message, where it was thrown, routing key,
/// retries).
#[rustfmt::skip]
const RESERVE_FAILURES: [(&str, &str, &str, &str, Option<i32>); 4] = [
    (NO_STOCK,      "Insufficient stock for SKU A-1042: requested 3, available 0",  IN_RESERVE, "reserve.eu", Some(3)),
    (NO_STOCK,      "Insufficient stock for SKU A-1077: requested 1, available 0",  IN_RESERVE, "reserve.eu", Some(3)),
    (NO_STOCK,      "Insufficient stock for SKU A-1103: requested 12, available 4", IN_RESERVE, "reserve.us", Some(3)),
    (NO_CONNECTION, POOL_TIMEOUT,                                                   IN_POOL,    "reserve.eu", None),
];

/// Spring Cloud Stream's binder: destination exchange `inventory.reserve`, group queue
/// `inventory.reserve.group` and the DLQ behind `DLX` it republishes failures to, with the
/// exception and the stack trace (its root cause after "Caused by:") in headers.
pub fn spring() -> Scenario {
    let listener = "org.springframework.amqp.rabbit.support.ListenerExecutionFailedException: \
                    Listener method 'public void com.example.inventory.ReserveListener.reserve(com.example.inventory.Reservation)' threw exception";
    let frames = "\tat org.springframework.amqp.rabbit.listener.AbstractMessageListenerContainer.wrapToListenerExecutionFailedExceptionIfNeeded(AbstractMessageListenerContainer.java:1787)\n\
                  \tat org.springframework.amqp.rabbit.listener.AbstractMessageListenerContainer.doInvokeListener(AbstractMessageListenerContainer.java:1677)\n\
                  \tat org.springframework.amqp.rabbit.listener.SimpleMessageListenerContainer.doReceiveAndExecute(SimpleMessageListenerContainer.java:1023)\n";
    let messages: Vec<Message> = RESERVE_FAILURES
        .iter()
        .enumerate()
        .map(|(i, &(root, message, at, key, retries))| {
            let trace = format!(
                "{listener}\n{frames}Caused by: {root}: {message}\n{at}\n\tat com.example.inventory.ReserveListener.reserve(ReserveListener.java:41)\n\t... 14 more\n"
            );
            let mut h = table([
                ("x-exception-message", s(message)),
                ("x-exception-stacktrace", s(&trace)),
                ("x-original-exchange", s("inventory.reserve")),
                ("x-original-routingKey", s(key)),
                ("contentType", s("application/json")),
            ]);
            if let Some(n) = retries {
                h.insert("retry-count", HeaderValue::I32(n));
            }
            let body = json!({"reservationId": format!("R-{}", 70_100 + i), "sku": format!("A-{}", 1_042 + i * 35), "quantity": 3});
            let props = json_props(
                &guid(&format!("reservation {i}")),
                None,
                "inventory-service",
            );
            Message::json("DLX", "inventory.reserve.group", props, &body).headers(h)
        })
        .collect();
    Scenario {
        exchanges: vec![("inventory.reserve", Topic), ("DLX", Direct)],
        queues: vec![
            work("inventory.reserve.group", 0, "Spring binder group queue")
                .with([dlx("DLX"), dl_routing_key("inventory.reserve.group")]),
            dead_letters(
                "inventory.reserve.group.dlq",
                messages.len(),
                "Spring Cloud Stream: republished with the exception and stack trace",
            ),
        ],
        bindings: vec![
            Binding::queue("inventory.reserve.group", "inventory.reserve", "#"),
            Binding::queue(
                "inventory.reserve.group.dlq",
                "DLX",
                "inventory.reserve.group",
            ),
        ],
        messages,
        ..Scenario::default()
    }
}

/// NServiceBus's conventional routing topology (an exchange per endpoint, and one for `error`)
/// and what it moves to `error` after immediate and delayed retries: the failure in
/// `NServiceBus.ExceptionInfo.*` headers, where and when in the others.
pub fn nservicebus() -> Scenario {
    let deadlock = |process: u32| {
        format!(
            "Transaction (Process ID {process}) was deadlocked on lock resources with another process and has been chosen as the deadlock victim. Rerun the transaction."
        )
    };
    let sql = "Microsoft.Data.SqlClient.SqlException";
    let handler = "Sales.Handlers.PlaceOrderHandler.Handle";
    let unknown_product = "Unknown product code 'SKU-XL-RED' (Parameter 'ProductCode')";
    // (exception type, message, stack trace's top frame, delayed retries, minutes ago)
    #[rustfmt::skip]
    let failures: [(&str, String, &str, &str, i64); 4] = [
        (sql,                        deadlock(57),           handler,                     "2", 54),
        (sql,                        deadlock(61),           handler,                     "2", 47),
        (sql,                        deadlock(112),          handler,                     "2", 15),
        ("System.ArgumentException", unknown_product.into(), "Sales.Domain.Catalog.Find", "0", 6),
    ];
    let messages: Vec<Message> = failures
        .iter()
        .enumerate()
        .map(|(i, (exception, message, top, retries, minutes))| {
            let id = guid(&format!("nservicebus {i}"));
            let mut h = table([
                ("NServiceBus.MessageId", s(&id)),
                ("NServiceBus.MessageIntent", s("Send")),
                ("NServiceBus.ConversationId", s(&guid(&format!("conversation nsb {i}")))),
                ("NServiceBus.CorrelationId", s(&id)),
                ("NServiceBus.OriginatingEndpoint", s("Website")),
                ("NServiceBus.OriginatingMachine", s("WEB-01")),
                ("NServiceBus.ContentType", s("application/json")),
                (
                    "NServiceBus.EnclosedMessageTypes",
                    s("Sales.Messages.PlaceOrder, Sales.Messages, Version=1.0.0.0, Culture=neutral, PublicKeyToken=null"),
                ),
                ("NServiceBus.Version", s("7.8.4")),
                ("NServiceBus.TimeSent", s(&nservicebus_time(ago(minutes + 3)))),
                ("NServiceBus.FailedQ", s("Sales@SALES-01")),
                ("NServiceBus.ProcessingEndpoint", s("Sales")),
                ("NServiceBus.ProcessingMachine", s("SALES-01")),
                ("NServiceBus.TimeOfFailure", s(&nservicebus_time(ago(*minutes)))),
            ]);
            if *retries != "0" {
                h.insert("NServiceBus.Retries", s(retries));
                h.insert(
                    "NServiceBus.Retries.Timestamp",
                    s(&nservicebus_time(ago(minutes + 1))),
                );
            }
            let source = if exception.contains("SqlClient") {
                "Core Microsoft SqlClient Data Provider"
            } else {
                "Sales.Domain"
            };
            let trace = format!(
                "{exception}: {message}\n   at {top}(PlaceOrder message, IMessageHandlerContext context) in C:\\src\\Sales\\Handlers\\PlaceOrderHandler.cs:line 33\n   \
                 at NServiceBus.InvokeHandlerTerminator.Terminate(IInvokeHandlerContext context) in /_/src/NServiceBus.Core/Pipeline/Incoming/InvokeHandlerTerminator.cs:line 35\n   \
                 at NServiceBus.LoadHandlersConnector.Invoke(IIncomingLogicalMessageContext context, Func`2 stage) in /_/src/NServiceBus.Core/Pipeline/Incoming/LoadHandlersConnector.cs:line 40"
            );
            for (k, v) in [
                ("ExceptionType", s(exception)),
                ("Message", s(message)),
                ("Source", s(source)),
                ("HelpLink", s("")),
                ("StackTrace", s(&trace)),
                ("Data.Message ID", s(&id)),
            ] {
                h.insert(format!("NServiceBus.ExceptionInfo.{k}"), v);
            }
            let product = if i == 3 { "SKU-XL-RED" } else { "SKU-M-BLUE" };
            let body = json!({"OrderId": guid(&format!("order nsb {i}")), "ProductCode": product, "Quantity": 2});
            let props = Properties {
                content_type: Some("application/json".into()),
                delivery_mode: Some(2),
                message_id: Some(id.clone()),
                correlation_id: Some(id.clone()),
                kind: Some("Sales.Messages.PlaceOrder".into()),
                ..Properties::default()
            };
            Message::json("error", "", props, &body).headers(h)
        })
        .collect();
    Scenario {
        exchanges: vec![("Sales", Fanout), ("error", Fanout)],
        queues: vec![
            work("Sales", 0, "NServiceBus endpoint"),
            dead_letters(
                "error",
                messages.len(),
                "NServiceBus: failed in endpoint Sales after delayed retries",
            ),
        ],
        bindings: vec![
            Binding::queue("Sales", "Sales", ""),
            Binding::queue("error", "error", ""),
        ],
        messages,
        ..Scenario::default()
    }
}

/// NServiceBus's wire format for times: `yyyy-MM-dd HH:mm:ss:ffffff Z`.
fn nservicebus_time(t: Timestamp) -> String {
    let dt = jiff::tz::Offset::UTC.to_datetime(t);
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}:{:06} Z",
        dt.year(),
        dt.month(),
        dt.day(),
        dt.hour(),
        dt.minute(),
        dt.second(),
        dt.subsec_nanosecond() / 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nservicebus_times_parse_back() {
        let t: Timestamp = "2025-09-28T06:50:15.123456Z"
            .parse()
            .unwrap_or(Timestamp::UNIX_EPOCH);
        let text = nservicebus_time(t);
        assert_eq!(text, "2025-09-28 06:50:15:123456 Z");
        assert_eq!(
            crate::domain::convention::parse_time(&HeaderValue::string(&text)),
            Some(t)
        );
    }
}
