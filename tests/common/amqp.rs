//! AMQP helpers for tests (being written).
