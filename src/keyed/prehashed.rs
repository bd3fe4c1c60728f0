//! A hasher for keys that are hashes already.

use std::hash::{BuildHasher, Hasher};

/// Hashes keys that are hashes already (such as a throttle's keys, each
/// the SipHash of the caller's key under the throttle's secret seed) with
/// a few instructions
/// instead of SipHash's hundred: a `u64` is only mixed (murmur3's
/// finaliser, a bijection, so distinct keys stay distinct), other bytes
/// are folded in first. It gives no protection against keys an adversary
/// picks: use it only where the keys are unpredictable outside the
/// process, or for a [`KeyedBuckets`](super::KeyedBuckets) of ids that
/// nobody outside chooses. A throttle's own per-key table uses it, since
/// its keys are hashed with the throttle's seed.
///
/// ```
/// use std::hash::BuildHasher;
/// use dripfeed::keyed::{KeyedBuckets, Prehashed, Quota};
/// assert_ne!(Prehashed.hash_one(1u64), Prehashed.hash_one(2u64));
/// let q = Quota::per_second(1.0).burst(1.0)?;
/// let t = KeyedBuckets::<u64>::builder(10, q).hasher(Prehashed).build()?;
/// assert!(t.try_admit(&7, 1.0).is_ok());
/// assert!(t.try_admit(&7, 1.0).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Prehashed;

/// The state of [`Prehashed`]'s hasher.
///
/// ```
/// use std::hash::{BuildHasher, Hasher};
/// let mut h = dripfeed::keyed::Prehashed.build_hasher();
/// h.write_u64(42);
/// assert_eq!(h.finish(), dripfeed::keyed::Prehashed.hash_one(42u64));
/// ```
#[derive(Debug, Clone, Default)]
pub struct PrehashedHasher(u64);

impl BuildHasher for Prehashed {
    type Hasher = PrehashedHasher;
    fn build_hasher(&self) -> PrehashedHasher {
        PrehashedHasher(0)
    }
}

impl Hasher for PrehashedHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = self.0.rotate_left(29).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ n;
    }
    fn finish(&self) -> u64 {
        // murmur3's fmix64.
        let mut x = self.0;
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        x ^ (x >> 33)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_ids_spread_over_the_high_and_low_bits() {
        // The table takes its shard from the high bits and a position from
        // the low 32: ids 0..4096 must land in every one of 16 shards and
        // spread their low bits.
        let mut shards = [0u32; 16];
        let mut low = std::collections::HashSet::new();
        for id in 0u64..4096 {
            let h = Prehashed.hash_one(id);
            shards[(h >> 60) as usize] += 1;
            low.insert(h as u32 >> 16);
        }
        assert!(shards.iter().all(|&n| n > 150), "{shards:?}");
        assert!(low.len() > 3800, "{}", low.len());
    }

    #[test]
    fn bytes_count_in_order() {
        assert_ne!(Prehashed.hash_one("ab"), Prehashed.hash_one("ba"));
        assert_ne!(Prehashed.hash_one([1u8; 9]), Prehashed.hash_one([1u8; 8]));
    }
}
