//! Changing the set at run time: a destination named, configured or taken
//! out while the others run.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::dest::Dest;
use super::{
    DefineError, DestinationConfig, DestinationError, DestinationStats, Destinations, Inner,
    fits_template,
};

/// The table.
type Table<J> = HashMap<Arc<str>, Arc<Dest<J>>>;

/// A place for one more record: at `max_destinations`, the record idle
/// longest that may be retired goes; `Full` when none may.
fn make_room<J: Send + Sync + 'static>(
    inner: &Inner<J>,
    table: &mut Table<J>,
) -> Result<(), DestinationError> {
    if table.len() < inner.max_destinations {
        return Ok(());
    }
    let idlest = table
        .values()
        .filter(|d| d.retirable())
        .min_by_key(|d| d.last_active())
        .map(|d| d.name.clone());
    match idlest {
        Some(gone) => {
            if let Some(d) = table.remove(&gone) {
                d.retire(); // a submission that found it makes no throttle in it
            }
            Ok(())
        }
        None => Err(DestinationError::Full {
            max: inner.max_destinations,
        }),
    }
}

impl<J: Send + Sync + 'static> Destinations<J> {
    /// The record for `name`, made (unnamed, from the template) if new;
    /// `Full` when the set holds its most and none can be retired.
    pub(super) fn dest(&self, name: &str) -> Result<Arc<Dest<J>>, DestinationError> {
        let inner = &self.inner;
        let mut table = inner.lock();
        if let Some(d) = table.get(name) {
            d.touch();
            return Ok(d.clone());
        }
        if inner.is_closed() {
            return Err(DestinationError::Closed);
        }
        make_room(inner, &mut table)?;
        let d = Arc::new(Dest::new(inner, name, false, DestinationConfig::default()));
        d.touch();
        table.insert(d.name.clone(), d.clone());
        inner.known.set(table.len() as f64);
        Ok(d)
    }

    /// Takes `destination` out of the set for good: its throttle keeps
    /// delivering for up to `grace`, then what it still holds goes to the
    /// template's dead-letter sink (even with the set's journal; without a
    /// sink the journal keeps it, or it comes back here). Returns its final
    /// state and the jobs handed back, or `None` when the set did not know
    /// it. An admission that found the destination before it was removed
    /// and had not reached its throttle yet is refused (`Closed`); a job
    /// submitted for the name afterwards makes a new, unnamed destination:
    /// stop sending to it first.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::{DestinationConfig, Destinations};
    /// use dripfeed::{Delivery, Throttle};
    /// use std::time::Duration;
    /// let set = Destinations::builder(Throttle::builder().drain_rate(1.0).capacity(10))
    ///     .destination("old", DestinationConfig::default())
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// for job in 0..3 {
    ///     set.try_submit("old", job)?;
    /// }
    /// let (stats, returned) = set.remove("old", Duration::from_millis(1500)).await.unwrap();
    /// assert_eq!((stats.delivered(), returned), (2, vec![2]));
    /// assert!(!set.contains("old"));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn remove(
        &self,
        destination: &str,
        grace: Duration,
    ) -> Option<(DestinationStats, Vec<J>)> {
        let d = {
            let mut table = self.inner.lock();
            let d = table.remove(destination)?;
            // Under the table's lock: an admission that found it before
            // is refused (`Closed`) instead of making it a new throttle.
            d.retire();
            self.inner.known.set(table.len() as f64);
            d
        };
        let returned = d.close(&self.inner, grace, true).await;
        let stats = d.stats(&self.inner);
        Some((stats, returned.into_iter().map(|(_, j)| j).collect()))
    }

    /// Changes a destination's overrides at run time (making its record if
    /// new). An active destination applies its rate, ceiling and budget at
    /// once (a lower ceiling also caps its AIMD) when its ring holds a full
    /// budget at the new ceiling; if not, nothing changes and the answer is
    /// [`DestinationError::BeyondRing`], with the highest ceiling its ring
    /// holds: not clamped. An idle destination takes them when it next
    /// becomes active (its ring is sized for them then). Each call replaces
    /// every override: one left out goes back to the template's value.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::{DestinationConfig, DestinationError, Destinations};
    /// use dripfeed::{Delivery, Throttle};
    /// let set = Destinations::builder(Throttle::builder().drain_rate(10.0).max_rate(100.0))
    ///     .destination("partner", DestinationConfig::default().ceiling(20.0))
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// set.configure("partner", DestinationConfig::default().rate(15.0).ceiling(20.0))?;
    /// assert_eq!(set.stats("partner").unwrap().drain_rate(), 15.0);
    /// let err = set.configure("partner", DestinationConfig::default().rate(500.0)).unwrap_err();
    /// assert!(matches!(err, DestinationError::AboveMax { .. }));
    /// # Ok(())
    /// # }
    /// ```
    pub fn configure(
        &self,
        destination: &str,
        cfg: DestinationConfig,
    ) -> Result<(), DestinationError> {
        cfg.validate(self.inner.max_rate)?;
        fits_template(&self.inner.settings, &cfg)?;
        let d = self.dest(destination)?;
        d.configure(&self.inner, cfg)
    }

    /// Names `destination` at run time, as the builder's
    /// [`destination`](super::DestinationsBuilder::destination) does before
    /// it: a new named destination (its own metric labels, never retired
    /// for another) with the overrides `cfg`, counted in
    /// `max_destinations`. A destination the set already names is
    /// [`configure`](Self::configure)d instead. Returns whether it is new.
    ///
    /// An unnamed record of that name (made by a submission, or by the
    /// journal for a name no longer configured) is replaced when it holds
    /// nothing and has no throttle (an open breaker left by its last jobs
    /// goes with it); while it holds jobs the answer is
    /// [`DestinationError::Unnamed`] and nothing changes.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::{DestinationConfig, DestinationError, Destinations};
    /// use dripfeed::{Delivery, Throttle};
    /// let set = Destinations::builder(Throttle::builder().drain_rate(10.0).max_rate(100.0))
    ///     .max_destinations(2)
    ///     .destination("billing", DestinationConfig::default())
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// assert!(set.define("crm", DestinationConfig::default().rate(20.0))?);
    /// assert!(set.stats("crm").unwrap().is_named());
    /// assert!(!set.define("crm", DestinationConfig::default().rate(30.0))?, "changed, not new");
    /// assert_eq!(set.stats("crm").unwrap().drain_rate(), 30.0);
    /// let full = set.define("third", DestinationConfig::default()).unwrap_err();
    /// assert_eq!(full, DestinationError::Full { max: 2 });
    /// # Ok(())
    /// # }
    /// ```
    pub fn define(
        &self,
        destination: &str,
        cfg: DestinationConfig,
    ) -> Result<bool, DestinationError> {
        let inner = &self.inner;
        cfg.validate(inner.max_rate)?;
        fits_template(&inner.settings, &cfg)?;
        let existing = {
            let mut table = inner.lock();
            if inner.is_closed() {
                return Err(DestinationError::Closed);
            }
            match table.get(destination) {
                Some(d) if d.is_named() => Some(d.clone()),
                Some(d) if !d.is_empty_idle() => return Err(DestinationError::Unnamed),
                found => {
                    // A submission that found the old record makes no throttle in it.
                    if found.is_some()
                        && let Some(old) = table.remove(destination)
                    {
                        old.retire();
                    }
                    make_room(inner, &mut table)?;
                    let d = Arc::new(Dest::new(inner, destination, true, cfg));
                    table.insert(d.name.clone(), d);
                    inner.known.set(table.len() as f64);
                    None
                }
            }
        };
        match existing {
            Some(d) => d.configure(inner, cfg).map(|()| false),
            None => Ok(true),
        }
    }
}

