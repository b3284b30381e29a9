//! The registry: breakers per key from a template, bounded, evicting only what is safe to
//! forget.

use std::sync::Arc;
use std::time::Duration;

use breakerbox::{Config, ManualClock, Phase, Registry, RegistryFull};

use super::support::Recorder;

fn template() -> Config {
    Config::builder()
        .consecutive_failures(2)
        .recovery_timeout(Duration::from_secs(10))
        .build()
        .expect("a valid template")
}

fn registry(capacity: usize) -> (ManualClock, Registry<String, ManualClock>) {
    let clock = ManualClock::new();
    let registry =
        Registry::with_clock(template(), capacity, clock.clone()).expect("a valid template");
    (clock, registry)
}

fn key(name: &str) -> String {
    name.to_string()
}

fn names(registry: &Registry<String, ManualClock>) -> Vec<String> {
    registry.snapshots().into_iter().map(|s| s.name).collect()
}

#[test]
fn breakers_are_created_on_demand_from_the_template_and_shared_per_key() {
    let recorder = Recorder::default();
    let (_clock, registry) = registry(10);
    let registry = registry.with_listener(Arc::new(recorder.listener()));
    assert!(registry.is_empty());
    let api = registry.get(&key("api.example.com")).unwrap();
    assert_eq!(api.name(), "api.example.com");
    assert_eq!(api.config(), &template());
    let again = registry.get(&key("api.example.com")).unwrap();
    api.try_acquire().unwrap().failure();
    again.try_acquire().unwrap().failure();
    assert_eq!(api.phase(), Phase::Open, "both handles share one breaker");
    assert_eq!(registry.len(), 1);
    assert_eq!(recorder.transitions(), [(Phase::Closed, Phase::Open)]);
    let other = registry.get(&key("db")).unwrap();
    assert_eq!(other.phase(), Phase::Closed);
    assert_eq!(names(&registry), ["api.example.com", "db"]);
}

#[test]
fn the_registry_is_bounded_and_evicts_the_least_recently_used_idle_closed_breaker() {
    let (clock, registry) = registry(2);
    let tick = || clock.advance(Duration::from_millis(1));
    drop(registry.get(&key("a")).unwrap());
    tick();
    drop(registry.get(&key("b")).unwrap());
    tick();
    drop(registry.get(&key("a")).unwrap()); // a is now the most recently used
    tick();
    drop(registry.get(&key("c")).unwrap());
    assert_eq!(registry.len(), 2);
    assert_eq!(
        names(&registry),
        ["a", "c"],
        "b was the least recently used"
    );
    for i in 0..50 {
        tick();
        drop(registry.get(&format!("key-{i}")).unwrap());
        assert!(registry.len() <= 2);
    }
}

#[test]
fn a_breaker_in_use_is_not_evicted() {
    let (clock, registry) = registry(2);
    let held = registry.get(&key("a")).unwrap();
    clock.advance(Duration::from_millis(1));
    drop(registry.get(&key("b")).unwrap());
    clock.advance(Duration::from_millis(1));
    drop(registry.get(&key("c")).unwrap());
    assert_eq!(names(&registry), ["a", "c"], "a is older but held");
    drop(held);
}

#[test]
fn open_half_open_and_overridden_breakers_are_never_evicted() {
    let (clock, registry) = registry(4);
    let trip = |name: &str| {
        let breaker = registry.get(&key(name)).unwrap();
        breaker.try_acquire().unwrap().failure();
        breaker.try_acquire().unwrap().failure();
        assert_eq!(breaker.phase(), Phase::Open);
    };
    trip("open");
    trip("half-open");
    clock.advance(Duration::from_secs(10));
    let probe = registry
        .get(&key("half-open"))
        .unwrap()
        .try_acquire_owned()
        .unwrap();
    drop(probe); // the slot is freed but the breaker stays half-open
    assert_eq!(
        registry.get(&key("half-open")).unwrap().phase(),
        Phase::HalfOpen
    );
    registry.get(&key("forced")).unwrap().force_open();
    registry.get(&key("disabled")).unwrap().disable();
    clock.advance(Duration::from_secs(1));

    assert_eq!(
        registry.get(&key("new")).unwrap_err(),
        RegistryFull { capacity: 4 }
    );
    assert_eq!(registry.len(), 4);
    assert_eq!(
        names(&registry),
        ["disabled", "forced", "half-open", "open"]
    );
    let message = RegistryFull { capacity: 4 }.to_string();
    assert!(message.contains('4'), "{message}");

    // Once one of them is reset to an idle closed breaker, it can make room.
    registry.get(&key("forced")).unwrap().reset();
    assert!(registry.get(&key("new")).is_ok());
    assert_eq!(names(&registry), ["disabled", "half-open", "new", "open"]);
}

#[test]
fn registry_refuses_an_invalid_template() {
    let mut config = template();
    config.max_probes = 0;
    let err = Registry::<String, ManualClock>::with_clock(config, 10, ManualClock::new())
        .expect_err("an invalid template is refused");
    assert_eq!((err.field(), err.value()), ("max_probes", "0"));
}
