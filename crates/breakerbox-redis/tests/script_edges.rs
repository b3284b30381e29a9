//! The Lua scripts at the edges the differential test does not reach: what a script
//! writes when nothing changed, the news it publishes, arguments no caller of the crate
//! sends, stored values no script writes. Each test kills mutants of
//! `scripts/lua_mutants.py` (named in its comment) that the differential test lets live.

#![allow(clippy::unwrap_used)] // tests unwrap

#[path = "support/redis_server.rs"]
mod redis_server;

use std::time::Duration;

use breakerbox::model::{Decision, PermitKind};
use breakerbox::{Config, Phase, Verdict};
use breakerbox_redis::{
    ManualOp, OutcomeArg, RedisStore, ReplyDecision, ScriptKind, StoreError, StoreOptions,
};
use redis_server::RedisServer;

fn store(server: &RedisServer, name: &str, config: &Config) -> RedisStore {
    let client = redis::Client::open(server.url()).unwrap();
    let options = StoreOptions {
        ttl: Duration::from_secs(60),
        timeout: Duration::from_secs(2),
        ..StoreOptions::default()
    };
    RedisStore::new(client, name, config, &options)
}

fn outcome(verdict: Verdict, latency: Duration) -> OutcomeArg {
    OutcomeArg::new(0, PermitKind::Normal, verdict, latency)
}

fn failure() -> OutcomeArg {
    outcome(Verdict::Failure, Duration::ZERO)
}

// acquire.lua: `d[1] == 'admit' and d[3] == PROBE` (the save after a probe's admission
// only): an admission in the closed phase changes nothing, so it writes nothing.
#[tokio::test]
async fn an_admission_in_the_closed_phase_writes_nothing() {
    let server = RedisServer::start();
    let config = Config::builder().consecutive_failures(3).build().unwrap();
    let store = store(&server, "quiet", &config);
    let written = store
        .record(&[failure()], Some(1_000), 0.0)
        .await
        .unwrap()
        .reply
        .state
        .version;
    for t in [2_000, 3_000] {
        let reply = store.acquire(Some(t), 0.0).await.unwrap().reply;
        assert!(matches!(
            reply.decision,
            ReplyDecision::Model(Decision::Admitted {
                kind: PermitKind::Normal,
                ..
            })
        ));
        assert_eq!(reply.state.version, written, "at {t}");
    }
    // release.lua: `#transitions > 0`: nor does a release of a normal permit.
    let reply = store
        .release(0, PermitKind::Normal, 0, Some(4_000), 0.0)
        .await
        .unwrap()
        .reply;
    assert_eq!(reply.decision, ReplyDecision::Model(Decision::Recorded));
    assert_eq!(reply.state.version, written, "after a release");
    let stored = server.command(&["HGET", "bb:{quiet}", "ver"]).unwrap();
    assert_eq!(stored, written.to_string());
}

// common.lua `streak_after`: `S.streak == ANNOUNCE_AT` (the "warm" news): the failure
// that makes the streak reach the announced length is published, the ones before and after
// it are not (no transition either).
#[tokio::test]
async fn the_failure_that_warms_the_streak_is_announced_once() {
    let server = RedisServer::start();
    // Threshold 6: warm from 3 failures on.
    let config = Config::builder().consecutive_failures(6).build().unwrap();
    let store = store(&server, "warm", &config);
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_connection().unwrap();
    let mut pubsub = conn.as_pubsub();
    pubsub.subscribe(store.channel()).unwrap();
    pubsub
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut heard = Vec::new();
    for n in 1..=5u64 {
        store
            .record(&[failure()], Some(n * 1_000), 0.0)
            .await
            .unwrap();
        if let Ok(message) = pubsub.get_message() {
            let payload: String = message.get_payload().unwrap();
            heard.push((n, payload));
        }
    }
    assert_eq!(heard.len(), 1, "{heard:?}");
    let (n, payload) = &heard[0];
    assert_eq!(*n, 3, "{heard:?}");
    // phase,generation,remaining,now,version,incarnation,warm
    let fields: Vec<&str> = payload.split(',').collect();
    assert_eq!(
        (fields[0], fields[3], fields[6]),
        ("0", "3000", "1"),
        "{payload}"
    );
}

