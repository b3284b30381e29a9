//! The core crate's engine-generic scenario suite (`breakerbox/tests/scenarios/shared`),
//! the very same files, run against the Redis engine: strict mode, the scripts' time
//! driven by a `ManualClock` from zero, one `redis-server` per test.

#![allow(clippy::unwrap_used)] // tests unwrap

#[path = "support/redis_server.rs"]
mod redis_server;

#[path = "../../breakerbox/tests/scenarios"]
mod scenarios {
    pub(crate) mod engine;

    /// The scenarios every engine must pass.
    #[allow(dead_code)] // the scenarios `on_redis!` excludes (engine differences)
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

#[path = "support/redis_engine.rs"]
mod redis_engine;

#[macro_use]
#[path = "support/scenario_list.rs"]
mod scenario_list;

/// Stamps one `#[test]` per named scenario of `scenarios::shared::$module`, on the Redis
/// engine, under the scenario's own name (in a module named after the file).
macro_rules! on_redis {
    ($($module:ident: [$($name:ident),+ $(,)?])+) => {
        $(
            mod $module {
                $(
                    #[test]
                    fn $name() {
                        $crate::scenarios::shared::$module::$name::<
                            $crate::redis_engine::RedisEngine,
                        >();
                    }
                )+
            }
        )+
    };
}

with_shared_scenarios!(on_redis);
