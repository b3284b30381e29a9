//! Faults against real redis-server processes: killed, paused (SIGSTOP), restarted,
//! scripts flushed, hashes corrupted. No panic, no call blocked much longer than the
//! timeout, the fallback engaged, the state resynchronised.

#![allow(clippy::unwrap_used)] // tests unwrap
// Tests measure real elapsed time against real servers.
#![allow(clippy::disallowed_methods)]

#[path = "support/redis_server.rs"]
mod redis_server;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use breakerbox::{Config, Event, EventKind, Phase};
use breakerbox_redis::{Backoff, Fallback, LocalView, Mode, RedisBreaker};
use redis_server::RedisServer;

const TIMEOUT: Duration = Duration::from_millis(100);
/// How much longer than the Redis timeout a call may take on a busy 2-core machine.
const MARGIN: Duration = Duration::from_millis(250);

type Events = Arc<Mutex<Vec<EventKind>>>;

async fn node(
    server: &RedisServer,
    name: &str,
    mode: Mode,
    fallback: Fallback,
) -> (RedisBreaker, Events) {
    let events: Events = Arc::new(Mutex::new(Vec::new()));
    let log = events.clone();
    let config = Config::builder()
        .consecutive_failures(3)
        .recovery_timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let breaker = RedisBreaker::builder(server.url(), name)
        .config(config)
        .mode(mode)
        .fallback(fallback)
        .timeout(TIMEOUT)
        .backoff(Backoff {
            min: Duration::from_millis(20),
            max: Duration::from_millis(200),
        })
        .listener(move |e: &Event<'_>| log.lock().unwrap().push(e.kind.clone()))
        .build()
        .await
        .unwrap();
    (breaker, events)
}

fn local_view() -> Mode {
    Mode::LocalView(LocalView {
        flush_interval: Duration::from_millis(20),
        batch_size: 50,
        refresh_interval: Duration::from_millis(200),
        ..LocalView::default()
    })
}

fn count(events: &Events, f: impl Fn(&EventKind) -> bool) -> usize {
    events.lock().unwrap().iter().filter(|e| f(e)).count()
}

async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// One acquire and, if admitted, one success; returns how long the acquire took.
async fn timed_call(b: &RedisBreaker, ok: bool) -> Duration {
    let started = Instant::now();
    let permit = b.acquire().await;
    let took = started.elapsed();
    if let Ok(permit) = permit {
        let started = Instant::now();
        if ok {
            permit.success().await;
        } else {
            permit.failure().await;
        }
        assert!(
            started.elapsed() <= TIMEOUT + MARGIN,
            "record blocked {:?}",
            started.elapsed()
        );
    }
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_redis_engages_the_local_breaker_and_its_trip_is_pushed_back() {
    let mut server = RedisServer::start();
    let (b, events) = node(&server, "killed", local_view(), Fallback::LocalBreaker).await;
    for _ in 0..20 {
        timed_call(&b, true).await;
    }
    server.kill();
    // Calls keep flowing and none waits longer than the timeout (plus a margin).
    for _ in 0..100 {
        let took = timed_call(&b, true).await;
        assert!(took <= TIMEOUT + MARGIN, "acquire blocked {took:?}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    wait_for("the outage", || b.is_degraded()).await;
    assert_eq!(
        count(&events, |e| matches!(e, EventKind::OutageStarted { .. })),
        1
    );
    // The fallback breaker protects the dependency on its own.
    for _ in 0..3 {
        timed_call(&b, false).await;
    }
    let rejected = b.acquire().await.unwrap_err();
    assert_eq!(rejected.phase(), Phase::Open);
    assert!(b.stats().fallback_calls > 0);
    // Redis comes back empty: the local trip is pushed.
    server.restart();
    wait_for("the resync", || !b.is_degraded()).await;
    let ended: Vec<_> = events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            EventKind::OutageEnded { pushed, .. } => Some(*pushed),
            _ => None,
        })
        .collect();
    assert_eq!(ended, [Some("trip")]);
    assert_eq!(b.snapshot().await.unwrap().phase, Phase::Open);
    assert_eq!(b.acquire().await.unwrap_err().phase(), Phase::Open);
    assert_eq!(
        count(&events, |e| matches!(e, EventKind::OutageStarted { .. })),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_redis_is_an_outage_bounded_by_the_timeout() {
    let server = RedisServer::start();
    let (b, events) = node(&server, "paused", Mode::Strict, Fallback::LocalBreaker).await;
    timed_call(&b, true).await;
    server.pause();
    for _ in 0..20 {
        let took = timed_call(&b, true).await;
        assert!(took <= TIMEOUT + MARGIN, "acquire blocked {took:?}");
    }
    assert!(b.is_degraded());
    server.resume();
    wait_for("the resync", || !b.is_degraded()).await;
    assert_eq!(
        count(&events, |e| matches!(e, EventKind::OutageStarted { .. })),
        1
    );
    assert_eq!(
        count(&events, |e| matches!(e, EventKind::OutageEnded { .. })),
        1
    );
    let permit = b.acquire().await.unwrap();
    assert!(!permit.is_fallback());
    permit.success().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_closed_rejects_and_fail_open_admits_during_an_outage() {
    let mut server = RedisServer::start();
    let (closed, _) = node(&server, "policy", Mode::Strict, Fallback::FailClosed).await;
    let (open, _) = node(&server, "policy", Mode::Strict, Fallback::FailOpen).await;
    server.kill();
    assert!(closed.acquire().await.is_err());
    assert!(closed.acquire().await.is_err());
    for _ in 0..10 {
        open.acquire().await.unwrap().failure().await;
    }
    assert!(open.acquire().await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_shadow_mode_neither_a_known_override_nor_fail_closed_rejects_during_an_outage() {
    let mut server = RedisServer::start();
    let (closed, _) = node(&server, "shadow-out", Mode::Strict, Fallback::FailClosed).await;
    closed.force_open().await.unwrap();
    closed.set_shadow(true).await.unwrap();
    server.kill();
    for _ in 0..3 {
        let permit = closed
            .acquire()
            .await
            .expect("shadow admits through the outage");
        assert_eq!(permit.kind(), breakerbox::model::PermitKind::Passthrough);
    }
    assert!(closed.is_degraded());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_override_is_kept_through_an_outage_and_pushed_back() {
    let mut server = RedisServer::start();
    let (a, _) = node(&server, "override", local_view(), Fallback::FailOpen).await;
    let (b, _) = node(&server, "override", local_view(), Fallback::FailOpen).await;
    a.force_open().await.unwrap();
    wait_for("b to see the override", || b.phase() == Phase::ForcedOpen).await;
    server.kill();
    wait_for("the outage", || {
        // Nodes notice on their next Redis call (a refresh).
        a.is_degraded() && b.is_degraded()
    })
    .await;
    // Fail-open would admit; the override both nodes saw still rejects.
    assert_eq!(a.acquire().await.unwrap_err().phase(), Phase::ForcedOpen);
    assert_eq!(b.acquire().await.unwrap_err().phase(), Phase::ForcedOpen);
    server.restart();
    wait_for("the resync", || !a.is_degraded() && !b.is_degraded()).await;
    assert_eq!(a.snapshot().await.unwrap().phase, Phase::ForcedOpen);
    assert_eq!(b.acquire().await.unwrap_err().phase(), Phase::ForcedOpen);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_made_during_an_outage_is_pushed_when_redis_is_back() {
    let server = RedisServer::start();
    let (a, _) = node(&server, "reset-late", Mode::Strict, Fallback::FailOpen).await;
    a.force_open().await.unwrap();
    server.pause();
    assert!(a.acquire().await.is_err());
    assert!(a.is_degraded());
    assert!(a.reset().await.is_err(), "not in redis yet");
    assert!(a.acquire().await.is_ok(), "but applied locally at once");
    server.resume();
    wait_for("the resync", || !a.is_degraded()).await;
    assert_eq!(a.snapshot().await.unwrap().phase, Phase::Closed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_switch_made_during_an_outage_is_pushed_beside_an_override() {
    let server = RedisServer::start();
    let (a, _) = node(&server, "shadow-late", Mode::Strict, Fallback::FailOpen).await;
    a.reset().await.unwrap();
    server.pause();
    assert!(a.acquire().await.is_ok());
    assert!(a.is_degraded());
    assert!(a.force_open().await.is_err(), "not in redis yet");
    assert!(a.set_shadow(true).await.is_err(), "not in redis yet");
    server.resume();
    wait_for("the resync", || !a.is_degraded()).await;
    let snapshot = a.snapshot().await.unwrap();
    assert_eq!(
        (snapshot.phase, snapshot.shadow),
        (Phase::ForcedOpen, true),
        "both were pushed: the switch did not displace the override"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_flush_mid_run_changes_nothing_visible() {
    let server = RedisServer::start();
    let (b, events) = node(&server, "flush", Mode::Strict, Fallback::FailClosed).await;
    for i in 0..50 {
        if i % 10 == 5 {
            assert_eq!(server.command(&["SCRIPT", "FLUSH"]).unwrap(), "+OK");
        }
        b.acquire().await.unwrap().success().await;
    }
    assert!(!b.is_degraded());
    assert_eq!(
        count(&events, |e| matches!(e, EventKind::OutageStarted { .. })),
        0
    );
    assert!(server.command_calls("script|load") >= 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_hash_is_reported_and_repaired_by_the_breaker() {
    let server = RedisServer::start();
    let (b, events) = node(&server, "corrupt", Mode::Strict, Fallback::FailClosed).await;
    b.acquire().await.unwrap().failure().await;
    server
        .command(&["HSET", "bb:{corrupt}", "phase", "9"])
        .unwrap();
    let permit = b.acquire().await.unwrap();
    permit.failure().await; // stale: the repair started a new generation
    assert_eq!(
        count(&events, |e| matches!(
            e,
            EventKind::CorruptStateRepaired { .. }
        )),
        1
    );
    assert_eq!(b.snapshot().await.unwrap().phase, Phase::Closed);
    assert_eq!(b.stats().repairs, 1);
    server.command(&["DEL", "bb:{corrupt}"]).unwrap();
    server
        .command(&["SET", "bb:{corrupt}", "not a hash"])
        .unwrap();
    assert!(b.acquire().await.is_ok());
    assert_eq!(
        count(&events, |e| matches!(
            e,
            EventKind::CorruptStateRepaired { .. }
        )),
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarting_redis_under_load_from_many_tasks_never_blocks_a_call() {
    let mut server = RedisServer::start();
    let (b, _) = node(&server, "load", local_view(), Fallback::LocalBreaker).await;
    let worst = Arc::new(Mutex::new(Duration::ZERO));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let b = b.clone();
        let worst = worst.clone();
        let stop = stop.clone();
        tasks.push(tokio::spawn(async move {
            let mut n = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && n < 100_000 {
                let took = timed_call(&b, true).await;
                {
                    let mut w = worst.lock().unwrap();
                    *w = (*w).max(took);
                }
                n += 1;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.kill();
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.restart();
    tokio::time::sleep(Duration::from_millis(200)).await;
    server.pause();
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.resume();
    wait_for("the resync", || !b.is_degraded()).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    let worst = *worst.lock().unwrap();
    assert!(worst <= TIMEOUT + MARGIN, "a call blocked {worst:?}");
    assert!(b.stats().outages >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acl_user_in_the_url_authenticates_and_a_wrong_password_falls_back() {
    let server = RedisServer::start_with(
        &[
            "--requirepass",
            "admin-secret",
            "--user",
            "breaker",
            "on",
            ">s3cret",
            "~bb:*",
            "&*",
            "+@all",
        ],
        Some("admin-secret"),
    );
    let url = format!("redis://breaker:s3cret@127.0.0.1:{}/", server.port());
    let b = RedisBreaker::builder(url, "acl")
        .mode(Mode::Strict)
        .fallback(Fallback::FailClosed)
        .timeout(Duration::from_millis(500))
        .build()
        .await
        .unwrap();
    b.acquire().await.unwrap().failure().await;
    assert!(!b.is_degraded());
    assert_eq!(b.snapshot().await.unwrap().consecutive_failures, 1);
    assert_eq!(
        server.command(&["HGET", "bb:{acl}", "streak"]).unwrap(),
        "1"
    );

    let wrong = format!("redis://breaker:nope@127.0.0.1:{}/", server.port());
    let b = RedisBreaker::builder(wrong, "acl")
        .mode(Mode::Strict)
        .fallback(Fallback::FailClosed)
        .timeout(Duration::from_millis(500))
        .build()
        .await
        .unwrap();
    assert!(b.is_degraded());
    assert!(
        b.acquire().await.is_err(),
        "fail-closed while redis refuses us"
    );
}

/// A probe slot reserved by an acquire that timed out on the client (Redis ran it when it
/// resumed) does not wedge the half-open phase: a new probe is admitted within one lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_reserved_by_a_timed_out_acquire_is_given_back() {
    let server = RedisServer::start();
    let config = Config::builder()
        .consecutive_failures(1)
        .recovery_timeout(Duration::from_millis(300))
        .half_open_timeout(Duration::from_secs(30))
        .max_probes(1)
        .build()
        .unwrap();
    let lease = Duration::from_millis(1_000);
    let b = RedisBreaker::builder(server.url(), "orphan")
        .config(config)
        .mode(Mode::Strict)
        .fallback(Fallback::FailClosed)
        .timeout(TIMEOUT)
        .probe_lease(lease)
        .backoff(Backoff {
            min: Duration::from_millis(20),
            max: Duration::from_millis(100),
        })
        .build()
        .await
        .unwrap();
    b.acquire().await.unwrap().failure().await;
    tokio::time::sleep(Duration::from_millis(350)).await;
    server.pause();
    // This acquire times out here, but sits in Redis's socket: it runs on resume and
    // takes the only probe slot for nobody.
    assert!(b.acquire().await.is_err());
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.resume();
    let resumed = Instant::now();
    let deadline = resumed + lease + Duration::from_millis(1_000);
    let probe = loop {
        if let Ok(permit) = b.acquire().await {
            if permit.is_probe() {
                break permit;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no probe within one lease after Redis resumed: {:?}",
            b.snapshot().await.map(|s| (s.phase, s.probes_in_flight))
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    eprintln!("a probe {:?} after Redis resumed", resumed.elapsed());
    probe.success().await;
}

/// A failover to a replica that was behind: the same incarnation at a lower version.
/// The node that knew the open phase gives it back, with the time it had left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_to_a_replica_behind_gives_back_the_open_phase() {
    let server = RedisServer::start();
    let (b, events) = node(&server, "behind", local_view(), Fallback::FailClosed).await;
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    timed_call(&b, true).await;
    b.flush().await;
    // What the replica holds: the closed state, before the trip.
    let replica: Vec<u8> = redis::cmd("DUMP")
        .arg("bb:{behind}")
        .query_async(&mut conn)
        .await
        .unwrap();
    for _ in 0..3 {
        timed_call(&b, false).await;
    }
    b.flush().await;
    wait_for("the trip", || b.phase() == Phase::Open).await;
    let tripped = Instant::now();
    // The failover: the primary's writes since the dump are lost.
    let _: () = redis::cmd("RESTORE")
        .arg("bb:{behind}")
        .arg(0)
        .arg(replica)
        .arg("REPLACE")
        .query_async(&mut conn)
        .await
        .unwrap();
    // (No check that Redis now reads closed: the node's next read, which a node-level
    // flush or a message may run at any moment, can give the open phase back before a
    // check here would see it.)
    // The node keeps rejecting, and its next refresh gives the open phase back.
    assert_eq!(b.acquire().await.unwrap_err().phase(), Phase::Open);
    wait_for("the open phase restored in redis", || {
        server.command(&["HGET", "bb:{behind}", "phase"]).as_deref() == Some("1")
    })
    .await;
    let left = b.snapshot().await.unwrap().retry_after.unwrap();
    let expected = Duration::from_secs(30).saturating_sub(tripped.elapsed());
    assert!(
        left <= expected + Duration::from_millis(100) && left + Duration::from_secs(1) >= expected,
        "restored with {left:?} left, expected about {expected:?}"
    );
    assert!(events.lock().unwrap().iter().any(|e| matches!(
        e,
        EventKind::Transition(t) if t.reason == breakerbox::model::TransitionReason::Restored
    )));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_override_longer_than_supported_is_refused_before_anything_changes() {
    let server = RedisServer::start();
    let (b, _) = node(&server, "centuries", local_view(), Fallback::LocalBreaker).await;
    let centuries = Duration::from_secs(300 * 365 * 24 * 3600);
    for duration in [centuries, Duration::from_millis(u64::MAX)] {
        let refused = b.force_open_for(duration).await.unwrap_err();
        assert!(
            matches!(refused, breakerbox_redis::StoreError::Invalid(_)),
            "{refused}"
        );
        assert!(refused.to_string().contains("until reset"), "{refused}");
        assert_eq!(b.phase(), Phase::Closed);
        assert!(b.acquire().await.is_ok());
    }
    // "Until reset" has its own form, and holds.
    b.force_open().await.unwrap();
    for _ in 0..100 {
        let open = b.acquire().await.unwrap_err();
        assert_eq!(
            (open.phase(), open.retry_after()),
            (Phase::ForcedOpen, None)
        );
    }
    assert_eq!(b.snapshot().await.unwrap().phase, Phase::ForcedOpen);
}

/// Which state wins, case 4: the node made no override, knew nothing Redis lost and did
/// not trip on its own, so Redis's state wins, whatever it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_an_outage_redis_wins_when_the_node_has_nothing_to_push() {
    let mut server = RedisServer::start();
    let (a, events) = node(&server, "redis-wins", local_view(), Fallback::FailOpen).await;
    timed_call(&a, true).await;
    a.flush().await;
    server.kill();
    wait_for("the outage", || a.is_degraded()).await;
    server.restart();
    // An operator forces it open on the restarted Redis before (or while) the node
    // comes back.
    let store = breakerbox_redis::RedisStore::new(
        redis::Client::open(server.url()).unwrap(),
        "redis-wins",
        a.config(),
        &breakerbox_redis::StoreOptions::default(),
    );
    store
        .manual(breakerbox_redis::ManualOp::ForceOpen(None), None, 0.0)
        .await
        .unwrap();
    wait_for("the resync", || !a.is_degraded()).await;
    wait_for("the node to adopt redis's state", || {
        a.phase() == Phase::ForcedOpen
    })
    .await;
    assert_eq!(a.acquire().await.unwrap_err().phase(), Phase::ForcedOpen);
    let pushed = events.lock().unwrap().iter().find_map(|e| match e {
        EventKind::OutageEnded { pushed, .. } => Some(*pushed),
        _ => None,
    });
    assert_eq!(pushed, Some(None), "nothing pushed: Redis won");
}
