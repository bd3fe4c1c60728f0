//! What the keyed benches share: resident memory, and keys in a fixed
//! pseudo-random order.

/// Resident memory, bytes (Linux; 0 elsewhere).
pub(crate) fn rss() -> i64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<i64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// `0..n` in a fixed pseudo-random order (a xorshift Fisher-Yates).
pub(crate) fn shuffled(n: usize) -> Vec<u64> {
    let mut keys: Vec<u64> = (0..n as u64).collect();
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    for i in (1..keys.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        keys.swap(i, (x % (i as u64 + 1)) as usize);
    }
    keys
}
