//! A record's tag: throttles that share one journal
//! ([`ThrottleBuilder::shared_journal`](crate::ThrottleBuilder::shared_journal))
//! start each record with their tag (a destination's name, say), so
//! recovery can give the job back to the throttle it belongs to.
//!
//! The layout, ahead of the job's own encoding: four marker bytes
//! (`0xFF` `D` `S` `T`), the tag's length as a little-endian `u32`, the
//! tag in UTF-8.

/// Marks a record that names its destination.
const MARKER: [u8; 4] = [0xFF, b'D', b'S', b'T'];

/// Writes `tag` into `out`.
pub(crate) fn write(tag: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(&MARKER);
    let len = u32::try_from(tag.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&tag.as_bytes()[..len as usize]);
}

/// The tag a record names and the job's encoding after it; `None`
/// for a record without a tag (written by a single throttle).
pub(crate) fn split(record: &[u8]) -> Option<(&str, &[u8])> {
    let rest = record.strip_prefix(&MARKER)?;
    let (len, rest) = rest.split_first_chunk::<4>()?;
    let (name, job) = rest.split_at_checked(u32::from_le_bytes(*len) as usize)?;
    Some((std::str::from_utf8(name).ok()?, job))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tagged_record_splits_into_its_destination_and_job() {
        let mut out = Vec::new();
        write("partner-β", &mut out);
        out.extend_from_slice(b"{\"x\":1}");
        assert_eq!(split(&out), Some(("partner-β", &b"{\"x\":1}"[..])));
        let mut empty = Vec::new();
        write("", &mut empty);
        assert_eq!(split(&empty), Some(("", &b""[..])));
    }

    #[test]
    fn untagged_or_cut_records_are_not_read_as_tagged() {
        assert_eq!(split(b"{\"x\":1}"), None);
        assert_eq!(
            split(&[0xFF, b'D', b'S', b'T', 9, 0, 0, 0, b'a']),
            None,
            "cut short"
        );
        assert_eq!(
            split(&[0xFF, b'D', b'S', b'T', 1, 0, 0, 0, 0xC3]),
            None,
            "not UTF-8"
        );
        assert_eq!(split(&[]), None);
    }
}
