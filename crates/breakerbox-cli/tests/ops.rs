//! `breakerbox status | trip | reset | disable` through the real binary, against a real
//! redis-server and real breakers of `breakerbox-redis`.

#![allow(clippy::disallowed_methods)]

#[path = "support/cli.rs"]
mod cli;
// The Redis engine's own harness: spawns redis-server on a free loopback port.
#[path = "../../breakerbox-redis/tests/support/redis_server.rs"]
mod redis_server;

use std::time::Duration;

use breakerbox::{Config, Phase, Verdict};
use breakerbox_redis::{Mode, RedisBreaker};
use cli::{assert_ok, run, stderr, stdout};
use redis_server::RedisServer;
use serde_json::Value;

fn ops(redis: &RedisServer, args: &[&str]) -> std::process::Output {
    let url = redis.url();
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--redis", url.as_str()]);
    run(&all)
}

fn json(output: &std::process::Output) -> Vec<Value> {
    assert_ok(output);
    serde_json::from_str(&stdout(output)).expect("--json prints a JSON array")
}

async fn node(redis: &RedisServer, name: &str, prefix: &str) -> RedisBreaker {
    let config = Config::builder()
        .consecutive_failures(100)
        .failure_rate(0.9)
        .count_window(10)
        .min_calls(10)
        .recovery_timeout(Duration::from_secs(30))
        .build()
        .expect("a valid config");
    RedisBreaker::builder(redis.url(), name)
        .config(config)
        .prefix(prefix)
        .mode(Mode::Strict)
        .build()
        .await
        .expect("a redis breaker")
}

