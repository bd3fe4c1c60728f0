//! Wrapping an outbound client (a partner API with a quota): [`Slots`](crate::Slots)
//! hands callers drain slots at the drain rate, and (feature `tower`) a
//! tower `Layer` puts a service behind them.

pub(crate) mod slots;
#[cfg(feature = "tower")]
pub mod tower;
