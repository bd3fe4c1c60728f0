//! Standard Webhooks signatures: `webhook-signature: v1,<base64 HMAC-SHA256>`
//! over `id.timestamp.body`, with the destination's `whsec_` key; made again
//! on every attempt, with that attempt's time.

use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The `webhook-signature` value for one attempt.
pub(crate) fn sign(key: &[u8], id: &str, timestamp: u64, body: &[u8]) -> String {
    // HMAC takes a key of any length.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else {
        return String::new();
    };
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    let sig = mac.finalize().into_bytes();
    format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(sig)
    )
}

#[cfg(test)]
mod tests {
    /// The example of the Standard Webhooks specification.
    #[test]
    fn the_specifications_example() {
        use base64::Engine;
        let key = base64::engine::general_purpose::STANDARD
            .decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
            .unwrap();
        let sig = super::sign(
            &key,
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            br#"{"test": 2432232314}"#,
        );
        assert_eq!(sig, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }
}
