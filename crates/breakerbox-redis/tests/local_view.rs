//! The default local-view mode against a real redis-server: no round trip per closed call,
//! none at all while open, trips propagated by pub/sub, probes capped fleet-wide.

#![allow(clippy::unwrap_used)] // tests unwrap
// Tests measure real elapsed time against real servers.
#![allow(clippy::disallowed_methods)]

#[path = "support/redis_server.rs"]
mod redis_server;

use std::time::{Duration, Instant};

use breakerbox::contract::LocalAdmission;
use breakerbox::{Config, Phase};
use breakerbox_redis::{LocalView, Mode, RedisBreaker};
use redis_server::RedisServer;

fn mode() -> Mode {
    Mode::LocalView(LocalView {
        flush_interval: Duration::from_millis(50),
        batch_size: 100,
        refresh_interval: Duration::from_secs(1),
        ..LocalView::default()
    })
}

async fn node(server: &RedisServer, name: &str, config: Config) -> RedisBreaker {
    RedisBreaker::builder(server.url(), name)
        .config(config)
        .mode(mode())
        .timeout(Duration::from_millis(500))
        .build()
        .await
        .unwrap()
}

async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_calls_are_admitted_locally_and_outcomes_sent_in_batches() {
    let server = RedisServer::start();
    let b = node(&server, "batched", Config::builder().build().unwrap()).await;
    let before = server.command_calls("evalsha");
    for _ in 0..1_000 {
        b.acquire().await.unwrap().success().await;
    }
    b.flush().await;
    let used = server.command_calls("evalsha") - before;
    assert!(used <= 15, "{used} script calls for 1000 closed calls");
    assert!(b.stats().local_admits >= 1_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_breaker_rejects_locally_with_zero_redis_commands() {
    let server = RedisServer::start();
    let config = Config::builder()
        .consecutive_failures(3)
        .recovery_timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    // No periodic refresh inside the measurement (a long refresh interval), and no read
    // left over from the trip: the node's own trip announcement can come back on the
    // channel before the flush's reply, and then makes one read (seen as a flaky
    // "4 commands": its EVALSHA with the HMGET and TIME it ran).
    let b = RedisBreaker::builder(server.url(), "open")
        .config(config)
        .mode(Mode::LocalView(LocalView {
            flush_interval: Duration::from_millis(50),
            batch_size: 100,
            refresh_interval: Duration::from_secs(600),
            ..LocalView::default()
        }))
        .timeout(Duration::from_millis(500))
        .build()
        .await
        .unwrap();
    for _ in 0..3 {
        b.acquire().await.unwrap().failure().await;
    }
    b.flush().await;
    wait_for("the trip", || b.phase() == Phase::Open).await;
    let mut calls = b.stats().redis_calls;
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = b.stats().redis_calls;
        if now == calls {
            break;
        }
        calls = now;
    }
    let before = server.calls_by_command();
    for _ in 0..1_000 {
        let rejected = b.acquire().await.unwrap_err();
        assert_eq!(rejected.phase(), Phase::Open);
    }
    let after = server.calls_by_command();
    let used: Vec<(String, u64)> = after
        .iter()
        .map(|(name, n)| (name.clone(), n - before.get(name).copied().unwrap_or(0)))
        .filter(|(name, n)| *n > 0 && name != "info")
        .collect();
    // The first INFO is counted between the two readings, and nothing else.
    assert!(
        used.is_empty(),
        "commands for 1000 rejected calls: {used:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trip_on_one_node_reaches_the_others_by_pub_sub() {
    let server = RedisServer::start();
    let config = Config::builder()
        .consecutive_failures(2)
        .recovery_timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let a = node(&server, "propagate", config.clone()).await;
    let b = node(&server, "propagate", config.clone()).await;
    let c = node(&server, "propagate", config).await;
    for _ in 0..2 {
        a.acquire().await.unwrap().failure().await;
    }
    let started = Instant::now();
    a.flush().await;
    wait_for("node b to see the trip", || b.phase() == Phase::Open).await;
    wait_for("node c to see the trip", || c.phase() == Phase::Open).await;
    // Well under the refresh interval: it came by pub/sub.
    assert!(started.elapsed() < Duration::from_millis(900));
    assert_eq!(b.acquire().await.unwrap_err().phase(), Phase::Open);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_open_probes_are_capped_across_nodes() {
    let server = RedisServer::start();
    let config = Config::builder()
        .consecutive_failures(1)
        .recovery_timeout(Duration::from_millis(200))
        .max_probes(2)
        .required_successes(5)
        .build()
        .unwrap();
    let mut nodes = Vec::new();
    for _ in 0..4 {
        nodes.push(node(&server, "probes", config.clone()).await);
    }
    nodes[0].acquire().await.unwrap().failure().await;
    nodes[0].flush().await;
    for n in &nodes {
        wait_for("the trip", || n.phase() == Phase::Open).await;
    }
    tokio::time::sleep(Duration::from_millis(250)).await;
    let mut held = Vec::new();
    for _ in 0..5 {
        for n in &nodes {
            if let Ok(permit) = n.acquire().await {
                assert!(permit.is_probe());
                held.push(permit);
            }
        }
    }
    assert_eq!(held.len(), 2, "exactly max_probes probes across 4 nodes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_on_one_node_closes_every_node() {
    let server = RedisServer::start();
    let a = node(&server, "reset", Config::builder().build().unwrap()).await;
    let b = node(&server, "reset", Config::builder().build().unwrap()).await;
    a.force_open().await.unwrap();
    wait_for("b to see the override", || b.phase() == Phase::ForcedOpen).await;
    assert_eq!(b.acquire().await.unwrap_err().phase(), Phase::ForcedOpen);
    a.reset().await.unwrap();
    wait_for("b to see the reset", || b.phase() == Phase::Closed).await;
    assert!(b.acquire().await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_breaker_expires_and_a_node_follows_the_fresh_state() {
    let server = RedisServer::start();
    let config = Config::builder()
        .consecutive_failures(3)
        .recovery_timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let b = RedisBreaker::builder(server.url(), "expiring")
        .config(config)
        .mode(mode())
        .ttl(Duration::from_millis(300))
        .timeout(Duration::from_millis(500))
        .build()
        .await
        .unwrap();
    b.force_open().await.unwrap();
    b.reset().await.unwrap();
    assert_eq!(b.local_generation(), 2);
    wait_for("the hash to expire", || {
        server.command(&["EXISTS", "bb:{expiring}"]).as_deref() == Some(":0")
    })
    .await;
    // The node still holds generation 2; the next reply (generation 0) replaces it, and
    // the breaker trips on three fresh failures.
    let mut tripped = false;
    for _ in 0..20 {
        if let Ok(permit) = b.acquire().await {
            permit.failure().await;
        }
        b.flush().await;
        if b.phase() == Phase::Open {
            tripped = true;
            break;
        }
    }
    assert!(tripped, "the breaker trips after its hash expired");
    assert_eq!(b.snapshot().await.unwrap().phase, Phase::Open);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_breaker_admits_locally_until_the_override_expires() {
    let server = RedisServer::start();
    let b = node(&server, "disabled", Config::builder().build().unwrap()).await;
    b.disable_for(Duration::from_millis(300)).await.unwrap();
    // The channel's echo of this node's own change may overtake the script's reply and
    // cost one background read: let it pass before counting the calls' cost.
    tokio::time::sleep(Duration::from_millis(60)).await;
    let before = server.command_calls("evalsha");
    for _ in 0..100 {
        let permit = b.acquire().await.unwrap();
        assert_eq!(permit.kind(), breakerbox::model::PermitKind::Passthrough);
        permit.failure().await;
    }
    assert_eq!(
        server.command_calls("evalsha"),
        before,
        "no redis call while disabled"
    );
    tokio::time::sleep(Duration::from_millis(350)).await;
    let permit = b.acquire().await.unwrap();
    assert_eq!(permit.kind(), breakerbox::model::PermitKind::Normal);
    assert_eq!(b.phase(), Phase::Closed);
}

fn admits_locally(b: &RedisBreaker) -> bool {
    matches!(b.try_acquire_local(), LocalAdmission::Admitted(_))
}

/// A node that would learn of the shared streak from its own flush or refresh only after
/// 10 s: what it learns sooner came by pub/sub.
async fn quiet_node(server: &RedisServer, name: &str, config: Config) -> RedisBreaker {
    RedisBreaker::builder(server.url(), name)
        .config(config)
        .mode(Mode::LocalView(LocalView {
            flush_interval: Duration::from_secs(10),
            refresh_interval: Duration::from_secs(10),
            ..LocalView::default()
        }))
        .build()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_stray_failure_is_not_announced_even_where_it_makes_the_streak_warm() {
    let server = RedisServer::start();
    // Warm from a streak of 1 (half of 3): the failing node asks Redis, the fleet does not.
    let config = Config::builder().consecutive_failures(3).build().unwrap();
    let a = node(&server, "stray", config.clone()).await;
    let b = quiet_node(&server, "stray", config).await;
    a.acquire().await.unwrap().success().await;
    b.acquire().await.unwrap().success().await;
    a.flush().await;
    b.flush().await;
    wait_for("node b to admit from its view", || admits_locally(&b)).await;
    a.acquire().await.unwrap().failure().await;
    assert_eq!(streak(&server, "bb:{stray}").as_deref(), Some("1"));
    // A message would reach b within milliseconds; none comes.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        admits_locally(&b),
        "node b was sent to Redis by one failure"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_streak_that_may_trip_soon_sends_every_node_to_redis() {
    let server = RedisServer::start();
    // Warm from a streak of 2 (half the threshold).
    let config = Config::builder()
        .consecutive_failures(4)
        .recovery_timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let a = node(&server, "warming", config.clone()).await;
    let b = quiet_node(&server, "warming", config).await;
    a.acquire().await.unwrap().success().await;
    b.acquire().await.unwrap().success().await;
    a.flush().await;
    b.flush().await;
    wait_for("node b to admit from its view", || admits_locally(&b)).await;
    let started = Instant::now();
    for _ in 0..2 {
        a.acquire().await.unwrap().failure().await;
    }
    a.flush().await;
    // Node b made no call: it hears of the streak by pub/sub, and asks Redis from then
    // on (where the next failures would trip).
    wait_for("node b to ask Redis", || !admits_locally(&b)).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(b.phase(), Phase::Closed);
    let permit = b.acquire().await.unwrap();
    permit.failure().await;
    b.flush().await;
    let permit = b.acquire().await.unwrap();
    permit.failure().await;
    b.flush().await;
    wait_for("the trip", || {
        a.phase() == Phase::Open && b.phase() == Phase::Open
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_announcement_costs_one_read_and_never_a_wrong_answer() {
    let server = RedisServer::start();
    let config = Config::builder().consecutive_failures(4).build().unwrap();
    let b = node(&server, "forged", config).await;
    b.acquire().await.unwrap().success().await;
    b.flush().await;
    wait_for("node b to admit from its view", || admits_locally(&b)).await;
    let incarnation = server.command(&["HGET", "bb:{forged}", "inc"]).unwrap();
    let reads_before = b.stats().redis_calls;
    // "Open, version 10^12, warm", of the current incarnation: not what Redis holds.
    let forged = format!("1,99,60000000,0,1000000000000,{},1", &incarnation[1..]);
    server.command(&["PUBLISH", "bb:{forged}:events", &forged]);
    // The node re-reads, finds Redis closed, and admits from its view again.
    wait_for("the re-read", || b.stats().redis_calls > reads_before).await;
    wait_for("node b to admit from its view again", || admits_locally(&b)).await;
    assert_eq!(b.phase(), Phase::Closed);
    b.acquire().await.unwrap().success().await;
}

fn streak(server: &RedisServer, key: &str) -> Option<String> {
    server.command(&["HGET", key, "streak"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_is_in_redis_when_its_record_completes() {
    let server = RedisServer::start();
    let config = Config::builder().consecutive_failures(5).build().unwrap();
    let b = node(&server, "inline", config).await;
    b.acquire().await.unwrap().success().await;
    b.flush().await;
    // Sent by the recording task itself, as in strict mode: no background wake-up between
    // the failure and Redis.
    let recorded = b.acquire().await.unwrap().failure();
    assert!(
        format!("{recorded:?}").contains("pending: true"),
        "{recorded:?}"
    );
    recorded.await;
    assert_eq!(streak(&server, "bb:{inline}").as_deref(), Some("1"));
    // A record dropped where no runtime can finish it is handed to the background task.
    let permit = b.acquire().await.unwrap();
    std::thread::spawn(move || drop(permit.failure()))
        .join()
        .unwrap();
    wait_for("the handed-over failure", || {
        streak(&server, "bb:{inline}").as_deref() == Some("2")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_switch_on_one_node_puts_the_whole_fleet_in_shadow() {
    let server = RedisServer::start();
    let config = Config::builder()
        .consecutive_failures(1)
        .recovery_timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let a = node(&server, "shadow", config.clone()).await;
    let b = node(&server, "shadow", config).await;
    a.acquire().await.unwrap().failure().await;
    a.flush().await;
    wait_for("b to see the trip", || b.phase() == Phase::Open).await;
    assert_eq!(b.acquire().await.unwrap_err().phase(), Phase::Open);

    let started = Instant::now();
    a.set_shadow(true).await.unwrap();
    // Well under the refresh interval: it came by pub/sub.
    wait_for("b to see shadow mode", || b.check().is_ok()).await;
    assert!(started.elapsed() < Duration::from_millis(900));
    for _ in 0..3 {
        let permit = b.acquire().await.expect("the fleet is in shadow");
        assert_eq!(permit.kind(), breakerbox::model::PermitKind::Passthrough);
        permit.failure().await;
    }
    let snap = a.snapshot().await.unwrap();
    assert!(snap.shadow);
    assert_eq!(snap.phase, Phase::Open, "shadow changes no phase");
    assert_eq!(
        snap.shadow_rejections, 3,
        "b's would-be rejections, seen from a"
    );

    b.set_shadow(false).await.unwrap();
    wait_for("a to leave shadow mode", || a.check().is_err()).await;
    assert_eq!(a.acquire().await.unwrap_err().phase(), Phase::Open);
    assert!(!b.snapshot().await.unwrap().shadow);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_recovery_every_node_ramps_its_share_from_its_view() {
    let server = RedisServer::start();
    let config = Config::builder()
        .consecutive_failures(1)
        .recovery_timeout(Duration::from_millis(200))
        .required_successes(1)
        .ramp(0.2, Duration::from_secs(60))
        .build()
        .unwrap();
    let a = node(&server, "ramp", config.clone()).await;
    let b = node(&server, "ramp", config).await;
    a.acquire().await.unwrap().failure().await;
    wait_for("node b to see the trip", || b.phase() == Phase::Open).await;
    tokio::time::sleep(Duration::from_millis(250)).await;
    let probe = a.acquire().await.unwrap();
    assert!(probe.is_probe());
    probe.success().await;
    wait_for("node b to see the close", || b.phase() == Phase::Closed).await;
    for n in [&a, &b] {
        let before = server.command_calls("evalsha");
        let mut admitted = 0;
        for _ in 0..1_000 {
            match n.try_acquire_local() {
                LocalAdmission::Admitted(permit) => {
                    admitted += 1;
                    drop(permit);
                }
                LocalAdmission::Rejected(open) => {
                    assert_eq!(open.reason(), breakerbox::RejectReason::Ramp);
                }
                LocalAdmission::Remote => panic!("the view decides while ramping"),
            }
        }
        // 20% growing to all calls over a minute: a few seconds in, a little above 20%.
        assert!(
            (195..=280).contains(&admitted),
            "{admitted} of 1000 admitted"
        );
        // No round trip per call: only the batches of releases (every 50 ms) and a
        // refresh may fall inside the loop on a slow machine.
        let used = server.command_calls("evalsha") - before;
        assert!(
            used <= 50,
            "{used} script calls for 1000 calls while ramping"
        );
    }
    assert_eq!(
        b.snapshot().await.unwrap().ramp.map(|r| r.ppm() / 10_000),
        Some(20),
        "the snapshot shows the fraction"
    );
}
