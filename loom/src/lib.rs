//! The loom model of dripfeed's reservation word (`src/admission/places.rs`,
//! its `loom_model` tests): the file is compiled here as it is in the
//! library, with loom's atomics in place of std's, so the model explores
//! the code that ships. A crate of its own, so that a clean build of the
//! model compiles loom and this file, not the library and every dependency
//! again under other flags.
//!
//! `cargo test -p dripfeed-loom` runs it (a second or so in a debug build).

// The library's reservations are used here only by the model.
#![allow(dead_code)]

#[path = "../../src/admission/places.rs"]
mod places;
