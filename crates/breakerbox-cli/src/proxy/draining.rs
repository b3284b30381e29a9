//! The upstreams a reload removed whose requests in flight have not all ended: what
//! `/status` lists under `draining` until the config they belong to is freed.

use std::sync::{Mutex, PoisonError, Weak};

use breakerbox::{Clock, MonotonicClock, Nanos};
use serde_json::{json, Value};

use super::forward::Proxy;

/// The replaced configs still held by a request, each with the upstreams only it had.
#[derive(Default)]
pub struct Draining {
    entries: Mutex<Vec<Entry>>,
    clock: MonotonicClock,
}

/// One replaced config: its removed upstreams, the generation that replaced it, since
/// when, and the config itself (held only by its last requests and idle workers).
struct Entry {
    upstreams: Vec<String>,
    replaced_by: u64,
    since: Nanos,
    config: Weak<Proxy>,
}

impl Draining {
    /// Lists `upstreams`, removed by the reload to generation `replaced_by`, until
    /// `config` (the config they were in) is freed.
    pub fn add(&self, upstreams: Vec<String>, replaced_by: u64, config: Weak<Proxy>) {
        let entry = Entry {
            upstreams,
            replaced_by,
            since: self.clock.now(),
            config,
        };
        self.lock().push(entry);
    }

    /// Drops the entries whose config is freed; whether any is left for `config`.
    pub fn still_held(&self, config: &Weak<Proxy>) -> bool {
        self.pruned().iter().any(|e| e.config.ptr_eq(config))
    }

    /// The `draining` section of `/status`: one object per replaced config still held,
    /// oldest first (`upstreams`, `replaced_by_generation`, `for_ms`).
    pub fn status(&self) -> Value {
        let now = self.clock.now();
        Value::Array(
            self.pruned()
                .iter()
                .map(|e| {
                    let held = now.saturating_sub(e.since).as_duration();
                    json!({
                        "upstreams": e.upstreams,
                        "replaced_by_generation": e.replaced_by,
                        "for_ms": u64::try_from(held.as_millis()).unwrap_or(u64::MAX),
                    })
                })
                .collect(),
        )
    }

    /// The entries, without those whose config is freed.
    fn pruned(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        let mut entries = self.lock();
        entries.retain(|e| e.config.strong_count() > 0);
        entries
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
