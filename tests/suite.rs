//! Every integration test in one binary: the helpers compile once and one executable links,
//! instead of one crate per file (70 of them took most of the CI build). nextest still runs each
//! test in a process of its own; a file is a module, so its tests are named `file::test`
//! (`cargo nextest run replay_cli::` runs one file's).

mod backlog_util;
mod common;
mod framework_util;
mod replay_util;
#[allow(dead_code)]
mod store_util;
#[allow(dead_code)]
mod tmux_util;
mod tui_fixtures;

#[path = "amqp10.rs"]
mod amqp10;
#[path = "amqp10_props.rs"]
mod amqp10_props;
#[path = "amqp10_replay.rs"]
mod amqp10_replay;
#[path = "archive_cli.rs"]
mod archive_cli;
#[path = "archive_trust.rs"]
mod archive_trust;
#[path = "arrival_views.rs"]
mod arrival_views;
#[path = "audit_stream.rs"]
mod audit_stream;
#[path = "browse_big.rs"]
mod browse_big;
#[path = "browse_classic.rs"]
mod browse_classic;
#[path = "browse_connect.rs"]
mod browse_connect;
#[path = "browse_quorum.rs"]
mod browse_quorum;
#[path = "browse_stream.rs"]
mod browse_stream;
#[path = "config_load.rs"]
mod config_load;
#[path = "config_tui.rs"]
mod config_tui;
#[path = "demo_build.rs"]
mod demo_build;
#[path = "discovery_broker.rs"]
mod discovery_broker;
#[path = "discovery_looks.rs"]
mod discovery_looks;
#[path = "discovery_scale.rs"]
mod discovery_scale;
#[path = "every_context.rs"]
mod every_context;
#[path = "filter_props.rs"]
mod filter_props;
#[path = "groups_by.rs"]
mod groups_by;
#[path = "listing_memory.rs"]
mod listing_memory;
#[path = "management_errors.rs"]
mod management_errors;
#[path = "model_conventions/mod.rs"]
mod model_conventions;
#[path = "model_groups.rs"]
mod model_groups;
#[path = "model_mgmt.rs"]
mod model_mgmt;
#[path = "model_props.rs"]
mod model_props;
#[path = "notes_audit.rs"]
mod notes_audit;
#[path = "ops_fronts.rs"]
mod ops_fronts;
#[path = "ops_home.rs"]
mod ops_home;
#[path = "quickstart.rs"]
mod quickstart;
#[path = "read_end.rs"]
mod read_end;
#[path = "redirects.rs"]
mod redirects;
#[path = "replay_backlog.rs"]
mod replay_backlog;
#[path = "replay_canary.rs"]
mod replay_canary;
#[path = "replay_cli.rs"]
mod replay_cli;
#[path = "replay_edit.rs"]
mod replay_edit;
#[path = "replay_faults.rs"]
mod replay_faults;
#[path = "replay_frameworks.rs"]
mod replay_frameworks;
#[path = "replay_real_frameworks.rs"]
mod replay_real_frameworks;
#[path = "replay_real_ladder.rs"]
mod replay_real_ladder;
#[path = "replay_real_python.rs"]
mod replay_real_python;
#[path = "replay_real_symfony.rs"]
mod replay_real_symfony;
#[path = "replay_select.rs"]
mod replay_select;
#[path = "replay_trust.rs"]
mod replay_trust;
#[path = "restore_engine.rs"]
mod restore_engine;
#[path = "restore_room.rs"]
mod restore_room;
#[path = "sanitize_props.rs"]
mod sanitize_props;
#[path = "snapshot_roundtrip.rs"]
mod snapshot_roundtrip;
#[path = "store_audit.rs"]
mod store_audit;
#[path = "store_seen.rs"]
mod store_seen;
#[path = "triage_cli.rs"]
mod triage_cli;
#[path = "trust_cancel.rs"]
mod trust_cancel;
#[path = "trust_destination.rs"]
mod trust_destination;
#[path = "trust_input.rs"]
mod trust_input;
#[path = "trust_quorum.rs"]
mod trust_quorum;
#[path = "trust_reads.rs"]
mod trust_reads;
#[path = "trust_signals.rs"]
mod trust_signals;
#[path = "trust_store.rs"]
mod trust_store;
#[path = "trust_truth.rs"]
mod trust_truth;
#[path = "tui_custom.rs"]
mod tui_custom;
#[path = "tui_e2e.rs"]
mod tui_e2e;
#[path = "tui_e2e_habits.rs"]
mod tui_e2e_habits;
#[path = "tui_e2e_words.rs"]
mod tui_e2e_words;
#[path = "tui_edit.rs"]
mod tui_edit;
#[path = "tui_habits.rs"]
mod tui_habits;
#[path = "tui_oplog.rs"]
mod tui_oplog;
#[path = "tui_redirects.rs"]
mod tui_redirects;
#[path = "tui_slices.rs"]
mod tui_slices;
#[path = "tui_snapshots.rs"]
mod tui_snapshots;
#[path = "tui_update/mod.rs"]
mod tui_update;
#[path = "tui_words.rs"]
mod tui_words;
#[path = "value_fuzz.rs"]
mod value_fuzz;
#[path = "words_errors.rs"]
mod words_errors;
#[path = "words_outcome.rs"]
mod words_outcome;
#[path = "worker_archive.rs"]
mod worker_archive;
#[path = "worker_audit.rs"]
mod worker_audit;
#[path = "worker_backlog.rs"]
mod worker_backlog;
#[path = "worker_cancel.rs"]
mod worker_cancel;
#[path = "worker_every_context.rs"]
mod worker_every_context;
#[path = "worker_every_vhost.rs"]
mod worker_every_vhost;
#[path = "worker_notes.rs"]
mod worker_notes;
#[path = "worker_oplog.rs"]
mod worker_oplog;
#[path = "worker_switch.rs"]
mod worker_switch;