// common.lua `streak_after`: `S.streak > 0` (a success keeps a streak that began after
// it): a stored streak start without a streak is cleared by the next success, as in the
// model (`tests/model_table.rs` in breakerbox).
#[tokio::test]
async fn a_success_clears_a_stored_streak_start_without_a_streak() {
    let server = RedisServer::start();
    let config = Config::builder().consecutive_failures(3).build().unwrap();
    let store = store(&server, "leftover", &config);
    store
        .record(&[failure()], Some(10_000_000), 0.0)
        .await
        .unwrap();
    server
        .command(&["HSET", "bb:{leftover}", "streak", "0"])
        .unwrap();
    // Completed 100 ms before the stored start: it would keep a streak, but there is none.
    let early = OutcomeArg {
        age: Duration::from_millis(600),
        ..outcome(Verdict::Success, Duration::ZERO)
    };
    let state = store
        .record(&[early], Some(10_500_000), 0.0)
        .await
        .unwrap()
        .reply
        .state;
    assert_eq!(
        (state.consecutive_failures, state.streak_started_us),
        (0, 0)
    );
}

// common.lua `is_slow`: `C.slow >= 0`: a threshold under a microsecond is sent as 0 us,
// and a call of 1 us is slow against it.
#[tokio::test]
async fn a_threshold_under_a_microsecond_still_makes_calls_slow() {
    let server = RedisServer::start();
    let config = Config::builder()
        .slow_call_threshold(Duration::from_nanos(500))
        .slow_call_rate(1.0)
        .count_window(4)
        .min_calls(4)
        .build()
        .unwrap();
    let store = store(&server, "fast", &config);
    store
        .record(
            &[outcome(Verdict::Success, Duration::from_micros(1))],
            Some(1_000),
            0.0,
        )
        .await
        .unwrap();
    let ReplyDecision::State(counts) = store.read(Some(2_000)).await.unwrap().reply.decision else {
        panic!("a read answers the window")
    };
    assert_eq!((counts.calls, counts.slow), (1, 1));
}

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
        pubsub
            .set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let reply = eval(&server, ScriptKind::Manual, "bb:{news}", &args);
        assert_eq!(reply[0], "done", "SPUBLISH there: {spublish}");
        // SPUBLISH reaches shard subscribers only; PUBLISH reaches this one.
        let heard = pubsub.get_message().is_ok();
        assert_eq!(heard, !spublish, "SPUBLISH there: {spublish}");
    }
}

// manual.lua: `op == 'trip' or op == 'restore_open'`: a trip pushed by a node re-opens a
// closed breaker as if its policy tripped, an open phase given back opens it for the time
// left; in any other phase both change nothing.
#[tokio::test]
async fn a_pushed_trip_and_a_given_back_open_phase_open_only_a_closed_breaker() {
    let server = RedisServer::start();
    let config = Config::builder()
        .consecutive_failures(3)
        .recovery_timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let tripped = store(&server, "pushed", &config);
    let reply = tripped
        .manual(ManualOp::Trip("consecutive_failures"), Some(1_000), 0.0)
        .await
        .unwrap()
        .reply;
    assert_eq!(
        (reply.state.phase, reply.state.trips, reply.state.until_us),
        (Phase::Open, 1, Some(10_001_000))
    );
    assert_eq!(reply.transitions.len(), 1);
    let again = tripped
        .manual(
            ManualOp::RestoreOpen(Duration::from_secs(1)),
            Some(2_000),
            0.0,
        )
        .await
        .unwrap()
        .reply;
    assert_eq!(
        (
            again.state.trips,
            again.state.until_us,
            again.transitions.len()
        ),
        (1, Some(10_001_000), 0),
        "an open phase wins"
    );
    let restored = store(&server, "given-back", &config);
    let reply = restored
        .manual(
            ManualOp::RestoreOpen(Duration::from_secs(3)),
            Some(5_000),
            0.0,
        )
        .await
        .unwrap()
        .reply;
    assert_eq!(
        (reply.state.phase, reply.state.until_us),
        (Phase::Open, Some(3_005_000))
    );
    assert_eq!(reply.transitions[0].reason.as_str(), "restored");
}

// common.lua: `C.cf > 0` (the warm length): without a consecutive-failure rule a streak is
// warm from 2 failures, so one failure is not warm in the news a shadow switch sends.
#[tokio::test]
async fn without_a_consecutive_failure_rule_one_failure_is_not_warm() {
    let server = RedisServer::start();
    let config = Config::builder()
        .failure_rate(0.5)
        .count_window(10)
        .min_calls(10)
        .build()
        .unwrap();
    let store = store(&server, "lukewarm", &config);
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_connection().unwrap();
    let mut pubsub = conn.as_pubsub();
    pubsub.subscribe(store.channel()).unwrap();
    pubsub
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut warm = Vec::new();
    for n in 1..=2u64 {
        store
            .record(&[failure()], Some(n * 1_000), 0.0)
            .await
            .unwrap();
        store
            .manual(ManualOp::Shadow(n == 1), Some(n * 1_000), 0.0)
            .await
            .unwrap();
        let payload: String = pubsub.get_message().unwrap().get_payload().unwrap();
        warm.push(payload.rsplit(',').next().unwrap().to_string());
    }
    assert_eq!(warm, ["0", "1"]);
}

