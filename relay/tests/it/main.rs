//! The relay's integration tests: one test binary, each test starting the
//! real `dripfeed-relay` over loopback (port 0, the address read from the
//! line it prints, its environment set on the child, killed on drop).
//! Real time, bounded in time and count; they assert counts and generous
//! bounds. Tests needing Redis or PostgreSQL start their own servers, and
//! under `CI=true` fail rather than skip without them.

mod admin;
mod admin_changes;
mod auth;
mod burst;
mod chaos;
mod config;
mod contract;
mod crash;
mod dead_letter_disk;
mod dead_letter_file;
mod dead_letter_rotation;
mod dead_letters_api;
mod doc_receivers;
mod endpoints;
mod events;
mod fanout;
mod faults;
mod fleet;
mod fleet_adaptive;
mod fleet_breaker;
mod fleet_global;
mod fleet_sentinel;
mod fleet_stall;
mod full_disk;
mod harness;
mod https;
mod intake_bytes;
mod intake_clients;
mod intake_keys;
mod json_bodies;
mod letters;
mod linearizable;
mod load;
mod many;
mod memory;
mod openapi;
mod operator;
mod page;
mod planted;
mod private_addresses;
mod raw;
mod readyz_journal;
mod readyz_store;
mod receivers;
mod redirects;
mod redrive_rest;
mod refusals;
mod retries;
mod shared_changes;
mod shared_fleet;
mod shared_queue;
mod status_line;
mod stop;
mod tenants;
mod traces;
mod unprivileged;
mod unwritable_start;
mod walkthrough;
mod watch;
mod webhook_status;

// The library's test support: throwaway servers on free ports.
#[path = "../../../tests/support/postgres.rs"]
mod support_postgres;
#[path = "../../../tests/support/redis.rs"]
mod support_redis;
