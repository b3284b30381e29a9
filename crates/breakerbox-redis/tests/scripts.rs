//! The Lua scripts against a real redis-server: key layout, TTL, NOSCRIPT reload, corrupt
//! values repaired.

#![allow(clippy::unwrap_used)] // tests unwrap

#[path = "support/redis_server.rs"]
mod redis_server;

use std::time::Duration;

use breakerbox::model::{Decision, PermitKind};
use breakerbox::{Config, Phase, Verdict};
use breakerbox_redis::{
    ManualOp, OutcomeArg, RedisStore, ReplyDecision, StoreError, StoreOptions,
    MAX_OVERRIDE_DURATION,
};
use redis_server::RedisServer;

fn config() -> Config {
    Config::builder()
        .consecutive_failures(2)
        .recovery_timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

fn store(server: &RedisServer, name: &str, config: &Config) -> RedisStore {
    let client = redis::Client::open(server.url()).unwrap();
    let options = StoreOptions {
        ttl: Duration::from_secs(60),
        timeout: Duration::from_secs(2),
        ..StoreOptions::default()
    };
    RedisStore::new(client, name, config, &options)
}

fn failure(generation: u64) -> OutcomeArg {
    OutcomeArg::new(
        generation,
        PermitKind::Normal,
        Verdict::Failure,
        Duration::ZERO,
    )
}

#[tokio::test]
async fn state_lives_in_one_hash_tagged_key_with_a_ttl() {
    let server = RedisServer::start();
    let store = store(&server, "payments", &config());
    assert_eq!(store.key(), "bb:{payments}");
    store.record(&[failure(0)], None, 0.0).await.unwrap();
    assert_eq!(server.command(&["TYPE", "bb:{payments}"]).unwrap(), "+hash");
    let ttl: i64 = server.command(&["PTTL", "bb:{payments}"]).unwrap()[1..]
        .parse()
        .unwrap();
    assert!(ttl > 50_000 && ttl <= 60_000, "pttl {ttl}");
    let keys = server.command(&["DBSIZE"]).unwrap();
    assert_eq!(keys, ":1");
    // The layout's version, as tools that read the hash expect it.
    let format = server.command(&["HGET", "bb:{payments}", "v"]).unwrap();
    assert_eq!(format, breakerbox_redis::STATE_FORMAT);
}

#[tokio::test]
async fn redis_time_drives_the_open_phase_when_no_time_is_given() {
    let server = RedisServer::start();
    let store = store(&server, "clock", &config());
    let reply = store
        .record(&[failure(0), failure(0)], None, 0.0)
        .await
        .unwrap()
        .reply;
    assert_eq!(reply.state.phase, Phase::Open);
    let now = reply.now_us;
    assert!(
        now > 1_600_000_000_000_000,
        "redis TIME in microseconds, got {now}"
    );
    assert_eq!(reply.state.until_us, Some(now + 10_000_000));
    let rejected = store.acquire(None, 0.0).await.unwrap().reply;
    let ReplyDecision::Model(Decision::Rejected { phase, retry_after }) = rejected.decision else {
        panic!("{rejected:?}")
    };
    assert_eq!(phase, Phase::Open);
    let left = retry_after.unwrap().as_u64() / 1_000;
    assert!(
        left <= 10_000_000 && left > 9_000_000,
        "retry after {left} us"
    );
}

#[tokio::test]
async fn scripts_are_reloaded_after_script_flush() {
    let server = RedisServer::start();
    let store = store(&server, "flushed", &config());
    let before = server.command_calls("script|load");
    store.acquire(Some(1_000), 0.0).await.unwrap();
    assert_eq!(server.command_calls("script|load"), before + 1);
    assert_eq!(server.command(&["SCRIPT", "FLUSH"]).unwrap(), "+OK");
    let reply = store
        .record(&[failure(0)], Some(2_000), 0.0)
        .await
        .unwrap()
        .reply;
    assert_eq!(reply.decision, ReplyDecision::Batch(vec![true]));
    assert_eq!(reply.state.consecutive_failures, 1);
    assert!(server.command_calls("script|load") >= before + 2);
}

/// A caller that gives up on a script's load (its timeout ran out while Redis was
/// stalled) does not waste the load: Redis answers it once it runs again, and the next
/// caller takes that digest instead of sending the whole source a second time. Before,
/// the load went with the caller and every caller that timed out meanwhile left one
/// more `SCRIPT LOAD` for the server to run when it came back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_whose_caller_timed_out_is_not_sent_again() {
    let server = RedisServer::start();
    let client = redis::Client::open(server.url()).unwrap();
    let options = StoreOptions {
        ttl: Duration::from_secs(60),
        timeout: Duration::from_millis(100),
        ..StoreOptions::default()
    };
    let store = RedisStore::new(client, "stalled-load", &config(), &options);
    // Connected, with one script loaded.
    store.acquire(Some(1_000), 0.0).await.unwrap();
    let before = server.command_calls("script|load");
    server.pause();
    for _ in 0..3 {
        let stalled = store.record(&[failure(0)], Some(2_000), 0.0).await;
        assert!(
            matches!(stalled, Err(StoreError::Timeout(_))),
            "a stalled redis times out: {stalled:?}"
        );
    }
    server.resume();
    let reply = store
        .record(&[failure(0)], Some(3_000), 0.0)
        .await
        .unwrap()
        .reply;
    assert_eq!(reply.decision, ReplyDecision::Batch(vec![true]));
    store.record(&[failure(0)], Some(4_000), 0.0).await.unwrap();
    assert_eq!(
        server.command_calls("script|load") - before,
        1,
        "record.lua loaded once across three timed-out callers"
    );
}

