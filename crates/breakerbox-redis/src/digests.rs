//! The SHA1 digests Redis gave a set of scripts, and the loads that make them: one load
//! of a script at a time, on a task of its own, so that a caller whose timeout runs out
//! does not take the load with it.
//!
//! Callers that find no digest (or met `NOSCRIPT`) join the load under way instead of each
//! sending the whole source. Thousands of breakers made at once sent one `SCRIPT LOAD` per
//! read in flight, and the first reads timed out behind them. And a load whose caller gave
//! up (Redis stalled past the timeout) still ends, its digest kept for the next caller:
//! before, every caller that timed out while Redis was stalled left one more `SCRIPT LOAD`
//! for it to run when it came back.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use redis::{ErrorKind, RedisError};

use crate::shared_task::{spawn_shared, SharedTask};
use crate::target::RedisConnection;

/// A `SCRIPT LOAD` that any number of callers can await.
type Loading = SharedTask<String>;

/// One script's digest and the load under way (or ended and not yet taken).
#[derive(Default)]
struct Slot {
    sha: Option<String>,
    loading: Option<Loading>,
}

/// The digests of `N` scripts, indexed by the caller's script kinds.
pub(crate) struct Digests<const N: usize> {
    slots: Mutex<[Slot; N]>,
    /// How many loads of each script were started: a caller that met `NOSCRIPT` with the
    /// digest it found when it saw `seen` loads takes a digest from a later load only.
    loads: [AtomicU64; N],
}

impl<const N: usize> Default for Digests<N> {
    fn default() -> Self {
        Digests {
            slots: Mutex::new(std::array::from_fn(|_| Slot::default())),
            loads: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl<const N: usize> std::fmt::Debug for Digests<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Digests").finish_non_exhaustive()
    }
}

impl<const N: usize> Digests<N> {
    fn slots(&self) -> MutexGuard<'_, [Slot; N]> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The digest of script `index`, if one was loaded.
    pub(crate) fn sha(&self, index: usize) -> Option<String> {
        self.slots().get(index).and_then(|slot| slot.sha.clone())
    }

    /// How many loads of script `index` were started so far.
    pub(crate) fn loads(&self, index: usize) -> u64 {
        self.loads
            .get(index)
            .map_or(0, |loads| loads.load(Ordering::Acquire))
    }

    /// Forgets every digest and every load under way (the scripts are loaded again on
    /// next use).
    pub(crate) fn forget(&self) {
        for slot in self.slots().iter_mut() {
            *slot = Slot::default();
        }
    }

    /// The digest of script `index` loaded from `source` on the server that holds `key`
    /// (on a cluster, the primary of its slot): the one of a load started since the
    /// caller saw `seen` loads, if there is one, or of the load under way, or of a new one.
    pub(crate) async fn load(
        &self,
        conn: &RedisConnection,
        index: usize,
        source: &'static str,
        key: &str,
        seen: u64,
    ) -> Result<String, RedisError> {
        let attempt = {
            let mut slots = self.slots();
            let Some(slot) = slots.get_mut(index) else {
                return Err(RedisError::from((ErrorKind::Client, "no such script")));
            };
            match (&slot.sha, &slot.loading) {
                (Some(sha), None) if self.loads(index) != seen => return Ok(sha.clone()),
                (_, Some(loading)) if !matches!(loading.peek(), Some(Err(_))) => loading.clone(),
                _ => {
                    let mut conn = conn.clone();
                    let key = key.to_string();
                    let loading = spawn_shared(
                        async move { conn.load_script(source, &key).await },
                        "the script's load ended without a digest",
                    );
                    if let Some(loads) = self.loads.get(index) {
                        loads.fetch_add(1, Ordering::AcqRel);
                    }
                    slot.loading = Some(loading.clone());
                    loading
                }
            }
        };
        let result = attempt.clone().await;
        let mut slots = self.slots();
        if let Some(slot) = slots.get_mut(index) {
            if slot.loading.as_ref().is_some_and(|l| l.ptr_eq(&attempt)) {
                slot.loading = None;
                if let Ok(sha) = &result {
                    slot.sha = Some(sha.clone());
                }
            }
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_cache_has_no_digest_and_no_load() {
        let digests = Digests::<2>::default();
        assert_eq!(digests.sha(0), None);
        assert_eq!(digests.loads(1), 0);
        // Out of range: nothing, never a panic.
        assert_eq!(digests.sha(7), None);
        assert_eq!(digests.loads(7), 0);
    }
}
