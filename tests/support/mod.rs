//! Helpers shared by the integration tests.
#![allow(dead_code)]

#[cfg(feature = "redis")]
pub mod fleet;
pub mod fragile;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod redis;
pub mod sim;

use std::sync::{Arc, Mutex};

use dripfeed::{Attempt, Delivery, Downstream};
use tokio::time::Instant;

/// A downstream that records each job with the instant it was delivered.
#[derive(Clone, Default)]
pub struct Recorder<J> {
    pub seen: Arc<Mutex<Vec<(J, Instant)>>>,
}

impl<J: Clone + Send + Sync + 'static> Recorder<J> {
    pub fn new() -> Self {
        Recorder {
            seen: Arc::new(Mutex::new(Vec::new())),
        }
    }

    pub fn jobs(&self) -> Vec<J> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|(j, _)| j.clone())
            .collect()
    }

    pub fn times(&self) -> Vec<Instant> {
        self.seen.lock().unwrap().iter().map(|(_, t)| *t).collect()
    }

    pub fn len(&self) -> usize {
        self.seen.lock().unwrap().len()
    }
}

#[async_trait::async_trait]
impl<J: Clone + Send + Sync + 'static> Downstream<J> for Recorder<J> {
    async fn deliver(&self, job: &J, _attempt: Attempt) -> Delivery {
        self.seen
            .lock()
            .unwrap()
            .push((job.clone(), Instant::now()));
        Delivery::Done
    }
}

/// Lets spawned tasks run without moving paused time.
pub async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}
