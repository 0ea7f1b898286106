//! Open things counted per key (a user's heavy requests, an address's connections), each key
//! held to a limit: a place is a guard that gives itself back when dropped.

use std::{
    collections::HashMap,
    hash::Hash,
    sync::{Arc, Mutex},
};

/// Clones share the counts.
#[derive(Debug)]
pub struct Tally<K: Eq + Hash + Clone>(Arc<Mutex<HashMap<K, usize>>>);

impl<K: Eq + Hash + Clone> Clone for Tally<K> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<K: Eq + Hash + Clone> Default for Tally<K> {
    fn default() -> Self {
        Self(Arc::default())
    }
}

/// One place of a key in its tally, given back when dropped (also when a job panics).
#[derive(Debug)]
pub struct Place<K: Eq + Hash + Clone> {
    tally: Arc<Mutex<HashMap<K, usize>>>,
    key: K,
}

impl<K: Eq + Hash + Clone> Tally<K> {
    /// A place of `key` and how many it held before, unless it holds `limit` already.
    pub fn take(&self, key: K, limit: usize) -> Option<(Place<K>, usize)> {
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let count = held.entry(key.clone()).or_default();
        if *count >= limit {
            return None;
        }
        let before = *count;
        *count += 1;
        let place = Place {
            tally: Arc::clone(&self.0),
            key,
        };
        Some((place, before))
    }

    /// Whether every place was given back.
    pub fn is_empty(&self) -> bool {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).is_empty()
    }
}

impl<K: Eq + Hash + Clone> Drop for Place<K> {
    fn drop(&mut self) {
        let mut held = self.tally.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = held.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.key);
            }
        }
    }
}
