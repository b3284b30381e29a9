//! Behaviour of the in-memory engine, scenario by scenario, through the public API only:
//! `CircuitBreaker` on a `ManualClock`, permits, `call` / `call_async`, snapshots, manual
//! control, listeners and the registry.
//!
//! The engine-generic scenarios (`scenarios/shared/*.rs`, written against
//! `scenarios/engine.rs`) run here on the in-memory engine and, unchanged, on the Redis
//! engine in `breakerbox-redis/tests/shared_scenarios.rs`.

// The generic scenarios are plain functions, not `#[test]`s, so clippy's
// allow-unwrap-in-tests does not reach them.
#![allow(clippy::unwrap_used)]

/// Stamps one `#[test]` per named scenario of `scenarios::shared::$module`, on the
/// in-memory engine, under the scenario's own name; and once more through the breaker
/// contract alone (`breakerbox::contract`, what every integration uses), in a module
/// `through_contract`.
macro_rules! in_memory_scenarios {
    ($module:ident: $($name:ident),+ $(,)?) => {
        $(
            #[test]
            fn $name() {
                $crate::scenarios::shared::$module::$name::<
                    $crate::scenarios::in_memory::InMemory,
                >();
            }
        )+

        mod through_contract {
            $(
                #[test]
                fn $name() {
                    $crate::scenarios::shared::$module::$name::<
                        $crate::scenarios::through_contract::ThroughContract,
                    >();
                }
            )+
        }
    };
}

mod scenarios {
    mod backoff;
    mod calls;
    mod check;
    mod closed;
    mod config_errors;
    mod deadlines;
    pub(crate) mod engine;
    mod events;
    mod half_open;
    pub(crate) mod in_memory;
    mod manual;
    mod ramp;
    mod registry;
    mod shadow;
    pub(crate) mod support;
    pub(crate) mod through_contract;

    /// The scenarios every engine must pass.
    pub(crate) mod shared {
        pub(crate) mod backoff;
        pub(crate) mod closed;
        pub(crate) mod deadlines;
        pub(crate) mod half_open;
        pub(crate) mod manual;
        pub(crate) mod ramp;
        pub(crate) mod shadow;
    }
}