#[tokio::test]
async fn a_foreign_string_under_the_key_is_reported_and_repaired() {
    let server = RedisServer::start();
    let store = store(&server, "foreign", &config());
    server.command(&["SET", "bb:{foreign}", "hello"]).unwrap();
    let answer = store.acquire(Some(5_000_000), 0.0).await.unwrap();
    let why = answer.repaired.expect("the corruption is reported");
    assert!(why.contains("string"), "{why}");
    assert!(matches!(
        answer.reply.decision,
        ReplyDecision::Model(Decision::Admitted { .. })
    ));
    assert_eq!(answer.reply.state.phase, Phase::Closed);
    assert_eq!(server.command(&["TYPE", "bb:{foreign}"]).unwrap(), "+hash");
}

#[tokio::test]
async fn garbage_fields_are_reported_and_repaired_without_partial_writes() {
    let server = RedisServer::start();
    let store = store(&server, "garbage", &config());
    store.record(&[failure(0)], Some(1_000), 0.0).await.unwrap();
    server
        .command(&["HSET", "bb:{garbage}", "gen", "banana"])
        .unwrap();
    // The script stops before writing: the garbage is still there until the repair.
    let answer = store.record(&[failure(0)], Some(2_000), 0.0).await.unwrap();
    let why = answer.repaired.expect("the corruption is reported");
    assert!(why.contains("gen") && why.contains("banana"), "{why}");
    // Repaired to a fresh closed state whose generation (the repair time) makes old
    // permits stale.
    assert_eq!(answer.reply.state.phase, Phase::Closed);
    assert_eq!(answer.reply.state.generation, 2_000);
    assert_eq!(answer.reply.decision, ReplyDecision::Batch(vec![false]));
    let phase = server.command(&["HGET", "bb:{garbage}", "phase"]).unwrap();
    assert_eq!(phase, "0");
}

#[tokio::test]
async fn a_garbage_count_window_ring_is_repaired() {
    let server = RedisServer::start();
    let config = Config::builder()
        .failure_rate(0.5)
        .count_window(2)
        .min_calls(2)
        .build()
        .unwrap();
    let store = store(&server, "ring", &config);
    let ok = |generation| OutcomeArg {
        verdict: Verdict::Success,
        ..failure(generation)
    };
    store
        .record(&[ok(0), ok(0)], Some(1_000), 0.0)
        .await
        .unwrap();
    server
        .command(&["HSET", "bb:{ring}", "ring", "zz"])
        .unwrap();
    let answer = store.record(&[ok(0)], Some(2_000), 0.0).await.unwrap();
    assert!(answer.repaired.unwrap().contains("ring"));
    // The fresh state starts a new generation: the old permit's outcome is stale.
    assert_eq!(answer.reply.decision, ReplyDecision::Batch(vec![false]));
    assert_eq!(
        server.command(&["HGET", "bb:{ring}", "ring"]).unwrap(),
        "(nil)"
    );
}

