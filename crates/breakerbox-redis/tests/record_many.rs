//! `record_many.lua` (a node's flush of many breakers in one script call) against
//! `record.lua`: the same batches, at the same times, leave the same state and get the
//! same replies, whether each breaker's batch is its own call or all share one.

#![allow(clippy::unwrap_used)] // tests unwrap

#[path = "support/redis_server.rs"]
mod redis_server;

use std::time::Duration;

use breakerbox::model::Decision;
use breakerbox::model::PermitKind;
use breakerbox::{Config, Verdict};
use breakerbox_redis::{BatchItem, OutcomeArg, RedisStore, ReplyDecision, StoreOptions};
use redis_server::RedisServer;

fn config() -> Config {
    Config::builder()
        .consecutive_failures(3)
        .failure_rate(0.5)
        .min_calls(6)
        .count_window(10)
        .slow_call_threshold(Duration::from_millis(50))
        .recovery_timeout(Duration::from_secs(2))
        .max_probes(2)
        .required_successes(2)
        .build()
        .unwrap()
}

fn store(server: &RedisServer, name: &str) -> RedisStore {
    let client = redis::Client::open(server.url()).unwrap();
    let options = StoreOptions {
        prefix: "many:".to_string(),
        timeout: Duration::from_secs(2),
        ..StoreOptions::default()
    };
    RedisStore::new(client, name, &config(), &options)
}

/// The hash without the fields that differ by key alone (none do today).
fn hash(server: &RedisServer, store: &RedisStore) -> Vec<String> {
    let all = server.command(&["HGETALL", store.key()]).unwrap();
    let mut lines: Vec<String> = all.lines().map(str::to_string).collect();
    let mut pairs: Vec<String> = lines.chunks_mut(2).map(|p| p.join("=")).collect::<Vec<_>>();
    pairs.sort();
    pairs
}

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

fn item(rng: &mut Rng, generation: u64, kind: PermitKind, token: u64) -> BatchItem {
    let roll = rng.next_u64() % 10;
    if roll == 9 {
        return BatchItem::Release(generation, kind, token);
    }
    let verdict = match roll {
        0..=4 => Verdict::Success,
        5..=7 => Verdict::Failure,
        _ => Verdict::Ignore,
    };
    let latency = Duration::from_millis(rng.next_u64() % 80);
    BatchItem::Outcome(OutcomeArg {
        token,
        age: Duration::from_millis(rng.next_u64() % 30),
        ..OutcomeArg::new(generation, kind, verdict, latency)
    })
}

