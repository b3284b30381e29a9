//! The Lua scripts' record of failing nodes (rule 21, `window.lua`) at the edges the
//! differential test does not reach: its size and digit limits, its reset with a new
//! closed phase, a node's failure leaving a time window's quorum. Each test kills mutants
//! of `scripts/lua_mutants.py` (named in its comment) that the differential test lets
//! live.

#![allow(clippy::unwrap_used)] // tests unwrap

#[path = "support/redis_server.rs"]
mod redis_server;
#[path = "support/script_store.rs"]
mod script_store;

use std::time::Duration;

use breakerbox::{Config, Phase};
use breakerbox_redis::{ManualOp, RedisStore, StoreOptions};
use redis_server::RedisServer;
use script_store::{failure, store};

// window.lua `window_reset`: `C.quorum > 1`: a new closed phase starts an empty record of
// failing nodes where there is a quorum, and writes none where there is not.
#[tokio::test]
async fn a_new_closed_phase_empties_the_record_of_failing_nodes_only_with_a_quorum() {
    let server = RedisServer::start();
    for quorum in [1u32, 2] {
        let config = Config::builder()
            .consecutive_failures(3)
            .quorum(quorum)
            .build()
            .unwrap();
        let store = store(&server, &format!("record-{quorum}"), &config);
        store.record(&[failure()], Some(1_000), 0.0).await.unwrap();
        store
            .manual(ManualOp::Reset, Some(2_000), 0.0)
            .await
            .unwrap();
        let key = store.key().to_string();
        let we = server.command(&["HGET", &key, "we"]).unwrap();
        let record = server.command(&["HGET", &key, "quorum"]).unwrap();
        let expected = if quorum > 1 {
            format!("{we}:0:0")
        } else {
            "(nil)".to_string()
        };
        assert_eq!(record, expected, "quorum {quorum}");
    }
}

// window.lua `load_quorum`: `string.len(raw) > 8192`: the record of failing nodes may fill
// 8 KiB (here with empty parts, which are skipped), and no more.
#[tokio::test]
async fn a_record_of_failing_nodes_may_fill_eight_kib_and_no_more() {
    let server = RedisServer::start();
    let config = Config::builder()
        .consecutive_failures(3)
        .quorum(2)
        .build()
        .unwrap();
    for (i, length) in [8_192usize, 8_193].into_iter().enumerate() {
        let store = store(&server, &format!("full-{i}"), &config);
        store.record(&[failure()], Some(1_000), 0.0).await.unwrap();
        let key = store.key().to_string();
        let we = server.command(&["HGET", &key, "we"]).unwrap();
        let head = format!("{we}:0:0");
        let record = format!("{head}{}", ",".repeat(length - head.len()));
        server.command(&["HSET", &key, "quorum", &record]).unwrap();
        let answer = store.record(&[failure()], Some(2_000), 0.0).await.unwrap();
        assert_eq!(answer.repaired.is_some(), length > 8_192, "{length}");
    }
}

// window.lua `load_quorum`: `a == nil or string.len(a) > 20 or string.len(b) > 15 or
// string.len(c) > 16`: a node of up to 20 digits, a sequence of up to 15, a time of up to
// 16; one digit more in any of them is corrupt.
#[tokio::test]
async fn the_parts_of_a_record_of_failing_nodes_are_checked_digit_by_digit() {
    let server = RedisServer::start();
    let config = Config::builder()
        .consecutive_failures(3)
        .quorum(2)
        .build()
        .unwrap();
    let (node, seq, at) = ("1".repeat(20), "1".repeat(15), "1".repeat(16));
    let cases = [
        (format!("{node}:{seq}:{at}"), false),
        (format!("{node}1:1:1"), true),
        (format!("1:{seq}1:1"), true),
        (format!("1:1:{at}1"), true),
        ("1:1".to_string(), true),
    ];
    for (i, (part, corrupt)) in cases.into_iter().enumerate() {
        let store = store(&server, &format!("parts-{i}"), &config);
        store.record(&[failure()], Some(1_000), 0.0).await.unwrap();
        let key = store.key().to_string();
        let we = server.command(&["HGET", &key, "we"]).unwrap();
        let record = format!("{we}:1:1,{part}");
        server.command(&["HSET", &key, "quorum", &record]).unwrap();
        let answer = store.record(&[failure()], Some(2_000), 0.0).await.unwrap();
        assert_eq!(answer.repaired.is_some(), corrupt, "{part}");
    }
}

// window.lua `quorum_met`: `current - index < C.wbuckets`: a node's failure counts for the
// quorum while its bucket is in the time window, and not once the window has moved past it
// (rule 21).
#[tokio::test]
async fn a_nodes_failure_leaves_the_quorum_with_its_bucket() {
    let server = RedisServer::start();
    let config = Config::builder()
        .failure_rate(0.5)
        .time_window(Duration::from_secs(5), 5)
        .min_calls(1)
        .recovery_timeout(Duration::from_secs(5))
        .quorum(2)
        .build()
        .unwrap();
    let client = redis::Client::open(server.url()).unwrap();
    let node = |id: u64| {
        let options = StoreOptions {
            node_id: id,
            timeout: Duration::from_secs(10),
            ..StoreOptions::default()
        };
        RedisStore::new(client.clone(), "buckets", &config, &options)
    };
    let (a, b) = (node(1), node(2));
    // Node 1 fails in period 1 (1 s buckets); node 2 in period 6, when the window holds
    // periods 2..=6 only: one node, no quorum, a local open for node 2.
    a.record(&[failure()], Some(1_500_000), 0.0).await.unwrap();
    let reply = b
        .record(&[failure()], Some(6_500_000), 0.0)
        .await
        .unwrap()
        .reply;
    assert_eq!(reply.state.phase, Phase::Closed);
    assert!(reply.local_open.is_some(), "{reply:?}");
}
