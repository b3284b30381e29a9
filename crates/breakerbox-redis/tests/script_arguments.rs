//! The Lua scripts called with arguments no caller in this crate sends (no token, no
//! channel, a sharded channel, override durations out of range, node ids that are not
//! numbers), straight through `EVAL` with `ScriptKind::source`. Each test kills mutants of
//! `scripts/lua_mutants.py` (named in its comment) that the differential test lets live.

#![allow(clippy::unwrap_used)] // tests unwrap

#[path = "support/redis_server.rs"]
mod redis_server;
#[path = "support/script_store.rs"]
mod script_store;

use std::time::Duration;

use breakerbox::{Config, Phase};
use breakerbox_redis::ScriptKind;
use redis_server::RedisServer;
use script_store::{failure, store};

/// The config as `parse_config` (common.lua) reads it, for a config with a consecutive-
/// failure rule and no window, deadline or ramp (as `RedisStore` sends it).
fn encoded(config: &Config) -> String {
    let us = |d: Duration| d.as_micros().to_string();
    format!(
        "{},n,0,0,0,0,0,0,-1,{},{:?},{},{:?},{},{},{},2000000,0,-1,-1,{},0,0",
        config.consecutive_failures.unwrap(),
        us(config.recovery_timeout),
        config.backoff_multiplier,
        us(config.max_open_duration),
        config.jitter,
        config.max_probes,
        config.required_successes,
        us(config.half_open_timeout),
        config.quorum.max(1),
    )
}

/// Runs `kind` with `args` (ARGV) on `key`, as `RedisStore` would but with any arguments.
fn eval(server: &RedisServer, kind: ScriptKind, key: &str, args: &[&str]) -> Vec<String> {
    let mut conn = redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let reply: Vec<redis::Value> = redis::cmd("EVAL")
        .arg(kind.source())
        .arg(1)
        .arg(key)
        .arg(args)
        .query(&mut conn)
        .unwrap();
    reply
        .into_iter()
        .map(|v| redis::from_redis_value::<String>(v).unwrap_or_default())
        .collect()
}

// acquire.lua: `tok == nil or tok == ''` (the default lease token), and common.lua's
// `ARGV[5] ~= nil and ARGV[5] ~= ''` (no channel): a caller that sends no token, or no
// channel and no token (every caller in this crate sends both), gets a probe slot leased
// to token 0, and the state stays readable.
#[tokio::test]
async fn a_probe_acquired_without_a_token_is_leased_to_token_zero() {
    let server = RedisServer::start();
    let config = Config::builder()
        .consecutive_failures(1)
        .recovery_timeout(Duration::from_secs(1))
        .max_probes(2)
        .build()
        .unwrap();
    let store = store(&server, "tokenless", &config);
    store.record(&[failure()], Some(1_000), 0.0).await.unwrap();
    let config_arg = encoded(&config);
    let head = ["2000000", "60000", "0", config_arg.as_str()];
    let no_channel = eval(&server, ScriptKind::Acquire, store.key(), &head);
    let empty: Vec<&str> = head.iter().copied().chain(["", ""]).collect();
    let no_token = eval(&server, ScriptKind::Acquire, store.key(), &empty);
    for reply in [&no_channel, &no_token] {
        assert_eq!(
            &reply[..4],
            ["admit", &reply[1], "1", "0"],
            "a probe of token 0"
        );
    }
    let leases = server
        .command(&["HGET", "bb:{tokenless}", "leases"])
        .unwrap();
    assert!(leases.starts_with("0:"), "{leases}");
    let read = store.read(Some(2_000_001)).await.unwrap();
    assert_eq!(read.repaired, None);
    assert_eq!(
        (read.reply.state.phase, read.reply.state.in_flight),
        (Phase::HalfOpen, 2)
    );
}

// common.lua `publish`: news on a sharded channel ("s:") goes out with SPUBLISH, and with
// PUBLISH where the server has no SPUBLISH.
#[tokio::test]
async fn sharded_news_falls_back_to_publish_where_spublish_is_missing() {
    let config = Config::builder().consecutive_failures(2).build().unwrap();
    let config_arg = encoded(&config);
    let args = [
        "1000",
        "60000",
        "0",
        config_arg.as_str(),
        "s:news",
        "shadow",
        "1",
    ];
    for spublish in [true, false] {
        let server = if spublish {
            RedisServer::start()
        } else {
            RedisServer::start_with(&["--rename-command", "SPUBLISH", ""], None)
        };
        let client = redis::Client::open(server.url()).unwrap();
        let mut conn = client.get_connection().unwrap();
        let mut pubsub = conn.as_pubsub();
        pubsub.subscribe("news").unwrap();
        // A generous timeout (the machine may be busy); silence is told by a marker
        // message sent after the script, not by waiting.
        pubsub
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        // The subscription is in place once a message sent after it arrives (a busy
        // server may read another connection's command first).
        server.command(&["PUBLISH", "news", "ready"]).unwrap();
        while pubsub
            .get_message()
            .unwrap()
            .get_payload::<String>()
            .unwrap()
            != "ready"
        {}
        let reply = eval(&server, ScriptKind::Manual, "bb:{news}", &args);
        assert_eq!(reply[0], "done", "SPUBLISH there: {spublish}");
        server.command(&["PUBLISH", "news", "marker"]).unwrap();
        // SPUBLISH reaches shard subscribers only; PUBLISH reaches this one.
        let first: String = pubsub.get_message().unwrap().get_payload().unwrap();
        let heard = first != "marker";
        assert_eq!(heard, !spublish, "SPUBLISH there: {spublish}: {first}");
    }
}

