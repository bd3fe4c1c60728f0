//! Builds `src/admission/places.rs` with loom's atomics: the file reads
//! them under `cfg(dripfeed_loom)`, set here for this crate alone, so the
//! model needs no `RUSTFLAGS` (which would rebuild every dependency).

fn main() {
    println!("cargo::rustc-check-cfg=cfg(dripfeed_loom)");
    println!("cargo::rustc-cfg=dripfeed_loom");
}
