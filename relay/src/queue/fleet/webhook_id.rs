//! A fleet webhook's id: random, unique in its destination's queue (the
//! admission script draws again while one is held), with its low
//! [`TAG_BITS`] naming the destination (a hash of its name), so that
//! `GET /v1/webhooks/{id}` asks Redis about the destinations of that tag
//! only (about one in a thousand) instead of every destination the fleet
//! has: a lookup of an unknown id cost a round trip per destination, 100,000
//! of them at 100,000 endpoints, for anyone holding an intake key.
//!
//! The 54 random bits keep ids apart within a destination: two webhooks
//! of one destination share an id once in 2^54 pairs (a receiver that
//! deduplicates by `webhook-id` over a day of 400 webhooks a second meets
//! one with odds of about 3 %; over an hour, 6 in 100,000). Webhooks
//! admitted before ids carried a tag are not found by their status (they
//! are delivered as ever).

/// Low bits of an id that name its destination.
pub(crate) const TAG_BITS: u32 = 10;
const MASK: u64 = (1 << TAG_BITS) - 1;

/// `destination`'s tag: FNV-1a of its name, its low bits (the same on
/// every relay and every version).
pub(crate) fn tag(destination: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in destination.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h & MASK
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

    #[test]
    fn an_id_names_its_destination_and_few_others() {
        for name in ["a", "billing-eu", "x", ""] {
            for _ in 0..100 {
                let id = fresh(name);
                assert!(id != 0 && may_be(id, name), "{name} {id}");
            }
        }
        // The same tag on every relay and version.
        assert_eq!(tag("a"), 0xaf63_dc4c_8601_ec8c & MASK);
        // Spread over the tags: 100,000 names, about 98 a tag.
        let mut per = vec![0u32; 1 << TAG_BITS];
        for i in 0..100_000 {
            per[tag(&format!("endpoint-{i}")) as usize] += 1;
        }
        let most = per.iter().max().copied().unwrap_or(0);
        assert!(most < 160, "the fullest tag has {most}");
        let id = fresh("billing-eu");
        let others = (0..100_000)
            .filter(|i| may_be(id, &format!("endpoint-{i}")))
            .count();
        assert!(others < 160, "{others} destinations asked");
    }
}
