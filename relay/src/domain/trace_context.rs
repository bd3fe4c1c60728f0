//! A webhook's place in a trace: the W3C Trace Context (`traceparent`)
//! kept with the webhook, in the journal and in the fleet's queue, so that
//! each delivery attempt joins the trace its intake started or continued,
//! after a restart and on another relay too. Pure: parsing, formatting and
//! the 25 bytes the journal keeps.

use std::fmt::Write as _;

/// A trace id, a span id and whether the trace is sampled: what a
/// `traceparent` header carries (version `00`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceContext {
    /// The trace's id (never all zeros).
    pub trace_id: [u8; 16],
    /// The span this context names as the parent of the next (never all zeros).
    pub span_id: [u8; 8],
    /// The trace flags; bit 0: sampled.
    pub flags: u8,
}

/// The bytes [`TraceContext::to_bytes`] writes.
pub(crate) const ENCODED_LEN: usize = 25;

impl TraceContext {
    /// Whether the trace is sampled (kept).
    pub fn sampled(&self) -> bool {
        self.flags & 1 == 1
    }

    /// Reads a `traceparent` header value: `00-` 32 hex digits `-` 16 hex
    /// digits `-` 2 hex digits, lower case, neither id all zeros. A later
    /// version's value is read by its first four fields, as the
    /// specification asks; anything else is `None` (a new trace starts).
    pub fn parse(header: &str) -> Option<TraceContext> {
        let mut parts = header.trim().split('-');
        let version = parts.next()?;
        let (trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?);
        let rest_ok = match version {
            "00" => parts.next().is_none(),
            "ff" => false,
            v => v.len() == 2 && hex::<1>(v).is_some(),
        };
        if !rest_ok {
            return None;
        }
        let trace_id = hex::<16>(trace)?;
        let span_id = hex::<8>(span)?;
        let [flags] = hex::<1>(flags)?;
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(TraceContext {
            trace_id,
            span_id,
            flags,
        })
    }

    /// The `traceparent` header value (version `00`).
    pub fn header(&self) -> String {
        let mut out = String::with_capacity(55);
        out.push_str("00-");
        for b in self.trace_id {
            let _ = write!(out, "{b:02x}");
        }
        out.push('-');
        for b in self.span_id {
            let _ = write!(out, "{b:02x}");
        }
        let _ = write!(out, "-{:02x}", self.flags);
        out
    }

    /// The 25 bytes kept with a webhook: trace id, span id, flags.
    pub fn to_bytes(self) -> [u8; ENCODED_LEN] {
        let mut out = [0; ENCODED_LEN];
        out[..16].copy_from_slice(&self.trace_id);
        out[16..24].copy_from_slice(&self.span_id);
        out[24] = self.flags;
        out
    }

    /// Reads what [`to_bytes`](Self::to_bytes) wrote.
    pub fn from_bytes(bytes: &[u8; ENCODED_LEN]) -> TraceContext {
        let mut trace_id = [0; 16];
        let mut span_id = [0; 8];
        trace_id.copy_from_slice(&bytes[..16]);
        span_id.copy_from_slice(&bytes[16..24]);
        TraceContext {
            trace_id,
            span_id,
            flags: bytes[24],
        }
    }
}

/// `N` bytes from exactly `2N` lower-case hex digits.
fn hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    let digits = text.as_bytes();
    if digits.len() != 2 * N {
        return None;
    }
    let value = |d: u8| match d {
        b'0'..=b'9' => Some(d - b'0'),
        b'a'..=b'f' => Some(d - b'a' + 10),
        _ => None,
    };
    let mut out = [0; N];
    for (i, pair) in digits.chunks_exact(2).enumerate() {
        out[i] = value(pair[0])? << 4 | value(pair[1])?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_traceparent_reads_and_writes_back() {
        let c = TraceContext::parse(EXAMPLE).unwrap();
        assert_eq!(c.trace_id[0], 0x4b);
        assert_eq!(c.span_id[7], 0xb7);
        assert!(c.sampled());
        assert_eq!(c.header(), EXAMPLE);
        assert_eq!(TraceContext::from_bytes(&c.to_bytes()), c);
        let unsampled = TraceContext::parse(&EXAMPLE.replace("-01", "-00")).unwrap();
        assert!(!unsampled.sampled());
    }

    #[test]
    fn what_the_specification_refuses_starts_a_new_trace() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceContext::parse(bad), None, "{bad:?}");
        }
        // A later version is read by its first four fields.
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes";
        assert!(TraceContext::parse(later).is_some());
    }
}