// manual.lua: `d == nil or d < 0 or now + d >= 2^53`: an override lasts 0 us or more, and
// ends before 2^53 us (the store refuses longer ones before sending them).
#[tokio::test]
async fn an_override_duration_is_checked_at_both_ends_of_its_range() {
    let server = RedisServer::start();
    let config = Config::builder().consecutive_failures(2).build().unwrap();
    let config_arg = encoded(&config);
    for (duration, until) in [
        ("x", None),
        ("-5", None),
        ("0", Some("1000")),
        ("9007199254739991", Some("9007199254740991")),
        ("9007199254739992", None),
    ] {
        let args = [
            "1000",
            "60000",
            "0",
            config_arg.as_str(),
            "",
            "force_open",
            duration,
        ];
        let reply = eval(&server, ScriptKind::Manual, "bb:{range}", &args);
        match until {
            Some(until) => {
                assert_eq!(reply[0], "done", "{duration}");
                let stored = server.command(&["HGET", "bb:{range}", "until"]).unwrap();
                assert_eq!(stored, until, "{duration}");
            }
            None => assert_eq!(reply[0], "error", "{duration}: {reply:?}"),
        }
    }
}

// record.lua: `type(node) ~= 'string' or not string.match(node, '^%d+$') or
// string.len(node) > 20`: a node id is up to 20 digits; anything else is node 0 in the
// record of failing nodes (rule 21).
#[tokio::test]
async fn a_node_id_that_is_not_up_to_twenty_digits_is_filed_as_node_zero() {
    let server = RedisServer::start();
    let config = Config::builder()
        .consecutive_failures(3)
        .quorum(2)
        .build()
        .unwrap();
    let config_arg = encoded(&config);
    let twenty = "12345678901234567890";
    let cases: [(Option<&str>, &str); 4] = [
        (Some("abc"), "0"),
        (Some("123456789012345678901"), "0"),
        (Some(twenty), twenty),
        (None, "0"),
    ];
    for (i, (node, filed)) in cases.into_iter().enumerate() {
        let key = format!("bb:{{node-{i}}}");
        // One failure of a normal permit of generation 0, filed at 1 ms.
        let mut args = vec!["1000", "60000", "0", config_arg.as_str(), "", "1"];
        args.extend(["0", "0", "1", "0", "-1", "0", "0", "1"]);
        args.extend(node);
        let reply = eval(&server, ScriptKind::Record, &key, &args);
        assert_eq!(reply[0], "batch", "{node:?}: {reply:?}");
        let stored = server.command(&["HGET", &key, "quorum"]).unwrap();
        assert!(
            stored.ends_with(&format!(",{filed}:1:1000")),
            "{node:?}: {stored}"
        );
    }
}

// common.lua `open_duration`: the jitter sample (ARGV[3]) is clamped to [0, 1], NaN as 0,
// with or without jitter configured: a sample no caller sends shortens an open phase by
// at most the jitter, and never makes its end a NaN (which `%d` wrote as a garbage
// integer before the clamp became `math.max(0, math.min(r, 1))`).
#[tokio::test]
async fn a_jitter_sample_outside_zero_to_one_is_clamped() {
    let server = RedisServer::start();
    let cases = [
        (0.5, "-1", 10_000_000),
        (0.5, "0.5", 7_500_000),
        (0.5, "2", 5_000_000),
        (0.5, "inf", 5_000_000),
        (0.5, "nan", 10_000_000),
        (0.0, "nan", 10_000_000),
        (0.0, "2", 10_000_000),
    ];
    for (n, (jitter, sample, open_us)) in cases.into_iter().enumerate() {
        let config = Config::builder()
            .consecutive_failures(2)
            .recovery_timeout(Duration::from_secs(10))
            .jitter(jitter)
            .build()
            .unwrap();
        let config_arg = encoded(&config);
        let key = format!("bb:{{jitter-{n}}}");
        let args = [
            "1000",
            "60000",
            sample,
            config_arg.as_str(),
            "",
            "trip",
            "consecutive_failures",
        ];
        let reply = eval(&server, ScriptKind::Manual, &key, &args);
        // The reply's head (4 items), then phase, generation, since, until.
        assert_eq!(
            (reply[4].as_str(), reply[7].as_str()),
            ("1", (1_000 + open_us).to_string().as_str()),
            "jitter {jitter}, sample {sample}: {reply:?}"
        );
    }
}