#[tokio::test]
async fn stale_results_change_nothing() {
    let server = RedisServer::start();
    let store = store(&server, "stale", &config());
    store
        .record(&[failure(0), failure(0)], Some(1_000), 0.0)
        .await
        .unwrap();
    let before = store.read(Some(2_000)).await.unwrap().reply;
    let reply = store
        .record(&[failure(0)], Some(2_000), 0.0)
        .await
        .unwrap()
        .reply;
    assert_eq!(reply.decision, ReplyDecision::Batch(vec![false]));
    assert_eq!(reply.state, before.state);
}

#[tokio::test]
async fn a_foreign_hash_under_the_key_is_reported_and_repaired() {
    let server = RedisServer::start();
    let store = store(&server, "their-hash", &config());
    server
        .command(&["HSET", "bb:{their-hash}", "owner", "someone else"])
        .unwrap();
    let answer = store.acquire(Some(1_000), 0.0).await.unwrap();
    assert!(answer.repaired.unwrap().contains("foreign"));
    assert_eq!(
        server
            .command(&["HGET", "bb:{their-hash}", "owner"])
            .unwrap(),
        "(nil)"
    );
}

#[tokio::test]
async fn a_script_reads_the_state_with_one_hmget_and_writes_it_with_one_hset() {
    let server = RedisServer::start();
    let store = store(&server, "cheap", &config());
    let ok = OutcomeArg {
        verdict: Verdict::Success,
        ..failure(0)
    };
    store.record(&[ok], None, 0.0).await.unwrap();
    let before = server.total_command_calls() - server.command_calls("info");
    store.record(&[ok; 100], None, 0.0).await.unwrap();
    let after = server.total_command_calls() - server.command_calls("info");
    // EVALSHA, HMGET, HSET (the TTL was refreshed by the first write; INFO counted once).
    assert_eq!(after - before, 4, "{}", server.info("commandstats"));
}

#[tokio::test]
async fn a_changed_window_shape_starts_an_empty_window() {
    let server = RedisServer::start();
    let small = Config::builder()
        .failure_rate(0.5)
        .count_window(4)
        .min_calls(4)
        .build()
        .unwrap();
    let big = Config::builder()
        .failure_rate(0.5)
        .count_window(8)
        .min_calls(8)
        .build()
        .unwrap();
    let old = store(&server, "reshaped", &small);
    old.record(&[failure(0), failure(0), failure(0)], Some(1_000), 0.0)
        .await
        .unwrap();
    let new = store(&server, "reshaped", &big);
    let read = new.read(Some(2_000)).await.unwrap().reply;
    assert_eq!(
        read.decision,
        ReplyDecision::State(breakerbox::model::WindowCounts::default())
    );
    let reply = new
        .record(&[failure(0)], Some(3_000), 0.0)
        .await
        .unwrap()
        .reply;
    assert_eq!(reply.state.phase, Phase::Closed);
    let ReplyDecision::State(counts) = new.read(Some(3_000)).await.unwrap().reply.decision else {
        panic!()
    };
    assert_eq!(counts.calls, 1, "only the call recorded since the change");
}

fn probing_store(server: &RedisServer, name: &str) -> RedisStore {
    let config = Config::builder()
        .consecutive_failures(1)
        .recovery_timeout(Duration::from_secs(10))
        .half_open_timeout(Duration::from_secs(30))
        .required_successes(1)
        .build()
        .unwrap();
    let client = redis::Client::open(server.url()).unwrap();
    let options = StoreOptions {
        timeout: Duration::from_secs(2),
        probe_lease: Duration::from_secs(2),
        ..StoreOptions::default()
    };
    RedisStore::new(client, name, &config, &options)
}

/// Trips the breaker at t = 1 ms (open until 10.001 s) and takes the probe slot at the
/// end of the open phase with lease token 41; returns the half-open generation.
async fn trip_and_probe(store: &RedisStore) -> u64 {
    store.record(&[failure(0)], Some(1_000), 0.0).await.unwrap();
    let reply = store
        .acquire_with_token(41, Some(10_001_000), 0.0)
        .await
        .unwrap()
        .reply;
    let ReplyDecision::Model(Decision::Admitted {
        generation,
        kind: PermitKind::Probe,
    }) = reply.decision
    else {
        panic!("a probe: {reply:?}")
    };
    assert_eq!(reply.lease, 41, "the slot is leased to the caller's token");
    generation
}