impl<J: Send + Sync + 'static> Destinations<J> {
    /// Names and configures several destinations at once, all or none: as
    /// [`define`](Self::define) for each, but every change is checked
    /// first (its overrides, room in the set, an unnamed record still
    /// holding jobs, and an active destination's ring) while no throttle
    /// of them can start or stop, and only then are they all applied. On
    /// an error nothing changed, and it names the destination refused.
    /// Returns, in order, whether each is new. A name given twice is
    /// refused ([`DestinationError::Duplicate`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use dripfeed::destinations::{DestinationConfig, DestinationError, Destinations};
    /// use dripfeed::{Delivery, Throttle};
    /// let set = Destinations::builder(Throttle::builder().drain_rate(10.0).max_rate(100.0))
    ///     .max_destinations(2)
    ///     .destination("billing", DestinationConfig::default())
    ///     .build(|_: &str| |_: &u32, _| async { Delivery::Done })?;
    /// // Two new ones do not fit beside billing: neither is made, and
    /// // billing keeps its rate.
    /// let refused = set.define_all(&[
    ///     ("billing", DestinationConfig::default().rate(20.0)),
    ///     ("crm", DestinationConfig::default()),
    ///     ("erp", DestinationConfig::default()),
    /// ]);
    /// let refused = refused.unwrap_err();
    /// assert_eq!((refused.destination.as_str(), &refused.error), ("crm", &DestinationError::Full { max: 2 }));
    /// assert_eq!(set.stats("billing").unwrap().drain_rate(), 10.0);
    /// assert!(!set.contains("crm"));
    /// let made = set.define_all(&[
    ///     ("billing", DestinationConfig::default().rate(20.0)),
    ///     ("crm", DestinationConfig::default()),
    /// ])?;
    /// assert_eq!(made, vec![false, true]);
    /// assert_eq!(set.stats("billing").unwrap().drain_rate(), 20.0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn define_all(
        &self,
        changes: &[(&str, DestinationConfig)],
    ) -> Result<Vec<bool>, DefineError> {
        let inner = &self.inner;
        let refuse = |name: &str, error| {
            Err(DefineError {
                destination: name.to_owned(),
                error,
            })
        };
        for (i, (name, cfg)) in changes.iter().enumerate() {
            if changes[..i].iter().any(|(n, _)| n == name) {
                return refuse(name, DestinationError::Duplicate);
            }
            if let Err(e) = cfg
                .validate(inner.max_rate)
                .and_then(|()| fits_template(&inner.settings, cfg))
            {
                return refuse(name, e);
            }
        }
        let mut table = inner.lock();
        if inner.is_closed() {
            let first = changes.first().map_or("", |(n, _)| n);
            return refuse(first, DestinationError::Closed);
        }
        // What each change finds: a named record (configured under its
        // hold), an empty unnamed one (replaced), or nothing (made).
        let mut named = Vec::new();
        let mut made = 0usize;
        for (i, (name, _)) in changes.iter().enumerate() {
            match table.get(*name) {
                Some(d) if d.is_named() => named.push((i, d.clone())),
                Some(d) if !d.is_empty_idle() => {
                    return refuse(name, DestinationError::Unnamed);
                }
                Some(_) => {}
                None => made += 1,
            }
        }
        // Room for the new ones: the records idle longest that may be
        // retired (none of the names changed), chosen now and retired only
        // once every check has passed.
        let need = (table.len() + made).saturating_sub(inner.max_destinations);
        let mut victims: Vec<_> = table
            .values()
            .filter(|d| d.retirable() && !changes.iter().any(|(n, _)| **n == *d.name))
            .map(|d| (d.last_active(), d.name.clone()))
            .collect();
        if victims.len() < need
            && let Some((name, _)) = changes.iter().find(|(n, _)| !table.contains_key(*n))
        {
            return refuse(
                name,
                DestinationError::Full {
                    max: inner.max_destinations,
                },
            );
        }
        victims.sort();
        victims.truncate(need);
        // Every named one held (in name order: no two holders wait on
        // each other), and checked before any is changed.
        named.sort_by(|a, b| a.1.name.cmp(&b.1.name));
        let held: Vec<_> = named.iter().map(|(i, d)| (*i, d, d.hold_slot())).collect();
        for (i, d, live) in &held {
            if let Err(e) = d.check_configure(inner, &changes[*i].1, live) {
                return refuse(changes[*i].0, e);
            }
        }
        for (i, d, live) in &held {
            d.configure_held(inner, changes[*i].1, live);
        }
        drop(held);
        for (_, gone) in victims {
            if let Some(d) = table.remove(&gone) {
                d.retire(); // a submission that found it makes no throttle in it
            }
        }
        let mut new = vec![false; changes.len()];
        for (i, (name, cfg)) in changes.iter().enumerate() {
            if named.iter().any(|(j, _)| *j == i) {
                continue;
            }
            if let Some(old) = table.remove(*name) {
                old.retire(); // an empty unnamed record, replaced
            }
            let d = Arc::new(Dest::new(inner, name, true, *cfg));
            table.insert(d.name.clone(), d);
            new[i] = true;
        }
        inner.known.set(table.len() as f64);
        Ok(new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Delivery, Reason, Throttle};

    #[tokio::test(start_paused = true)]
    async fn define_all_retires_the_idlest_unnamed_records_it_needs_room_from() {
        let set = Destinations::builder(Throttle::builder().drain_rate(100.0).capacity(10))
            .max_destinations(3)
            .idle_after(Duration::from_millis(10))
            .build(|_: &str| |_: &u32, _| async { Delivery::Done })
            .unwrap();
        for (n, name) in ["old", "mid", "new"].into_iter().enumerate() {
            set.try_submit(name, n as u32).unwrap();
            tokio::time::sleep(Duration::from_secs(1)).await; // delivered, idle
        }
        let made = set
            .define_all(&[
                ("a", DestinationConfig::default()),
                ("b", DestinationConfig::default()),
            ])
            .unwrap();
        assert_eq!(made, vec![true, true]);
        assert!(
            !set.contains("old") && !set.contains("mid"),
            "the two idle longest went"
        );
        assert!(set.contains("new") && set.contains("a") && set.contains("b"));
        let full = set
            .define_all(&[
                ("c", DestinationConfig::default()),
                ("d", DestinationConfig::default()),
            ])
            .unwrap_err();
        assert_eq!(full.error, DestinationError::Full { max: 3 });
        assert!(!set.contains("c") && set.contains("new"), "nothing changed");
    }

    #[tokio::test(start_paused = true)]
    async fn an_admission_racing_a_removal_is_refused_not_orphaned() {
        let set = Destinations::builder(Throttle::builder().drain_rate(1.0).capacity(10))
            .build(|_: &str| |_: &u32, _| async { Delivery::Done })
            .unwrap();
        set.try_submit("a", 1).unwrap();
        // An admission that found the record before the removal took it.
        let found = set.dest("a").unwrap();
        let (stats, returned) = set.remove("a", Duration::from_secs(5)).await.unwrap();
        assert_eq!((stats.delivered(), returned.len()), (1, 0));
        let refused = found
            .try_submit(&set.inner, 2, |t, j| t.try_submit(j))
            .unwrap_err();
        assert_eq!(refused.reason(), Reason::Closed);
        assert!(!found.is_active(), "no throttle made for a removed record");
        assert_eq!(set.held(), 0, "the refused job holds no place");
        assert!(!set.contains("a"));
    }

    #[tokio::test(start_paused = true)]
    async fn define_replaces_an_emptied_unnamed_record_whatever_its_breaker() {
        use crate::destinations::BreakerConfig;
        let breaker = BreakerConfig::default().trip_after(1);
        let set = Destinations::builder(Throttle::builder().drain_rate(100.0))
            .breaker(breaker)
            .idle_after(Duration::from_millis(100))
            .build(|_: &str| |_: &u32, _| async { Delivery::Failed })
            .unwrap();
        set.try_submit("old", 1).unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let before = set.stats("old").unwrap();
        assert_eq!(before.failed() + before.dead_lettered(), 1);
        assert_ne!(before.breaker(), crate::destinations::BreakerState::Closed);
        assert!(set.define("old", DestinationConfig::default()).unwrap());
        assert!(set.stats("old").unwrap().is_named());
    }
}
