//! A key's SHA-256 digest: how the configuration holds API keys and the
//! admin token (never in clear), and how a presented key is checked
//! against it, in constant time.

use std::fmt;

use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

use crate::config::value::{Value, quoted};

/// The SHA-256 digest of a key: 64 hex characters in configuration.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyDigest([u8; 32]);

impl KeyDigest {
    /// The digest of `key` as presented (its bytes, nothing trimmed).
    pub(crate) fn of(key: &[u8]) -> KeyDigest {
        KeyDigest(Sha256::digest(key).into())
    }

    /// A 32-byte digest made some other way (an HMAC), compared and
    /// written as a key's is.
    pub(crate) fn from_bytes(bytes: [u8; 32]) -> KeyDigest {
        KeyDigest(bytes)
    }

    /// Reads 64 hex characters (either case).
    pub(crate) fn parse(text: &str) -> Result<KeyDigest, String> {
        let text = text.trim();
        let bad = || {
            format!(
                "expected a SHA-256 digest, 64 hex characters (dripfeed-relay hash-key prints one), found {} characters",
                text.chars().count()
            )
        };
        if text.len() != 64 || !text.is_ascii() {
            return Err(bad());
        }
        let mut out = [0u8; 32];
        for (byte, pair) in out.iter_mut().zip(text.as_bytes().chunks_exact(2)) {
            let pair = std::str::from_utf8(pair).map_err(|_| bad())?;
            *byte = u8::from_str_radix(pair, 16).map_err(|_| {
                format!("expected a SHA-256 digest, 64 hex characters: {pair:?} is not hex")
            })?;
        }
        Ok(KeyDigest(out))
    }

    /// Whether `self` and `other` are the same digest, in constant time
    /// (`subtle`: every byte looked at whatever the first difference).
    pub(crate) fn same(&self, other: &KeyDigest) -> bool {
        self.0.ct_eq(&other.0).into()
    }

    /// Lower-case hex, as `sha256sum` prints it.
    pub(crate) fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl fmt::Debug for KeyDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyDigest({})", self.hex())
    }
}

impl fmt::Display for KeyDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.hex())
    }
}

impl Value for KeyDigest {
    const KIND: &'static str = "a SHA-256 digest (64 hex characters)";
    fn from_text(text: &str) -> Result<Self, String> {
        KeyDigest::parse(text)
    }
    fn show(&self) -> String {
        quoted(&self.hex())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_read_compare_and_print() {
        // sha256("abc"), as sha256sum prints it.
        let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        let d = KeyDigest::parse(abc).unwrap();
        assert_eq!(d.hex(), abc);
        assert!(d.same(&KeyDigest::of(b"abc")));
        assert!(!d.same(&KeyDigest::of(b"abd")));
        assert_eq!(KeyDigest::parse(&abc.to_uppercase()).unwrap(), d);
        assert!(KeyDigest::parse(&abc[..63]).is_err());
        assert!(KeyDigest::parse(&format!("{}zz", &abc[..62])).is_err());
        assert!(KeyDigest::parse(&format!("{}é", &abc[..62])).is_err());
    }
}