#[test]
fn status_on_an_empty_redis_finds_no_breakers() {
    let redis = RedisServer::start();
    let output = ops(&redis, &["status"]);
    assert_ok(&output);
    assert_eq!(stdout(&output), "no breakers found\n");
    assert!(json(&ops(&redis, &["status", "--json"])).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_lists_every_breaker_with_its_window_rates() {
    let redis = RedisServer::start();
    let payments = node(&redis, "payments", "bb:").await;
    for i in 0..10 {
        let permit = payments.acquire().await.unwrap();
        let verdict = if i < 3 {
            Verdict::Failure
        } else {
            Verdict::Success
        };
        permit.record(verdict).await;
    }
    let search = node(&redis, "search", "bb:").await;
    search
        .acquire()
        .await
        .unwrap()
        .record(Verdict::Success)
        .await;
    let elsewhere = node(&redis, "other", "app2:").await;
    elsewhere
        .acquire()
        .await
        .unwrap()
        .record(Verdict::Success)
        .await;

    let rows = json(&ops(&redis, &["status", "--json"]));
    let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["payments", "search"],
        "other prefixes are not listed"
    );
    assert_eq!(rows[0]["phase"], "closed");
    assert_eq!(rows[0]["window_calls"], 10);
    assert_eq!(rows[0]["failure_rate"], 0.3);
    assert_eq!(rows[1]["window_calls"], 1, "{rows:?}");

    let table = stdout(&ops(&redis, &["status"]));
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("NAME"), "{table}");
    assert!(lines[1].starts_with("payments"), "{table}");
    assert!(
        lines[1].contains("closed") && lines[1].contains("30.0"),
        "{table}"
    );

    let other = json(&ops(&redis, &["status", "--prefix", "app2:", "--json"]));
    assert_eq!(other.len(), 1);
    assert_eq!(other[0]["key"], "app2:{other}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trip_with_an_expiry_forces_every_node_open_and_reset_closes_it() {
    let redis = RedisServer::start();
    let payments = node(&redis, "payments", "bb:").await;
    payments
        .acquire()
        .await
        .unwrap()
        .record(Verdict::Success)
        .await;

    let rows = json(&ops(&redis, &["trip", "payments", "--for", "5m", "--json"]));
    assert_eq!(rows[0]["phase"], "forced_open");
    assert_eq!(rows[0]["override_kind"], "forced_open");
    assert_eq!(rows[0]["override_until_reset"], false);
    let left = rows[0]["open_for_s"].as_f64().unwrap();
    assert!((295.0..=300.0).contains(&left), "{left}");
    let tripped_generation = rows[0]["generation"].as_u64().unwrap();

    // The node sees it on its next call.
    let rejected = payments.acquire().await.unwrap_err();
    assert_eq!(rejected.phase(), Phase::ForcedOpen);

    let table = stdout(&ops(&redis, &["status", "payments"]));
    assert!(table.contains("forced_open for 4m5"), "{table}");

    let rows = json(&ops(&redis, &["reset", "payments", "--json"]));
    assert_eq!(rows[0]["phase"], "closed");
    assert!(rows[0]["generation"].as_u64().unwrap() > tripped_generation);
    assert!(payments.acquire().await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disable_without_expiry_lasts_until_reset() {
    let redis = RedisServer::start();
    let payments = node(&redis, "payments", "bb:").await;
    // The node has not written its hash yet: the breaker does not exist in Redis.
    let output = ops(&redis, &["disable", "payments", "--create"]);
    assert_ok(&output);
    assert!(
        stdout(&output).contains("disabled until reset"),
        "{}",
        stdout(&output)
    );
    let permit = payments.acquire().await.unwrap();
    assert_eq!(permit.kind(), breakerbox::model::PermitKind::Passthrough);
    permit.record(Verdict::Failure).await;
    let rows = json(&ops(&redis, &["status", "payments", "--json"]));
    assert_eq!(rows[0]["phase"], "disabled");
    assert_eq!(rows[0]["override_until_reset"], true);
    assert_eq!(rows[0]["open_for_s"], Value::Null);
}

#[test]
fn status_of_an_unknown_breaker_fails_naming_it() {
    let redis = RedisServer::start();
    let output = ops(&redis, &["status", "nope"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("no breaker named \"nope\""),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_key_that_is_not_a_breaker_is_reported_and_left_alone() {
    let redis = RedisServer::start();
    assert_eq!(
        redis.command(&["SET", "bb:{cache}", "hello"]).as_deref(),
        Some("+OK")
    );
    let output = ops(&redis, &["trip", "cache"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("holds a string, not a breaker"),
        "{}",
        stderr(&output)
    );
    assert_eq!(
        redis.command(&["GET", "bb:{cache}"]).as_deref(),
        Some("hello")
    );
    let table = stdout(&ops(&redis, &["status"]));
    assert!(table.contains("error: cache"), "{table}");
}

#[test]
fn an_unreachable_redis_fails_with_a_message() {
    let output = run(&["status", "--redis", "redis://127.0.0.1:1/"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("cannot connect"),
        "{}",
        stderr(&output)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_puts_a_shared_breaker_in_shadow_for_every_node_until_off() {
    let redis = RedisServer::start();
    let payments = node(&redis, "payments", "bb:").await;
    let rows = json(&ops(&redis, &["trip", "payments", "--create", "--json"]));
    assert_eq!(rows[0]["shadow"], false);
    assert_eq!(
        payments.acquire().await.unwrap_err().phase(),
        Phase::ForcedOpen
    );

    let rows = json(&ops(&redis, &["shadow", "payments", "--json"]));
    assert_eq!(rows[0]["shadow"], true);
    assert_eq!(rows[0]["phase"], "forced_open", "shadow changes no phase");
    for _ in 0..2 {
        let permit = payments
            .acquire()
            .await
            .expect("in shadow, nothing is rejected");
        permit.record(Verdict::Failure).await;
    }
    let rows = json(&ops(&redis, &["status", "payments", "--json"]));
    assert_eq!(rows[0]["shadow_rejections"], 2);
    let table = stdout(&ops(&redis, &["status", "payments"]));
    assert!(table.contains("on (2 would-be rejections)"), "{table}");

    let rows = json(&ops(&redis, &["shadow", "payments", "--off", "--json"]));
    assert_eq!(rows[0]["shadow"], false);
    assert_eq!(
        payments.acquire().await.unwrap_err().phase(),
        Phase::ForcedOpen
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_a_recovery_ramp_while_it_is_recorded() {
    let redis = RedisServer::start();
    let config = Config::builder()
        .consecutive_failures(1)
        .recovery_timeout(Duration::from_millis(200))
        .required_successes(1)
        .ramp(0.1, Duration::from_secs(60))
        .build()
        .expect("a valid config");
    let checkout = RedisBreaker::builder(redis.url(), "checkout")
        .config(config)
        .prefix("bb:")
        .mode(Mode::Strict)
        .build()
        .await
        .expect("a redis breaker");
    checkout
        .acquire()
        .await
        .unwrap()
        .record(Verdict::Failure)
        .await;
    let rows = json(&ops(&redis, &["status", "checkout", "--json"]));
    assert!(
        rows[0].get("ramp_age_s").is_none(),
        "open, no ramp: {}",
        rows[0]
    );
    assert_eq!(
        stdout(&ops(&redis, &["status", "checkout"]))
            .lines()
            .nth(1)
            .map(|l| l.trim_end().ends_with('-')),
        Some(true)
    );

    tokio::time::sleep(Duration::from_millis(250)).await;
    let probe = checkout
        .acquire()
        .await
        .expect("a probe after the cool-down");
    probe.record(Verdict::Success).await;
    let mut admitted = 0;
    for _ in 0..10 {
        if let Ok(permit) = checkout.acquire().await {
            permit.record(Verdict::Success).await;
            admitted += 1;
        }
    }
    assert!(admitted < 10, "at 10 % the ramp rejects most calls");

    let rows = json(&ops(&redis, &["status", "checkout", "--json"]));
    assert_eq!(rows[0]["phase"], "closed");
    let age = rows[0]["ramp_age_s"].as_f64().expect("a ramp is recorded");
    assert!((0.0..30.0).contains(&age), "{age}");
    assert_eq!(rows[0]["ramp_calls"], 10, "{}", rows[0]);
    let table = stdout(&ops(&redis, &["status", "checkout"]));
    assert!(table.contains("RAMP"), "{table}");
    assert!(table.contains("(10 calls)"), "{table}");
}
