//! Overflow policies: when the admission bound is reached, the
//! [`Overflow`] policy decides who loses (the newcomer, the oldest queued
//! job, or neither: the newcomer goes to the dead-letter sink).

/// What happens to an arriving job when the queue is at its bound.
///
/// ```
/// use dripfeed::Overflow;
/// assert_eq!(Overflow::default(), Overflow::TailDrop);
/// assert_eq!(Overflow::HeadDrop.as_str(), "head_drop");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Overflow {
    /// Refuse the arriving job (`Err(Rejected)`, 503); queued jobs keep their place.
    #[default]
    TailDrop,
    /// Evict the oldest queued job to the `on_evicted` hook and queue the newcomer.
    HeadDrop,
    /// Offer the arriving job to the dead-letter sink (`Ok(Deferred)`, 202);
    /// if the sink refuses, the job comes back as `Err(Rejected)`.
    DeadLetter,
}

impl Overflow {
    /// Every policy, in a fixed order (the metrics' label order).
    pub const ALL: [Overflow; 3] = [Overflow::TailDrop, Overflow::HeadDrop, Overflow::DeadLetter];

    /// The `policy` label of `leaky_bucket_overflow_total`.
    pub fn as_str(self) -> &'static str {
        match self {
            Overflow::TailDrop => "tail_drop",
            Overflow::HeadDrop => "head_drop",
            Overflow::DeadLetter => "dead_letter",
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}