// common.lua `past_deadline`: `d >= 0`: a deadline under a microsecond is sent as 0 us,
// and a success of 1 us is late against it: a failure.
#[tokio::test]
async fn a_deadline_under_a_microsecond_still_makes_calls_late() {
    let server = RedisServer::start();
    let config = Config::builder()
        .consecutive_failures(1)
        .call_timeout(Duration::from_nanos(500))
        .build()
        .unwrap();
    let store = store(&server, "late", &config);
    let reply = store
        .record(
            &[outcome(Verdict::Success, Duration::from_micros(1))],
            Some(1_000),
            0.0,
        )
        .await
        .unwrap()
        .reply;
    assert_eq!(reply.state.phase, Phase::Open);
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

// read.lua: `ARGV[6] == 'repair'`: a corrupt bucket found while a read sums the window is
// reported by an operator's read and repaired by the breaker's own refresh.
#[tokio::test]
async fn a_corrupt_bucket_is_reported_by_a_read_and_repaired_by_a_refresh() {
    let server = RedisServer::start();
    let config = Config::builder()
        .failure_rate(0.5)
        .time_window(Duration::from_secs(10), 5)
        .min_calls(5)
        .build()
        .unwrap();
    let store = store(&server, "bucket", &config);
    store.record(&[failure()], Some(1_000), 0.0).await.unwrap();
    server
        .command(&["HSET", "bb:{bucket}", "b0", "garbage"])
        .unwrap();
    let read = store.read(Some(2_000)).await;
    assert!(
        matches!(read, Err(StoreError::Corrupt(ref why)) if why.contains("b0")),
        "{read:?}"
    );
    let refreshed = store.refresh(Some(3_000)).await.unwrap();
    assert!(refreshed.repaired.unwrap().contains("b0"));
}

// transitions.lua `ramp_admits`: `x mod 10^6 < f` and `ramp_fraction`: `e >= C.rdur`
// (rule 23): at a fraction equal to the 1st acquire's point that acquire is rejected, and
// at exactly the ramp's duration the ramp is over (and the trips reset).
#[tokio::test]
async fn a_ramp_rejects_at_its_exact_fraction_and_ends_at_its_exact_duration() {
    let server = RedisServer::start();
    let config = Config::builder()
        .consecutive_failures(1)
        .recovery_timeout(Duration::from_secs(1))
        .required_successes(1)
        .ramp(0.618031, Duration::from_secs(2))
        .build()
        .unwrap();
    let store = store(&server, "ramp-edges", &config);
    store.record(&[failure()], Some(1_000), 0.0).await.unwrap();
    let probe = store.acquire(Some(1_001_000), 0.0).await.unwrap().reply;
    let ReplyDecision::Model(Decision::Admitted { generation, kind }) = probe.decision else {
        panic!("a probe: {probe:?}")
    };
    let success = OutcomeArg {
        token: probe.lease,
        ..OutcomeArg::new(generation, kind, Verdict::Success, Duration::ZERO)
    };
    let closed = store
        .record(&[success], Some(1_001_000), 0.0)
        .await
        .unwrap()
        .reply
        .state;
    assert_eq!(
        (closed.phase, closed.ramp_started_us, closed.trips),
        (Phase::Closed, Some(1_001_000), 1)
    );
    // The n-th acquire passes iff (n * 618031) mod 10^6 < 618031 ppm: the 0th does, the
    // 1st (exactly at the fraction) does not.
    let first = store.acquire(Some(1_001_000), 0.0).await.unwrap().reply;
    assert!(matches!(
        first.decision,
        ReplyDecision::Model(Decision::Admitted { .. })
    ));
    let second = store.acquire(Some(1_001_000), 0.0).await.unwrap().reply;
    assert!(
        matches!(
            second.decision,
            ReplyDecision::Model(Decision::Rejected {
                phase: Phase::Closed,
                ..
            })
        ),
        "{second:?}"
    );
    let after = store.acquire(Some(3_001_000), 0.0).await.unwrap().reply;
    assert_eq!(
        (after.state.ramp_started_us, after.state.trips),
        (None, 0),
        "over at exactly 2 s"
    );
}