#[tokio::test]
async fn an_unreported_probe_slot_is_reclaimed_when_its_lease_runs_out() {
    let server = RedisServer::start();
    let store = probing_store(&server, "lease");
    let generation = trip_and_probe(&store).await;
    // The probe's caller never reports (it timed out on the client, or crashed).
    let busy = store.acquire(Some(12_000_999), 0.0).await.unwrap().reply;
    assert!(
        matches!(
            busy.decision,
            ReplyDecision::Model(Decision::Rejected { .. })
        ),
        "{busy:?}"
    );
    assert_eq!(busy.state.in_flight, 1);
    // One lease (2 s) after the reservation the slot is free again, long before the
    // half-open deadline (30 s).
    let next = store
        .acquire_with_token(42, Some(12_001_000), 0.0)
        .await
        .unwrap()
        .reply;
    assert_eq!(
        (next.decision, next.lease),
        (
            ReplyDecision::Model(Decision::Admitted {
                generation,
                kind: PermitKind::Probe,
            }),
            42
        )
    );
    // The first probe's late result counts for nothing; the second one's closes.
    let late = OutcomeArg {
        token: 41,
        ..OutcomeArg::new(
            generation,
            PermitKind::Probe,
            Verdict::Success,
            Duration::ZERO,
        )
    };
    let reply = store
        .record(&[late], Some(12_002_000), 0.0)
        .await
        .unwrap()
        .reply;
    assert_eq!(reply.decision, ReplyDecision::Batch(vec![false]));
    assert_eq!(
        (reply.state.phase, reply.state.in_flight),
        (Phase::HalfOpen, 1)
    );
    let live = OutcomeArg { token: 42, ..late };
    let reply = store
        .record(&[live], Some(12_003_000), 0.0)
        .await
        .unwrap()
        .reply;
    assert_eq!(reply.decision, ReplyDecision::Batch(vec![true]));
    assert_eq!(reply.state.phase, Phase::Closed);
}

#[tokio::test]
async fn a_reservation_whose_reply_was_lost_is_cancelled_by_its_token() {
    let server = RedisServer::start();
    let store = probing_store(&server, "cancel");
    trip_and_probe(&store).await;
    let cancelled = store.cancel(41, Some(10_002_000), 0.0).await.unwrap().reply;
    assert_eq!(cancelled.decision, ReplyDecision::Model(Decision::Recorded));
    assert_eq!(cancelled.state.in_flight, 0);
    // The slot is free at once; a second cancel of the same token changes nothing.
    let next = store.acquire(Some(10_003_000), 0.0).await.unwrap().reply;
    assert!(matches!(
        next.decision,
        ReplyDecision::Model(Decision::Admitted { .. })
    ));
    let again = store.cancel(41, Some(10_004_000), 0.0).await.unwrap().reply;
    assert_eq!(again.decision, ReplyDecision::Model(Decision::Stale));
    assert_eq!(again.state.in_flight, 1);
}

#[tokio::test]
async fn overrides_beyond_the_supported_range_are_refused_and_until_reset_has_its_own_form() {
    let server = RedisServer::start();
    let store = store(&server, "override", &config());
    let year = Duration::from_secs(365 * 24 * 3600);
    for too_long in [year * 300, Duration::from_millis(u64::MAX), Duration::MAX] {
        let refused = store
            .manual(ManualOp::ForceOpen(Some(too_long)), Some(1_000), 0.0)
            .await;
        assert!(
            matches!(refused, Err(StoreError::Invalid(ref why)) if why.contains("until reset")),
            "{too_long:?}: {refused:?}"
        );
    }
    assert_eq!(server.command(&["EXISTS", "bb:{override}"]).unwrap(), ":0");
    // Until reset: no expiry at all, at any time after.
    let forced = store
        .manual(ManualOp::ForceOpen(None), Some(1_000), 0.0)
        .await
        .unwrap()
        .reply;
    assert_eq!(
        (forced.state.phase, forced.state.until_us),
        (Phase::ForcedOpen, None)
    );
    for t in [2_000u64, 3_000_000_000_000_000, 8_000_000_000_000_000] {
        let reply = store.acquire(Some(t), 0.0).await.unwrap().reply;
        assert_eq!(
            reply.decision,
            ReplyDecision::Model(Decision::Rejected {
                phase: Phase::ForcedOpen,
                retry_after: None
            }),
            "at {t}"
        );
    }
    // The longest supported override is stored exactly.
    let now = 1_800_000_000_000_000u64;
    let reply = store
        .manual(
            ManualOp::Disable(Some(MAX_OVERRIDE_DURATION)),
            Some(now),
            0.0,
        )
        .await
        .unwrap()
        .reply;
    let left = reply.state.until_us.unwrap() - now;
    assert_eq!(Duration::from_micros(left), MAX_OVERRIDE_DURATION);
    let read = store.read(Some(now + 1)).await.unwrap();
    assert_eq!(
        (read.repaired, read.reply.state.phase),
        (None, Phase::Disabled)
    );
}

