//! A fleet webhook's id: random, with its low [`TAG_BITS`] naming its
//! destination (a hash of its name), so that `GET /v1/webhooks/{id}` asks
//! Redis about the destinations of that tag only (one in 256) instead of
//! every destination the fleet has: a lookup of an unknown id cost a round
//! trip per destination, 100,000 of them at 100,000 endpoints, for anyone
//! holding an intake key.
//!
//! An id its destination still holds (queued, in flight, waiting for a
//! retry) is drawn again; the 56 random bits keep the rest apart: two
//! webhooks of one destination share an id once in 2^56 pairs (a receiver
//! deduplicating by `webhook-id` for a day, at 400 webhooks a second to one
//! destination, meets a repeat with odds under 1 %; at 10 a second, under
//! 1 in 10^5; with 64 random bits, as before, 256 times less).
//! Webhooks admitted before ids carried a tag (and their dead letters
//! redriven later, which keep their ids) are not found by their status:
//! they are delivered as ever.

/// Low bits of an id that name its destination.
pub(crate) const TAG_BITS: u32 = 8;
const MASK: u64 = (1 << TAG_BITS) - 1;

/// `destination`'s tag: FNV-1a of its name, mixed by murmur3's
/// finaliser (names that differ in their last characters differ in every
/// bit), its high bits. The same on every relay and every version.
pub(crate) fn tag(destination: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in destination.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h >> (64 - TAG_BITS)
}

/// A fresh id for a webhook to `destination` (never 0).
pub(crate) fn fresh(destination: &str) -> u64 {
    let tag = tag(destination);
    loop {
        let id = (fastrand::u64(..) & !MASK) | tag;
        if id != 0 {
            return id;
        }
    }
}

/// Whether `id` may be a webhook of `destination` (its tag matches).
pub(crate) fn may_be(id: u64, destination: &str) -> bool {
    id & MASK == tag(destination)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `tag("a")`, fixed: ids made by earlier relays name their
    /// destinations by it.
    const TAG_OF_A: u64 = 130;

    #[test]
    fn an_id_names_its_destination_and_few_others() {
        for name in ["a", "billing-eu", "x", ""] {
            for _ in 0..100 {
                let id = fresh(name);
                assert!(id != 0 && may_be(id, name), "{name} {id}");
            }
        }
        // The same tag on every relay and version.
        assert_eq!(tag("a"), TAG_OF_A);
        // Spread over the tags: 100,000 names, about 390 a tag.
        let mut per = vec![0u32; 1 << TAG_BITS];
        for i in 0..100_000 {
            per[tag(&format!("endpoint-{i}")) as usize] += 1;
        }
        let most = per.iter().max().copied().unwrap_or(0);
        assert!(most < 500, "the fullest tag has {most}");
        let id = fresh("billing-eu");
        let others = (0..100_000)
            .filter(|i| may_be(id, &format!("endpoint-{i}")))
            .count();
        assert!(others < 500, "{others} destinations asked");
    }
}
