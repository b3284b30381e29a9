//! A Redis breaker's options as a config file table (feature `serde`).
#![cfg(feature = "serde")]

use std::time::Duration;

use breakerbox_redis::{Backoff, Fallback, LocalView, Mode, RedisOptions, StoreOptions};

fn read(text: &str) -> Result<RedisOptions, String> {
    toml::from_str::<RedisOptions>(text).map_err(|e| e.message().to_string())
}

#[test]
fn every_key_reaches_the_options() {
    let o = read(
        r#"
        prefix = "app:"
        ttl = "1h"
        timeout = "250ms"
        probe_lease = "5s"
        mode = "local_view"
        fallback = "fail_closed"

        [local_view]
        flush_interval = "200ms"
        failure_flush_interval = "5ms"
        batch_size = 64
        refresh_interval = "2s"

        [backoff]
        min = "10ms"
        max = "1s"
        "#,
    )
    .unwrap();
    let store = StoreOptions {
        prefix: "app:".into(),
        ttl: Duration::from_secs(3600),
        timeout: Duration::from_millis(250),
        probe_lease: Duration::from_secs(5),
        ..StoreOptions::default()
    };
    assert_eq!(o.store, store);
    assert_eq!(
        o.mode,
        Mode::LocalView(LocalView {
            flush_interval: Duration::from_millis(200),
            failure_flush_interval: Duration::from_millis(5),
            batch_size: 64,
            refresh_interval: Duration::from_secs(2),
        })
    );
    assert_eq!(o.fallback, Fallback::FailClosed);
    assert_eq!(
        o.backoff,
        Backoff {
            min: Duration::from_millis(10),
            max: Duration::from_secs(1),
        }
    );
}

#[test]
fn an_empty_table_gives_the_builder_defaults() {
    let o = read("").unwrap();
    assert_eq!(o, RedisOptions::default());
    assert_eq!(o.store, StoreOptions::default());
    assert_eq!(o.mode, Mode::default());
    assert_eq!(o.fallback, Fallback::LocalBreaker);
    assert_eq!(o.backoff, Backoff::default());
    let o = read("[local_view]\nbatch_size = 10\n").unwrap();
    let Mode::LocalView(view) = o.mode else {
        panic!("{o:?}")
    };
    assert_eq!(view.flush_interval, LocalView::default().flush_interval);
}

#[test]
fn options_survive_a_round_trip_through_toml() {
    let odd = Duration::new(1, 234_567_891);
    let mut cases = vec![RedisOptions::default()];
    for fallback in [Fallback::FailOpen, Fallback::FailClosed] {
        let mut o = RedisOptions::default();
        o.fallback = fallback;
        o.mode = Mode::Strict;
        o.store.timeout = odd;
        cases.push(o);
    }
    let mut o = RedisOptions::default();
    o.mode = Mode::LocalView(LocalView {
        flush_interval: odd,
        failure_flush_interval: Duration::ZERO,
        batch_size: 1,
        refresh_interval: Duration::from_nanos(7),
    });
    o.store.prefix = "x\"y:".into();
    o.store.node_id = 42;
    o.backoff = Backoff {
        min: Duration::from_nanos(1),
        max: odd,
    };
    cases.push(o);
    for o in cases {
        let text = toml::to_string(&o).unwrap();
        assert_eq!(read(&text).unwrap(), o, "{text}");
    }
}

#[test]
fn node_id_is_an_integer_or_a_name_that_names_the_same_node_everywhere() {
    assert_eq!(read("node_id = 7").unwrap().store.node_id, 7);
    let web3 = read("node_id = \"web-3\"").unwrap().store.node_id;
    assert_eq!(read("node_id = \"web-3\"").unwrap().store.node_id, web3);
    assert_ne!(read("node_id = \"web-4\"").unwrap().store.node_id, web3);
    assert_ne!(web3, 0);
    // Unset: this process's own random id, the builder's default.
    assert_eq!(
        read("").unwrap().store.node_id,
        StoreOptions::default().node_id
    );
    assert!(!toml::to_string(&RedisOptions::default())
        .unwrap()
        .contains("node_id"));
}

#[test]
fn errors_name_their_key() {
    let cases = [
        ("timeout = 100", "timeout: invalid duration 100"),
        ("ttl = \"1 day\"", "ttl: invalid duration \"1 day\""),
        ("probe_lease = \"0s\"", "probe_lease: invalid value 0s"),
        ("mode = \"lazy\"", "mode: invalid value \"lazy\""),
        ("fallback = \"open\"", "fallback: invalid value \"open\""),
        (
            "mode = \"strict\"\n[local_view]\nbatch_size = 10",
            "local_view: set with mode = \"strict\"",
        ),
        (
            "[local_view]\nflush_interval = 1",
            "local_view.flush_interval: invalid duration 1",
        ),
        (
            "[local_view]\nbatch_size = 0",
            "local_view.batch_size: invalid value 0",
        ),
        (
            "[backoff]\nmin = \"1s\"\nmax = \"10ms\"",
            "backoff.min: invalid value 1s",
        ),
        (
            "[backoff]\nmax = \"soon\"",
            "backoff.max: invalid duration \"soon\"",
        ),
        ("node_id = 0", "node_id: invalid value 0"),
        ("node_id = -3", "node_id: invalid value -3"),
        ("node_id = \" \"", "node_id: invalid value \"\""),
        ("node_id = 1.5", "node_id: invalid value 1.5"),
        ("node_id = true", "node_id: invalid value true"),
    ];
    for (text, start) in cases {
        let message = read(text).expect_err(text);
        assert!(message.starts_with(start), "{text:?}: {message}");
    }
    for unknown in [
        "prefx = \"a\"",
        "[local_view]\nbatch = 1",
        "[backoff]\nmaximum = \"1s\"",
    ] {
        let message = read(unknown).expect_err(unknown);
        assert!(message.contains("unknown field"), "{unknown:?}: {message}");
    }
}