#[tokio::test]
async fn a_read_reports_a_corrupt_value_and_leaves_it_alone() {
    let server = RedisServer::start();
    let store = store(&server, "readonly", &config());
    store.record(&[failure(0)], Some(500), 0.0).await.unwrap();
    server
        .command(&["HSET", "bb:{readonly}", "gen", "banana"])
        .unwrap();
    let read = store.read(Some(1_000)).await;
    assert!(
        matches!(read, Err(StoreError::Corrupt(ref why)) if why.contains("banana")),
        "{read:?}"
    );
    assert_eq!(
        server.command(&["HGET", "bb:{readonly}", "gen"]).unwrap(),
        "banana"
    );
    // A breaker's own refresh repairs it, once.
    let refreshed = store.refresh(Some(2_000)).await.unwrap();
    assert!(refreshed.repaired.unwrap().contains("banana"));
    let again = store.refresh(Some(3_000)).await.unwrap();
    assert_eq!(again.repaired, None);
}

fn outcome_aged(generation: u64, verdict: Verdict, age_us: u64) -> OutcomeArg {
    OutcomeArg {
        age: Duration::from_micros(age_us),
        ..OutcomeArg::new(generation, PermitKind::Normal, verdict, Duration::ZERO)
    }
}

#[tokio::test]
async fn a_success_from_before_the_failure_streak_keeps_it_unless_redis_time_went_back() {
    let server = RedisServer::start();
    let config = Config::builder().consecutive_failures(3).build().unwrap();
    let store = store(&server, "late", &config);
    let at = |now: u64, outcomes: Vec<OutcomeArg>| {
        let store = &store;
        async move {
            store
                .record(&outcomes, Some(now), 0.0)
                .await
                .unwrap()
                .reply
                .state
        }
    };
    let s = at(10_000_000, vec![failure(0)]).await;
    assert_eq!(
        (s.consecutive_failures, s.streak_started_us),
        (1, 10_000_000)
    );
    // Completed 100 ms before the streak began, reported after it: the streak stands.
    let s = at(10_500_000, vec![outcome_aged(0, Verdict::Success, 600_000)]).await;
    assert_eq!(
        (s.consecutive_failures, s.streak_started_us),
        (1, 10_000_000)
    );
    // A failure that completed earlier moves the start back.
    let s = at(10_600_000, vec![outcome_aged(0, Verdict::Failure, 700_000)]).await;
    assert_eq!(
        (s.consecutive_failures, s.streak_started_us),
        (2, 9_900_000)
    );
    // Redis time stepped back to 5 s: the start is in the future, so a success ends it
    // (whatever its age).
    let s = at(5_000_000, vec![outcome_aged(0, Verdict::Success, 1_000)]).await;
    assert_eq!((s.consecutive_failures, s.streak_started_us), (0, 0));
}

#[tokio::test]
async fn a_run_of_successes_ends_the_streak_if_any_of_them_completed_after_it_began() {
    let server = RedisServer::start();
    let config = Config::builder().consecutive_failures(3).build().unwrap();
    let store = store(&server, "runs", &config);
    for (i, ages) in [[5_000_000, 0], [0, 5_000_000]].into_iter().enumerate() {
        let now = 10_000_000 * (i as u64 + 1);
        store.record(&[failure(0)], Some(now), 0.0).await.unwrap();
        // One success from before the streak, one from after: sent as one entry.
        let successes: Vec<OutcomeArg> = ages
            .iter()
            .map(|&age| outcome_aged(0, Verdict::Success, age))
            .collect();
        let reply = store
            .record(&successes, Some(now + 1_000), 0.0)
            .await
            .unwrap()
            .reply;
        assert_eq!(reply.decision, ReplyDecision::Batch(vec![true, true]));
        assert_eq!(reply.state.consecutive_failures, 0, "ages {ages:?}");
    }
}