#[tokio::test]
async fn many_breakers_in_one_call_end_as_each_in_its_own() {
    let server = RedisServer::start();
    let alone = store(&server, "alone");
    let first = store(&server, "first");
    let second = store(&server, "second");
    let mut rng = Rng(7);
    let mut now: u64 = 1_700_000_000_000_000;
    let (mut transitions, mut stale, mut many_calls) = (0, 0, 0);
    for step in 0..400 {
        now += rng.next_u64() % 600_000;
        let r = (rng.next_u64() % 1000) as f64 / 1000.0;
        // Every store answers an acquire alike (the same state, the same token).
        let token = rng.next_u64() | 1;
        let mut granted = Vec::new();
        for s in [&alone, &first, &second] {
            let reply = s
                .acquire_with_token(token, Some(now), r)
                .await
                .unwrap()
                .reply;
            granted.push((
                reply.decision.clone(),
                reply.lease,
                reply.state.generation,
                reply.state.phase,
            ));
        }
        assert!(
            granted.windows(2).all(|w| w[0] == w[1]),
            "step {step}: {granted:?}"
        );
        let (decision, lease, generation, _) = granted[0].clone();
        let (kind, token) = match decision {
            ReplyDecision::Model(Decision::Admitted { kind, .. }) => (kind, lease),
            _ => (PermitKind::Normal, 0),
        };
        let n = 1 + rng.next_u64() % 6;
        let items: Vec<BatchItem> = (0..n)
            .map(|i| {
                // An older generation now and then: stale.
                let g = if i == 3 {
                    generation.saturating_sub(1)
                } else {
                    generation
                };
                item(&mut rng, g, kind, token)
            })
            .collect();
        now += rng.next_u64() % 1_000;
        let one = alone
            .record_batch(&items, Some(now), r)
            .await
            .unwrap()
            .reply;
        let both = alone
            .record_many(&[(&first, &items), (&second, &items)], Some(now), r)
            .await
            .unwrap();
        many_calls += 1;
        assert_eq!(both.len(), 2);
        for reply in both {
            let reply = reply.unwrap();
            assert_eq!(reply, one, "step {step}");
        }
        transitions += one.transitions.len();
        if let ReplyDecision::Batch(codes) = &one.decision {
            stale += codes.iter().filter(|r| !**r).count();
        }
        let expected = hash(&server, &alone);
        assert_eq!(hash(&server, &first), expected, "step {step}");
        assert_eq!(hash(&server, &second), expected, "step {step}");
    }
    // The sequence went through trips, probes and stale outcomes.
    assert!(transitions >= 10, "{transitions} transitions");
    assert!(stale >= 10, "{stale} stale");
    assert_eq!(many_calls, 400);
    let ttl = server.command(&["PTTL", first.key()]).unwrap();
    assert!(ttl.trim_start_matches(':').parse::<i64>().unwrap() > 0);
}

#[tokio::test]
async fn a_corrupt_breaker_is_repaired_alone() {
    let server = RedisServer::start();
    let good = store(&server, "good");
    let bad = store(&server, "bad");
    server.command(&["SET", bad.key(), "garbage"]).unwrap();
    let items = [BatchItem::Outcome(OutcomeArg::new(
        0,
        PermitKind::Normal,
        Verdict::Failure,
        Duration::ZERO,
    ))];
    let replies = good
        .record_many(&[(&good, &items), (&bad, &items)], None, 0.0)
        .await
        .unwrap();
    let good_reply = replies[0].as_ref().unwrap();
    assert_eq!(good_reply.state.consecutive_failures, 1);
    let bad_reply = replies[1].as_ref().unwrap();
    assert!(
        matches!(bad_reply.decision, ReplyDecision::Repaired(_)),
        "{bad_reply:?}"
    );
    // Repaired, and the items not applied.
    assert_eq!(bad_reply.state.consecutive_failures, 0);
    assert_eq!(
        server.command(&["TYPE", bad.key()]).unwrap(),
        "+hash".to_string()
    );
}

#[tokio::test]
async fn a_breaker_whose_call_fails_answers_its_own_error_and_the_others_are_recorded() {
    let server = RedisServer::start();
    let good = store(&server, "fine");
    // A TTL Redis refuses: record.lua's PEXPIRE of the new hash fails on the server.
    let client = redis::Client::open(server.url()).unwrap();
    let options = StoreOptions {
        prefix: "many:".to_string(),
        timeout: Duration::from_secs(2),
        ttl: Duration::MAX,
        ..StoreOptions::default()
    };
    let bad = RedisStore::new(client, "refused", &config(), &options);
    let items = [BatchItem::Outcome(OutcomeArg::new(
        0,
        PermitKind::Normal,
        Verdict::Failure,
        Duration::ZERO,
    ))];
    let replies = good
        .record_many(&[(&bad, &items), (&good, &items)], None, 0.0)
        .await
        .unwrap();
    match &replies[0] {
        Err(breakerbox_redis::StoreError::Protocol(why)) => assert!(
            why.contains("value is not an integer or out of range"),
            "the server's own message: {why:?}"
        ),
        other => panic!("expected the server's error, got {other:?}"),
    }
    let good_reply = replies[1].as_ref().unwrap();
    assert_eq!(good_reply.state.consecutive_failures, 1);
}
