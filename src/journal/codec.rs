//! How a job becomes bytes in the journal and comes back after a restart.

/// Encodes a job for the journal and decodes it after a restart.
///
/// Implement it for your job type (or wrap it with serde yourself): the
/// journal stores what [`encode`](Self::encode) writes, and recovery hands
/// it to [`decode`](Self::decode), so a job comes back exactly as it was
/// admitted. Keep the encoding stable across versions of your program: a
/// journal written by one version is replayed by the next.
///
/// ```
/// use dripfeed::journal::{DecodeError, JobCodec};
///
/// #[derive(Debug, PartialEq)]
/// struct Hook { tenant: String, body: Vec<u8> }
///
/// impl JobCodec for Hook {
///     fn encode(&self, out: &mut Vec<u8>) {
///         out.extend_from_slice(&(self.tenant.len() as u32).to_le_bytes());
///         out.extend_from_slice(self.tenant.as_bytes());
///         out.extend_from_slice(&self.body);
///     }
///     fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
///         let (len, rest) = bytes.split_first_chunk::<4>().ok_or(DecodeError::new("short"))?;
///         let len = u32::from_le_bytes(*len) as usize;
///         let tenant = rest.get(..len).ok_or(DecodeError::new("short tenant"))?;
///         let tenant = String::from_utf8(tenant.to_vec()).map_err(|_| DecodeError::new("tenant"))?;
///         Ok(Hook { tenant, body: rest[len..].to_vec() })
///     }
/// }
///
/// let hook = Hook { tenant: "acme".into(), body: b"{}".to_vec() };
/// let mut bytes = Vec::new();
/// hook.encode(&mut bytes);
/// assert_eq!(Hook::decode(&bytes), Ok(hook));
/// assert!(Hook::decode(&[1]).is_err());
/// ```
pub trait JobCodec: Sized {
    /// Appends the job's encoding to `out`.
    fn encode(&self, out: &mut Vec<u8>);
    /// Rebuilds a job from what `encode` wrote.
    fn decode(bytes: &[u8]) -> Result<Self, DecodeError>;
}

/// A journal record that does not decode as a job.
///
/// ```
/// use dripfeed::journal::DecodeError;
/// let e = DecodeError::new("not UTF-8");
/// assert_eq!(e.to_string(), "cannot decode a journaled job: not UTF-8");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    what: String,
}

impl DecodeError {
    /// A decoding failure described by `what`.
    pub fn new(what: impl Into<String>) -> Self {
        DecodeError { what: what.into() }
    }
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot decode a journaled job: {}", self.what)
    }
}

impl std::error::Error for DecodeError {}

impl JobCodec for Vec<u8> {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self);
    }
    fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        Ok(bytes.to_vec())
    }
}

impl JobCodec for String {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.as_bytes());
    }
    fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError::new("not UTF-8"))
    }
}

impl JobCodec for u64 {
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let bytes: [u8; 8] = bytes
            .try_into()
            .map_err(|_| DecodeError::new("not 8 bytes"))?;
        Ok(u64::from_le_bytes(bytes))
    }
}
