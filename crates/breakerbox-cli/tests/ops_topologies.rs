//! `breakerbox status | trip | reset` on a Redis Cluster and on a primary behind
//! Sentinels, through the real binary and the `--redis` URL forms, next to real breakers
//! of `breakerbox-redis` that hear the changes.

#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)]

#[path = "support/cli.rs"]
mod cli;
// The Redis engine's own harnesses: real servers on free loopback ports.
#[path = "../../breakerbox-redis/tests/support/cluster.rs"]
mod cluster;
#[path = "../../breakerbox-redis/tests/support/redis_server.rs"]
mod redis_server;
#[path = "../../breakerbox-redis/tests/support/sentinel.rs"]
mod sentinel;

use std::time::{Duration, Instant};

use breakerbox::{Config, Phase};
use breakerbox_redis::{LocalView, Mode, RedisBreaker, RedisNode};
use cli::{assert_ok, run, stdout};
use serde_json::Value;

fn ops(url: &str, args: &[&str]) -> Vec<Value> {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--redis", url, "--json"]);
    let output = run(&all);
    assert_ok(&output);
    serde_json::from_str(&stdout(&output)).expect("--json prints a JSON array")
}

/// Breakers on every shard of the cluster, listed by one `status`; a `trip` reaches a node
/// through its shard's channel and `reset` lifts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_list_trip_and_reset_breakers_on_every_shard_of_a_cluster() {
    let cluster = cluster::RedisCluster::start();
    let url = cluster.url();
    let node = RedisNode::connect(&url).unwrap();
    // Names until every primary holds at least one.
    let mut names = Vec::new();
    let mut shards = std::collections::BTreeSet::new();
    for i in 0..200 {
        let name = format!("svc-{i}");
        if shards.insert(cluster.primary_of(&format!("bb:{{{name}}}"))) || names.len() < 3 {
            names.push(name);
        }
        if shards.len() == 3 && names.len() >= 3 {
            break;
        }
    }
    assert_eq!(shards.len(), 3, "breakers on every primary");
    let mut breakers = Vec::new();
    for name in &names {
        let b = node
            .breaker(name.clone())
            .config(Config::builder().consecutive_failures(5).build().unwrap())
            .mode(Mode::LocalView(LocalView {
                refresh_interval: Duration::from_secs(60),
                ..LocalView::default()
            }))
            .build()
            .await
            .unwrap();
        b.acquire().await.unwrap().success().await;
        b.flush().await;
        breakers.push(b);
    }
    let rows = ops(&url, &["status"]);
    let listed: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    let mut expected: Vec<&str> = names.iter().map(String::as_str).collect();
    expected.sort();
    assert_eq!(listed, expected, "every shard scanned");

    let rows = ops(&url, &["trip", &names[0], "--for", "10m"]);
    assert_eq!(rows[0]["phase"], "forced_open");
    let deadline = Instant::now() + Duration::from_secs(5);
    while breakers[0].phase() != Phase::ForcedOpen {
        assert!(Instant::now() < deadline, "the node heard the trip");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let rows = ops(&url, &["reset", &names[0]]);
    assert_eq!(rows[0]["phase"], "closed");
    let deadline = Instant::now() + Duration::from_secs(5);
    while breakers[0].phase() != Phase::Closed {
        assert!(Instant::now() < deadline, "the node heard the reset");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_reach_the_primary_through_sentinels() {
    let set = sentinel::SentinelSet::start();
    let url = set.url();
    let b = RedisBreaker::builder(url.clone(), "behind-sentinels")
        .build()
        .await
        .unwrap();
    b.acquire().await.unwrap().success().await;
    b.flush().await;
    let rows = ops(&url, &["status"]);
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["name"], "behind-sentinels");
    let rows = ops(&url, &["trip", "behind-sentinels"]);
    assert_eq!(rows[0]["phase"], "forced_open");
    assert_eq!(
        set.primary
            .command(&["HGET", "bb:{behind-sentinels}", "phase"])
            .as_deref(),
        Some("3")
    );
}

#[test]
fn bad_topology_urls_are_refused_without_their_password() {
    for url in [
        "redis+cluster://u:hunter2-secret@127.0.0.1:7000/3",
        "redis+sentinel://:hunter2-secret@127.0.0.1:26379",
        "redis+nonsense://:hunter2-secret@127.0.0.1:1",
    ] {
        let output = run(&["status", "--redis", url]);
        assert!(!output.status.success(), "{url} accepted");
        let stderr = cli::stderr(&output);
        assert!(stderr.contains("invalid redis URL"), "{stderr}");
        assert!(
            !stderr.contains("hunter2"),
            "the password was printed: {stderr}"
        );
    }
    // Nothing listens: a bounded failure, not a hang.
    let started = Instant::now();
    let output = run(&[
        "status",
        "--redis",
        "redis+cluster://127.0.0.1:1,127.0.0.1:2",
    ]);
    assert!(!output.status.success());
    assert!(started.elapsed() < Duration::from_secs(10));
}
