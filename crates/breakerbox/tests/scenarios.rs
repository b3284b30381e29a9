//! Behaviour of the in-memory engine, scenario by scenario, through the public API only:
//! `CircuitBreaker` on a `ManualClock`, permits, `call` / `call_async`, snapshots, manual
//! control, listeners and the registry.

mod scenarios {
    mod backoff;
    mod calls;
    mod closed;
    mod config_errors;
    mod events;
    mod half_open;
    mod manual;
    mod registry;
    pub(crate) mod support;
}
