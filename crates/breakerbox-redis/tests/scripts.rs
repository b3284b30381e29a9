//! The Lua scripts against a real redis-server: key layout, TTL, NOSCRIPT reload, corrupt
//! values repaired.

#![allow(clippy::unwrap_used)] // tests unwrap

#[path = "support/redis_server.rs"]
mod redis_server;

use std::time::Duration;

use breakerbox::model::PermitKind;
use breakerbox::{Config, Phase, Verdict};
use breakerbox_redis::{OutcomeArg, RedisStore, ReplyDecision, StoreOptions};
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
    OutcomeArg::new(generation, PermitKind::Normal, Verdict::Failure, Duration::ZERO)
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
    let ReplyDecision::Rejected {
        phase,
        retry_after_us,
    } = rejected.decision
    else {
        panic!("{rejected:?}")
    };
    assert_eq!(phase, Phase::Open);
    let left = retry_after_us.unwrap();
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
        ReplyDecision::Admitted { .. }
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
