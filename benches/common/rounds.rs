//! Rounds of contenders run in turn, and their medians: what the peer
//! benches (`handoff`, `keyed_peers`) share.

/// The median of `values` (the mean of the middle two for an even count).
pub(crate) fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// `median (min–max)` of `values`, each printed with `digits` decimals.
pub(crate) fn spread(values: &[f64], digits: usize) -> String {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!(
        "{:.*} ({:.*}–{:.*})",
        digits,
        median(values),
        digits,
        lo,
        digits,
        hi
    )
}

/// The number after `--rounds` on the command line, else `default`.
pub(crate) fn rounds(default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--rounds")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(default)
}

/// Whether `word` is on the command line (a filter: no word at all, or
/// only flags, runs everything).
pub(crate) fn wanted(word: &str) -> bool {
    let words: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--") && a.parse::<f64>().is_err())
        .collect();
    words.is_empty() || words.iter().any(|w| word.contains(w.as_str()))
}
