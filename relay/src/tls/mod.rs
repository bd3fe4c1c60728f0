//! TLS, both ways: the listeners' certificates, loaded and swapped on a
//! reload ([`server`]), and the roots outbound connections trust,
//! deliveries and trace export alike ([`client`]). Beneath every part that
//! speaks TLS; it reads only the configuration.

pub(crate) mod client;
pub(crate) mod server;
