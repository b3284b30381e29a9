//! The Lua scripts at the edges the differential test does not reach: what a script
//! writes when nothing changed, the news it publishes, operations it does not generate
//! (pushed trips, corrupt buckets), exact boundaries, stored values no script writes
//! (`script_values.rs` has the others; `script_arguments.rs` the arguments no caller
//! sends). Each test kills mutants of
//! `scripts/lua_mutants.py` (named in its comment) that the differential test lets live.

#![allow(clippy::unwrap_used)] // tests unwrap

#[path = "support/redis_server.rs"]
mod redis_server;
#[path = "support/script_store.rs"]
mod script_store;

use std::time::Duration;

use breakerbox::model::{Decision, PermitKind};
use breakerbox::{Config, Phase, Verdict};
use breakerbox_redis::{ManualOp, OutcomeArg, RedisStore, ReplyDecision, StoreError, StoreOptions};
use redis_server::RedisServer;
use script_store::{failure, outcome};

fn store(server: &RedisServer, name: &str, config: &Config) -> RedisStore {
    let options = StoreOptions {
        ttl: Duration::from_secs(60),
        ..script_store::options()
    };
    script_store::store_with(server, name, config, &options)
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
    // transitions.lua `save`: `S.inc == 0`: the incarnation is the time of the first write.
    let incarnation = server.command(&["HGET", "bb:{quiet}", "inc"]).unwrap();
    assert_eq!(incarnation, "1000");
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
    store.record(&[failure()], Some(5_000), 0.0).await.unwrap();
    let incarnation = server.command(&["HGET", "bb:{quiet}", "inc"]).unwrap();
    assert_eq!(incarnation, "1000", "kept by later writes");
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
    // A generous timeout (the machine may be busy); silence is told by a marker message
    // sent after the last failure, not by waiting.
    pubsub
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    // The subscription is in place once a message sent after it arrives (a busy
    // server may read another connection's command first).
    server
        .command(&["PUBLISH", store.channel(), "ready"])
        .unwrap();
    while pubsub
        .get_message()
        .unwrap()
        .get_payload::<String>()
        .unwrap()
        != "ready"
    {}
    for n in 1..=5u64 {
        store
            .record(&[failure()], Some(n * 1_000), 0.0)
            .await
            .unwrap();
    }
    server
        .command(&["PUBLISH", store.channel(), "marker"])
        .unwrap();
    let mut heard = Vec::new();
    loop {
        let payload: String = pubsub.get_message().unwrap().get_payload().unwrap();
        if payload == "marker" {
            break;
        }
        let now: u64 = payload.split(',').nth(3).unwrap().parse().unwrap();
        heard.push((now / 1_000, payload));
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
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    // The subscription is in place once a message sent after it arrives (a busy
    // server may read another connection's command first).
    server
        .command(&["PUBLISH", store.channel(), "ready"])
        .unwrap();
    while pubsub
        .get_message()
        .unwrap()
        .get_payload::<String>()
        .unwrap()
        != "ready"
    {}
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

// transitions.lua `save`: `S.exp < 0 or now < S.exp or now - S.exp >= TTL / 16`: the TTL
// is refreshed by the first write, then once a sixteenth of it (60 s / 16 = 3.75 s) has
// passed since the last refresh, or when time went back; a refresh at time 0 is one like
// any other.
#[tokio::test]
async fn the_ttl_is_refreshed_once_a_sixteenth_of_it_has_passed_or_time_went_back() {
    let server = RedisServer::start();
    let config = Config::builder().consecutive_failures(100).build().unwrap();
    let store = store(&server, "ttl", &config);
    // (written at, `exp` after it, whether it refreshed the TTL)
    for (now, exp, refreshed) in [
        (1_000_000u64, 1_000_000u64, true),
        (4_749_999, 1_000_000, false),
        (4_750_000, 4_750_000, true),
        (4_750_000, 4_750_000, false),
        (2_000_000, 2_000_000, true),
    ] {
        // As if most of the TTL had gone by: a refresh sets it back to 60 s.
        server.command(&["PEXPIRE", "bb:{ttl}", "10000"]).unwrap();
        store.record(&[failure()], Some(now), 0.0).await.unwrap();
        let stored = server.command(&["HGET", "bb:{ttl}", "exp"]).unwrap();
        assert_eq!(stored, exp.to_string(), "written at {now}");
        let ttl: u64 = server.command(&["PTTL", "bb:{ttl}"]).unwrap()[1..]
            .parse()
            .unwrap();
        assert_eq!(ttl > 50_000, refreshed, "written at {now}: pttl {ttl}");
    }
    let zero = store_at_zero(&server, &config).await;
    assert_eq!(zero, "0");
}

#[tokio::test]
async fn the_news_of_a_trip_has_the_time_left_and_no_warm_streak() {
    let server = RedisServer::start();
    let config = Config::builder()
        .consecutive_failures(2)
        .recovery_timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let store = store(&server, "news", &config);
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_connection().unwrap();
    let mut pubsub = conn.as_pubsub();
    pubsub.subscribe(store.channel()).unwrap();
    pubsub
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    // The subscription is in place once a message sent after it arrives (a busy
    // server may read another connection's command first).
    server
        .command(&["PUBLISH", store.channel(), "ready"])
        .unwrap();
    while pubsub
        .get_message()
        .unwrap()
        .get_payload::<String>()
        .unwrap()
        != "ready"
    {}
    store
        .record(&[failure(), failure()], Some(1_000), 0.0)
        .await
        .unwrap();
    let payload: String = pubsub.get_message().unwrap().get_payload().unwrap();
    let fields: Vec<&str> = payload.split(',').collect();
    // phase,generation,remaining,now,version,incarnation,warm
    assert_eq!(
        (fields[0], fields[2], fields[6]),
        ("1", "10000000", "0"),
        "{payload}"
    );
    store
        .manual(ManualOp::ForceOpen(None), Some(2_000), 0.0)
        .await
        .unwrap();
    let payload: String = pubsub.get_message().unwrap().get_payload().unwrap();
    let fields: Vec<&str> = payload.split(',').collect();
    assert_eq!((fields[0], fields[2]), ("3", "-1"), "{payload}");
}

// window.lua `load_ring`: `type(raw) ~= 'string' or string.len(raw) ~= S.rlen or ...`: a
// ring that is missing, or shorter than the calls it should hold, is repaired.
#[tokio::test]
async fn a_missing_or_short_count_window_ring_is_repaired() {
    let server = RedisServer::start();
    let config = Config::builder()
        .failure_rate(0.5)
        .count_window(4)
        .min_calls(4)
        .build()
        .unwrap();
    for (i, ring) in [None, Some("0")].into_iter().enumerate() {
        let name = format!("ring-{i}");
        let store = store(&server, &name, &config);
        let ok = outcome(Verdict::Success, Duration::ZERO);
        store.record(&[ok, ok], Some(1_000), 0.0).await.unwrap();
        let key = store.key().to_string();
        match ring {
            Some(ring) => server.command(&["HSET", &key, "ring", ring]),
            None => server.command(&["HDEL", &key, "ring"]),
        }
        .unwrap();
        let answer = store.record(&[ok], Some(2_000), 0.0).await.unwrap();
        let why = answer.repaired.expect("the ring is reported");
        assert!(why.contains("field ring"), "{ring:?}: {why}");
    }
}

/// Writes at 0 and at 1 ms: the second write is no refresh, so `exp` stays 0.
async fn store_at_zero(server: &RedisServer, config: &Config) -> String {
    let store = store(server, "ttl-zero", config);
    store.record(&[failure()], Some(0), 0.0).await.unwrap();
    store.record(&[failure()], Some(1_000), 0.0).await.unwrap();
    server.command(&["HGET", "bb:{ttl-zero}", "exp"]).unwrap()
}

// window.lua `window_counts`: `b.index >= 0`: the period that starts at time 0 is a period
// like the others (its bucket counts).
#[tokio::test]
async fn the_first_period_of_the_clock_counts_in_a_time_window() {
    let server = RedisServer::start();
    let config = Config::builder()
        .failure_rate(0.5)
        .time_window(Duration::from_secs(5), 5)
        .min_calls(5)
        .build()
        .unwrap();
    let store = store(&server, "epoch", &config);
    store.record(&[failure()], Some(500), 0.0).await.unwrap();
    let ReplyDecision::State(counts) = store.read(Some(600)).await.unwrap().reply.decision else {
        panic!("a read answers the window")
    };
    assert_eq!((counts.calls, counts.failures), (1, 1));
}

// window.lua `window_record`: `old >= 2` (the slow bit of the outcome leaving a full count
// window): a slow success that slides out takes its slow call with it.
#[tokio::test]
async fn a_slow_success_leaving_a_count_window_takes_its_slow_call_along() {
    let server = RedisServer::start();
    let config = Config::builder()
        .slow_call_threshold(Duration::from_millis(5))
        .slow_call_rate(1.0)
        .count_window(2)
        .min_calls(2)
        .build()
        .unwrap();
    let store = store(&server, "slow-out", &config);
    let slow = outcome(Verdict::Success, Duration::from_millis(10));
    let fast = outcome(Verdict::Success, Duration::ZERO);
    store.record(&[slow], Some(1_000), 0.0).await.unwrap();
    store.record(&[fast], Some(2_000), 0.0).await.unwrap();
    store.record(&[fast], Some(3_000), 0.0).await.unwrap();
    let ReplyDecision::State(counts) = store.read(Some(4_000)).await.unwrap().reply.decision else {
        panic!("a read answers the window")
    };
    assert_eq!((counts.calls, counts.slow), (2, 0));
}
