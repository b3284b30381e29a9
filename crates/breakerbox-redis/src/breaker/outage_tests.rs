//! Tests of `outage.rs`: a refresh's read that comes back after the view moved on (a reply to a later write
//! was taken in while the read was on its way) against a real redis-server.

#![allow(clippy::unwrap_used)] // tests unwrap

// The integration tests' server, shared: its items are `pub` for them.
#[allow(unreachable_pub)]
#[path = "../../tests/support/redis_server.rs"]
mod redis_server;

use std::time::Duration;

use breakerbox::{Config, Phase};
use redis_server::RedisServer;

use crate::{Mode, RedisBreaker};

async fn breaker(server: &RedisServer, name: &str) -> RedisBreaker {
    let config = Config::builder()
        .consecutive_failures(1)
        .recovery_timeout(Duration::from_secs(30))
        .jitter(0.0)
        .build()
        .unwrap();
    RedisBreaker::builder(server.url(), name)
        .config(config)
        .mode(Mode::Strict)
        .timeout(Duration::from_millis(500))
        .build()
        .await
        .unwrap()
}

/// Adopts `stale` (read when the view had had `since` writes) and answers whether that
/// wrote to the breaker's hash (its version moved: a read writes nothing).
async fn adopt_late(
    server: &RedisServer,
    b: &RedisBreaker,
    stale: crate::wire::Reply,
    since: u64,
) -> bool {
    // Whatever the writes' own messages started has settled.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let version = || server.command(&["HGET", b.inner.store.key(), "ver"]);
    let before = version();
    b.inner.adopt(stale, since).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    version() != before
}

/// The read saw the breaker open; an operator's reset was taken in before the read.
/// Before, the read replaced the view whatever its version: the view went back to the
/// open phase (and, in local-view mode, rejected calls locally) until the next refresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_older_than_a_reset_does_not_reopen_the_view() {
    let server = RedisServer::start();
    let b = breaker(&server, "late-read-reset").await;
    b.acquire().await.unwrap().failure().await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let since = b.inner.view.writes();
    let stale = b.inner.store.read(b.inner.now_arg()).await.unwrap().reply;
    assert_eq!(stale.state.phase, Phase::Open);
    b.reset().await.unwrap();
    assert_eq!(b.phase(), Phase::Closed);
    assert!(
        !adopt_late(&server, &b, stale, since).await,
        "nothing pushed"
    );
    assert_eq!(b.phase(), Phase::Closed, "the view keeps the reset");
}

/// The read saw a forced-open breaker before its shadow switch; the switch's reply
/// was taken in first. The read neither undoes the switch nor pushes anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_older_than_a_shadow_switch_leaves_it_on() {
    let server = RedisServer::start();
    let b = breaker(&server, "late-read-shadow").await;
    b.force_open().await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let since = b.inner.view.writes();
    let stale = b.inner.store.read(b.inner.now_arg()).await.unwrap().reply;
    assert!(!stale.state.shadow);
    b.set_shadow(true).await.unwrap();
    assert!(
        !adopt_late(&server, &b, stale, since).await,
        "nothing pushed"
    );
    let view = b.inner.view();
    assert!(view.shadow, "the switch stays on: {view:?}");
    assert_eq!(view.phase, Phase::ForcedOpen);
}
