//! `breakerbox proxy` reloads its config file (SIGHUP, `POST /reload`) without losing
//! state: a bad file keeps the running config and names the bad key; an unchanged
//! upstream keeps its breaker (an open one stays open); settings that apply in place do
//! so on the same breaker, and a changed breaker setting builds a new breaker; an added
//! upstream serves; a removed one finishes its requests in flight; and under load no
//! request fails because of a reload.

#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)]

#[path = "support/proxy_harness.rs"]
mod harness;

#[path = "../../breakerbox-admin/tests/support/hostile_posts.rs"]
mod hostile_posts;
// The Redis engine's own harness: spawns redis-server on a free loopback port.
#[path = "../../breakerbox-redis/tests/support/redis_server.rs"]
mod redis_server;

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use harness::{
    admin_post, eventually, get, listeners, request, temp_dir, write, KeepAlive, ProxyProcess,
    Reply, Upstream,
};

/// An `[[upstream]]` table: `name` routed at `/name/`, with `extra` lines (before any
/// sub-table).
fn upstream(name: &str, up: &Upstream, extra: &str) -> String {
    format!(
        "[[upstream]]\nname = \"{name}\"\nroute = \"/{name}/\"\nurl = \"{}\"\n{extra}\n",
        up.url()
    )
}

/// A breaker that trips on one failure and stays open a minute.
const TRIPS_ONCE: &str = "[upstream.breaker]\nconsecutive_failures = 1\nrecovery_timeout = \"60s\"";

fn reload(proxy: &ProxyProcess) -> Reply {
    admin_post(proxy.admin, "/reload", &[])
}

/// Rewrites the running config file and reloads it with `POST /reload`.
fn rewrite_and_reload(dir: &Path, proxy: &ProxyProcess, config: &str) -> Reply {
    write(dir, "proxy.toml", config);
    reload(proxy)
}

/// Replaces the config file in one step (a rename), so a reload that a signal starts
/// at any moment reads the old file or the new one, never half of one.
fn replace(dir: &Path, config: &str) {
    write(dir, "proxy.toml.new", config);
    std::fs::rename(dir.join("proxy.toml.new"), dir.join("proxy.toml")).unwrap();
}

fn hangup(proxy: &ProxyProcess) {
    let status = Command::new("kill")
        .args(["-HUP", &proxy.pid().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
}

fn names(summary: &serde_json::Value, key: &str) -> Vec<String> {
    summary[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} in {summary}"))
        .iter()
        .map(|v| {
            v.as_str()
                .map_or_else(|| v["name"].to_string(), str::to_string)
        })
        .collect()
}

fn metric(proxy: &ProxyProcess, line_start: &str) -> Option<String> {
    get(proxy.admin, "/metrics")
        .body
        .lines()
        .find(|l| l.starts_with(line_start))
        .map(str::to_string)
}

#[test]
fn a_bad_file_keeps_the_running_config_and_the_error_names_its_key() {
    let a = Upstream::start();
    let b = Upstream::start();
    let dir = temp_dir("reload-bad-file");
    let good = format!("{}{}", listeners(), upstream("a", &a, ""));
    let proxy = ProxyProcess::start(&dir, &good);
    assert_eq!(get(proxy.addr, "/a/x").status, 200);

    // A bad value in an upstream, beside an upstream that would be added: nothing of the
    // file applies.
    let bad = format!(
        "{}{}{}",
        listeners(),
        upstream("a", &a, "max_in_flight = 0"),
        upstream("b", &b, "")
    );
    let reply = rewrite_and_reload(&dir, &proxy, &bad);
    assert_eq!(reply.status, 422, "{reply:?}");
    let body = reply.json();
    assert_eq!(body["error"], "reload_refused", "{body}");
    let errors = body["errors"].to_string();
    assert!(errors.contains("upstream[0].max_in_flight"), "{body}");
    assert_eq!(get(proxy.addr, "/b/x").status, 404, "b was added anyway");
    assert_eq!(b.count(), 0);
    assert_eq!(get(proxy.addr, "/a/x").status, 200);
    assert!(proxy.status()["breakers"].get("b").is_none());

    // By SIGHUP: refused the same way, the error logged with its key.
    hangup(&proxy);
    assert!(
        eventually(Duration::from_secs(5), || proxy
            .stderr()
            .matches("error: upstream[0].max_in_flight")
            .count()
            == 2),
        "{}",
        proxy.stderr()
    );
    assert!(proxy.stderr().contains("the running config stays"));

    // Invalid TOML, and a key that cannot change while the proxy runs.
    let reply = rewrite_and_reload(&dir, &proxy, "listen = ");
    assert_eq!(reply.status, 422, "{reply:?}");
    assert!(reply.json()["errors"].to_string().contains("invalid TOML"));
    let moved = good.replacen("127.0.0.1:0", "127.0.0.1:1", 1);
    let reply = rewrite_and_reload(&dir, &proxy, &moved);
    assert_eq!(reply.status, 422, "{reply:?}");
    assert!(
        reply.json()["errors"][0]
            .as_str()
            .unwrap()
            .starts_with("listen: cannot change on reload"),
        "{reply:?}"
    );
    assert_eq!(get(proxy.addr, "/a/x").status, 200);

    // The counter: four refusals, then the good file again applies.
    let reply = rewrite_and_reload(&dir, &proxy, &good);
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(names(&reply.json(), "kept"), ["a"]);
    assert_eq!(
        metric(&proxy, "breakerbox_reloads_total{result=\"error\"}").as_deref(),
        Some("breakerbox_reloads_total{result=\"error\"} 4")
    );
    assert_eq!(
        metric(&proxy, "breakerbox_reloads_total{result=\"ok\"}").as_deref(),
        Some("breakerbox_reloads_total{result=\"ok\"} 1")
    );
}

#[test]
fn post_reload_follows_the_rules_of_the_admin_actions() {
    let a = Upstream::start();
    let dir = temp_dir("reload-access");
    let config = format!("{}{}", listeners(), upstream("a", &a, ""));
    let proxy = ProxyProcess::start(&dir, &config);
    let reply = get(proxy.admin, "/reload");
    assert_eq!(reply.status, 405, "{reply:?}");
    for (what, headers) in hostile_posts::cross_origin_posts() {
        let reply = request(proxy.admin, "POST", "/reload", &headers, b"");
        assert_eq!(reply.status, 403, "{what}: {}", reply.body);
    }
    assert_eq!(reload(&proxy).status, 200);

    let dir = temp_dir("reload-access-token");
    let with_token = config.replacen("[admin]\n", "[admin]\ntoken = \"s3cret\"\n", 1);
    let proxy = ProxyProcess::start(&dir, &with_token);
    assert_eq!(reload(&proxy).status, 401);
    let reply = admin_post(proxy.admin, "/reload", &[("authorization", "Bearer wrong")]);
    assert_eq!(reply.status, 403);
    let reply = admin_post(
        proxy.admin,
        "/reload",
        &[("authorization", "Bearer s3cret")],
    );
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(
        metric(&proxy, "breakerbox_reloads_total{result=\"ok\"}").as_deref(),
        Some("breakerbox_reloads_total{result=\"ok\"} 1"),
        "only the authorised reload ran"
    );
}

#[test]
fn an_unchanged_upstreams_open_breaker_stays_open_and_a_changed_breaker_setting_starts_a_new_one() {
    let a = Upstream::start();
    a.answer(500, "down");
    let b = Upstream::start();
    let dir = temp_dir("reload-keeps-state");
    let first = format!(
        "{}{}{}",
        listeners(),
        upstream("a", &a, TRIPS_ONCE),
        upstream("b", &b, "")
    );
    let proxy = ProxyProcess::start(&dir, &first);
    assert_eq!(get(proxy.addr, "/a/x").status, 500);
    assert_eq!(proxy.phase("a"), "open");
    let before = proxy.status()["breakers"]["a"].clone();

    // b changes (a judge rule), c is added, a is as it was.
    let c = Upstream::start();
    let second = format!(
        "{}{}{}{}",
        listeners(),
        upstream("a", &a, TRIPS_ONCE),
        upstream("b", &b, "[upstream.judge]\nclient_errors = \"failure\""),
        upstream("c", &c, "")
    );
    let reply = rewrite_and_reload(&dir, &proxy, &second);
    assert_eq!(reply.status, 200, "{reply:?}");
    let summary = reply.json();
    assert_eq!(names(&summary, "kept"), ["a"], "{summary}");
    assert_eq!(names(&summary, "added"), ["c"], "{summary}");
    assert_eq!(summary["changed"][0]["name"], "b", "{summary}");
    assert_eq!(summary["changed"][0]["breaker"], "kept", "{summary}");
    assert_eq!(summary["changed"][0]["keys"], serde_json::json!(["judge"]));

    let after = proxy.status()["breakers"]["a"].clone();
    assert_eq!(after["phase"], "open", "{after}");
    assert_eq!(after["generation"], before["generation"], "{after}");
    assert_eq!(after["calls"], before["calls"], "the counters were reset");
    let rejected = get(proxy.addr, "/a/x");
    assert_eq!(rejected.status, 503, "{rejected:?}");
    assert_eq!(rejected.json()["error"], "circuit_open");
    assert_eq!(a.count(), 1, "the open breaker let a call through");
    // b's new judge rule judges from now on: a 404 fails (it was ignored).
    b.answer(404, "nope");
    assert_eq!(get(proxy.addr, "/b/x").status, 404);
    assert_eq!(
        proxy.status()["breakers"]["b"]["calls"]["failure"],
        1,
        "the new judge rule did not apply"
    );

    // A changed breaker setting (the open duration) builds a new breaker: closed, as the
    // reload's answer says.
    let third = second.replacen(
        "recovery_timeout = \"60s\"",
        "recovery_timeout = \"50s\"",
        1,
    );
    let reply = rewrite_and_reload(&dir, &proxy, &third);
    assert_eq!(reply.status, 200, "{reply:?}");
    let summary = reply.json();
    assert_eq!(summary["changed"][0]["name"], "a", "{summary}");
    assert_eq!(summary["changed"][0]["breaker"], "new", "{summary}");
    assert_eq!(proxy.phase("a"), "closed");
    assert_eq!(get(proxy.addr, "/a/x").status, 500);
    assert_eq!(a.count(), 2);
    assert_eq!(
        proxy.phase("a"),
        "open",
        "the new breaker has the file's rules"
    );
    assert_eq!(
        proxy.status()["breakers"]["a"]["calls"]["failure"],
        2,
        "the upstream's counters go on across a new breaker"
    );

    // An operator's trip survives a new breaker: b, tripped by hand, gets new settings.
    let trip = admin_post(proxy.admin, "/breakers/b/trip", &[]);
    assert_eq!(trip.status, 200, "{trip:?}");
    let fourth = third.replacen(
        "[upstream.judge]",
        "[upstream.breaker]\nconsecutive_failures = 9\n[upstream.judge]",
        1,
    );
    let reply = rewrite_and_reload(&dir, &proxy, &fourth);
    assert_eq!(reply.status, 200, "{reply:?}");
    let summary = reply.json();
    assert_eq!(summary["changed"][0]["name"], "b", "{summary}");
    assert_eq!(summary["changed"][0]["breaker"], "new", "{summary}");
    assert_eq!(proxy.phase("b"), "forced_open");
    let before = b.count();
    assert_eq!(get(proxy.addr, "/b/x").status, 503);
    assert_eq!(b.count(), before, "the forced open ended with the reload");
}

#[test]
fn settings_that_apply_in_place_change_the_running_breaker_without_a_reset() {
    let a = Upstream::start();
    a.answer(500, "down");
    let slow = Upstream::start();
    slow.delay(Duration::from_millis(1500));
    let dir = temp_dir("reload-in-place");
    let limits = |n: usize| format!("max_in_flight = {n}\nmax_pending = 0");
    let config = |mode: &str, route: &str, n: usize| {
        format!(
            "{}[[upstream]]\nname = \"a\"\nroute = \"{route}\"\nurl = \"{}\"\n{mode}\n{TRIPS_ONCE}\n{}",
            listeners(),
            a.url(),
            upstream("slow", &slow, &limits(n))
        )
    };
    let proxy = ProxyProcess::start(&dir, &config("", "/a/", 1));
    assert_eq!(get(proxy.addr, "/a/x").status, 500);
    assert_eq!(proxy.phase("a"), "open");
    let generation = proxy.status()["breakers"]["a"]["generation"].clone();

    // Shadow mode (rule 20's switch) and a new route apply to the open breaker: it stays
    // open, and lets calls through as a shadow breaker does.
    let reply = rewrite_and_reload(&dir, &proxy, &config("mode = \"shadow\"", "/new/", 1));
    assert_eq!(reply.status, 200, "{reply:?}");
    let summary = reply.json();
    assert_eq!(summary["changed"][0]["breaker"], "kept", "{summary}");
    assert_eq!(
        summary["changed"][0]["keys"],
        serde_json::json!(["route", "mode"])
    );
    assert_eq!(
        get(proxy.addr, "/a/x").status,
        404,
        "the old route still routes"
    );
    let through = get(proxy.addr, "/new/x");
    assert_eq!(
        through.status, 500,
        "shadow mode did not apply: {through:?}"
    );
    assert_eq!(a.count(), 2);
    let entry = proxy.status()["breakers"]["a"].clone();
    assert_eq!(entry["phase"], "open", "{entry}");
    assert_eq!(entry["generation"], generation, "{entry}");
    assert_eq!(entry["shadow"], true, "{entry}");

    // A concurrency limit raised while its one place is taken: the request in flight
    // still counts, and one more place opens at once.
    let addr = proxy.addr;
    let first = thread::spawn(move || get(addr, "/slow/1"));
    assert!(eventually(Duration::from_secs(5), || slow.heads() == 1));
    assert_eq!(get(proxy.addr, "/slow/2").json()["error"], "overloaded");
    let reply = rewrite_and_reload(&dir, &proxy, &config("mode = \"shadow\"", "/new/", 2));
    assert_eq!(reply.status, 200, "{reply:?}");
    let concurrency = proxy.status()["breakers"]["slow"]["concurrency"].clone();
    assert_eq!(concurrency["max_in_flight"], 2, "{concurrency}");
    assert_eq!(concurrency["in_flight"], 1, "{concurrency}");
    let second = thread::spawn(move || get(addr, "/slow/3"));
    assert!(
        eventually(Duration::from_secs(5), || slow.heads() == 2),
        "the raised limit did not open a place"
    );
    assert_eq!(
        get(proxy.addr, "/slow/4").json()["error"],
        "overloaded",
        "the request in flight from before the reload no longer counts"
    );
    assert_eq!(first.join().unwrap().status, 200);
    assert_eq!(second.join().unwrap().status, 200);
}

#[test]
fn an_added_upstream_serves_and_a_removed_one_finishes_its_requests_in_flight() {
    let a = Upstream::start();
    let slow = Upstream::start();
    slow.answer(200, "slow done");
    slow.delay(Duration::from_millis(1500));
    let dir = temp_dir("reload-add-remove");
    let proxy = ProxyProcess::start(
        &dir,
        &format!(
            "{}{}{}",
            listeners(),
            upstream("a", &a, ""),
            upstream("slow", &slow, "")
        ),
    );
    let addr = proxy.addr;
    let in_flight = thread::spawn(move || get(addr, "/slow/x"));
    assert!(eventually(Duration::from_secs(5), || slow.heads() == 1));

    // By SIGHUP: slow removed, b added.
    let b = Upstream::start();
    b.answer(200, "from b");
    write(
        &dir,
        "proxy.toml",
        &format!(
            "{}{}{}",
            listeners(),
            upstream("a", &a, ""),
            upstream("b", &b, "")
        ),
    );
    hangup(&proxy);
    assert!(
        eventually(Duration::from_secs(5), || get(proxy.addr, "/b/x").status
            == 200),
        "the added upstream never served: {}",
        proxy.stderr()
    );
    assert_eq!(get(proxy.addr, "/b/y").body, "from b");
    let refused = get(proxy.addr, "/slow/y");
    assert_eq!(refused.status, 404, "a removed upstream took a new request");
    assert_eq!(slow.heads(), 1);
    assert!(
        !proxy.stderr().contains("drained slow"),
        "drained with a request in flight: {}",
        proxy.stderr()
    );
    let draining = proxy.status()["draining"].clone();
    assert_eq!(
        draining.as_array().map(Vec::len),
        Some(1),
        "one replaced config still held: {draining}"
    );
    assert_eq!(draining[0]["upstreams"], serde_json::json!(["slow"]));
    assert_eq!(draining[0]["replaced_by_generation"], 1);
    assert!(draining[0]["for_ms"].is_u64(), "{draining}");

    let finished = in_flight.join().unwrap();
    assert_eq!(finished.status, 200, "{finished:?}");
    assert_eq!(finished.body, "slow done");
    assert!(
        eventually(Duration::from_secs(5), || proxy
            .stderr()
            .contains("drained slow (the last request in flight ended)")),
        "{}",
        proxy.stderr()
    );
    let status = proxy.status();
    assert!(status["breakers"].get("slow").is_none(), "{status}");
    assert_eq!(status["breakers"]["b"]["phase"], "closed");
    assert_eq!(
        status["draining"],
        serde_json::json!([]),
        "drained, so no longer listed"
    );
    let metrics = get(proxy.admin, "/metrics").body;
    assert!(metrics.contains("breaker=\"b\""), "{metrics}");
    assert!(!metrics.contains("breaker=\"slow\""), "{metrics}");
    assert!(proxy.stderr().contains("(SIGHUP)"), "{}", proxy.stderr());
}

#[test]
fn under_load_no_request_fails_because_of_a_reload() {
    let a = Upstream::start();
    a.answer(200, "a");
    let b = Upstream::start();
    b.answer(200, "b");
    let c = Upstream::start();
    c.answer(200, "c");
    let dir = temp_dir("reload-under-load");
    // The files the reloads switch between: a changes its breaker (a new one), b its
    // judge and concurrency limits (in place), c comes and goes; a and b always route.
    let files = [
        format!(
            "{}{}{}",
            listeners(),
            upstream("a", &a, "[upstream.breaker]\nconsecutive_failures = 5"),
            upstream("b", &b, "max_in_flight = 64")
        ),
        format!(
            "{}{}{}{}",
            listeners(),
            upstream("a", &a, "[upstream.breaker]\nconsecutive_failures = 7"),
            upstream(
                "b",
                &b,
                "max_in_flight = 32\n[upstream.judge]\nclient_errors = \"failure\""
            ),
            upstream("c", &c, "")
        ),
    ];
    let proxy = ProxyProcess::start(&dir, &files[0]);
    let addr = proxy.addr;
    let stop = Arc::new(AtomicBool::new(false));
    let served = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..4usize)
        .map(|i| {
            let (stop, served) = (stop.clone(), served.clone());
            thread::spawn(move || {
                let mut failures = Vec::new();
                let mut keep = KeepAlive::connect(addr);
                let deadline = Instant::now() + Duration::from_secs(30);
                let mut n = 0usize;
                while !stop.load(Ordering::SeqCst) && n < 20_000 && Instant::now() < deadline {
                    let name = if n.is_multiple_of(2) { "a" } else { "b" };
                    let target = format!("/{name}/{i}/{n}");
                    // Half the clients keep their connections alive across reloads.
                    let reply = if i.is_multiple_of(2) {
                        keep.get(&target)
                    } else {
                        harness::try_request(addr, "GET", &target, &[], b"")
                    };
                    match reply {
                        Ok(r) if r.status == 200 && r.body == name => {
                            served.fetch_add(1, Ordering::SeqCst);
                        }
                        other => failures.push(format!("{target}: {other:?}")),
                    }
                    n += 1;
                }
                failures
            })
        })
        .collect();
    let mut reloads = 0;
    for round in 0..12 {
        let before = served.load(Ordering::SeqCst);
        assert!(
            eventually(Duration::from_secs(10), || served.load(Ordering::SeqCst)
                >= before + 50),
            "requests stopped being served"
        );
        replace(&dir, &files[(round + 1) % 2]);
        if round % 3 == 2 {
            hangup(&proxy);
            let applied = format!("breakerbox_reloads_total{{result=\"ok\"}} {}", round + 1);
            assert!(
                eventually(Duration::from_secs(10), || metric(
                    &proxy,
                    "breakerbox_reloads_total{result=\"ok\"}"
                )
                .as_deref()
                    == Some(applied.as_str())),
                "the SIGHUP reload did not apply: {}",
                proxy.stderr()
            );
        } else {
            let reply = reload(&proxy);
            assert_eq!(reply.status, 200, "{reply:?}");
        }
        reloads += 1;
    }
    let before = served.load(Ordering::SeqCst);
    assert!(eventually(Duration::from_secs(10), || served
        .load(Ordering::SeqCst)
        >= before + 50));
    stop.store(true, Ordering::SeqCst);
    let failures: Vec<String> = clients
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} requests failed during {reloads} reloads, e.g. {:?}",
        failures.len(),
        failures.len() + served.load(Ordering::SeqCst),
        &failures[..failures.len().min(5)]
    );
    assert!(
        eventually(Duration::from_secs(5), || metric(
            &proxy,
            "breakerbox_reloads_total{result=\"ok\"}"
        )
        .as_deref()
            == Some("breakerbox_reloads_total{result=\"ok\"} 12")),
        "{:?}\n{}",
        metric(&proxy, "breakerbox_reloads_total"),
        proxy.stderr()
    );
    assert_eq!(
        metric(&proxy, "breakerbox_reloads_total{result=\"error\"}").as_deref(),
        Some("breakerbox_reloads_total{result=\"error\"} 0")
    );
    assert!(c.count() == 0, "no client asked for c");
}

#[test]
fn an_unchanged_upstream_keeps_its_idle_connections_and_a_new_url_gets_new_ones() {
    let a = Upstream::start();
    let b = Upstream::start();
    let moved = Upstream::start();
    let dir = temp_dir("reload-connections");
    // One worker: one pool, so every request can find the idle connection.
    let config = |b_url: &str| {
        format!(
            "listen = \"127.0.0.1:0\"\nworkers = 1\n[admin]\nlisten = \"127.0.0.1:0\"\n{}\
             [[upstream]]\nname = \"b\"\nroute = \"/b/\"\nurl = \"{b_url}\"\n",
            upstream("a", &a, "")
        )
    };
    let proxy = ProxyProcess::start(&dir, &config(&b.url()));
    for i in 0..3 {
        assert_eq!(get(proxy.addr, &format!("/a/{i}")).status, 200);
        assert_eq!(get(proxy.addr, &format!("/b/{i}")).status, 200);
    }
    assert_eq!((a.connections(), b.connections()), (1, 1));

    // b moves to another address: a keeps its connection, b's requests go to the new one.
    let reply = rewrite_and_reload(&dir, &proxy, &config(&moved.url()));
    assert_eq!(reply.status, 200, "{reply:?}");
    let summary = reply.json();
    assert_eq!(summary["changed"][0]["name"], "b", "{summary}");
    assert_eq!(summary["changed"][0]["connections"], "new", "{summary}");
    assert_eq!(summary["changed"][0]["breaker"], "kept", "{summary}");
    for i in 0..3 {
        assert_eq!(get(proxy.addr, &format!("/a/{i}")).status, 200);
        assert_eq!(get(proxy.addr, &format!("/b/{i}")).status, 200);
    }
    assert_eq!(
        a.connections(),
        1,
        "the unchanged upstream's idle connection was dropped"
    );
    assert_eq!(b.count(), 3, "a request went to the old address");
    assert_eq!((moved.count(), moved.connections()), (3, 1));
}

#[test]
fn a_shared_breaker_rebuilt_by_a_reload_takes_its_state_up_from_redis() {
    let redis = redis_server::RedisServer::start();
    let a = Upstream::start();
    a.answer(500, "down");
    let dir = temp_dir("reload-shared");
    let config = |recovery: &str| {
        format!(
            "listen = \"127.0.0.1:0\"\nredis = \"{}\"\nredis_prefix = \"reloadtest:\"\n\
             [admin]\nlisten = \"127.0.0.1:0\"\n\
             [[upstream]]\nname = \"a\"\nroute = \"/a/\"\nurl = \"{}\"\n\
             [upstream.breaker]\nconsecutive_failures = 2\nrecovery_timeout = \"{recovery}\"\n",
            redis.url(),
            a.url()
        )
    };
    let proxy = ProxyProcess::start(&dir, &config("30s"));
    for _ in 0..2 {
        assert_eq!(get(proxy.addr, "/a/x").status, 500);
    }
    assert!(
        eventually(Duration::from_secs(3), || get(proxy.addr, "/a/x").status
            == 503),
        "the shared breaker did not open"
    );
    let generation = proxy.status()["breakers"]["a"]["generation"].clone();

    let reply = rewrite_and_reload(&dir, &proxy, &config("30s"));
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(names(&reply.json(), "kept"), ["a"]);
    assert_eq!(proxy.phase("a"), "open");

    let reply = rewrite_and_reload(&dir, &proxy, &config("40s"));
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.json()["changed"][0]["breaker"], "new", "{reply:?}");
    let entry = proxy.status()["breakers"]["a"].clone();
    assert_eq!(entry["phase"], "open", "{entry}");
    assert_eq!(entry["generation"], generation, "{entry}");
    assert_eq!(entry["shared"], true, "{entry}");
    let seen = a.count();
    assert!(
        eventually(Duration::from_secs(3), || get(proxy.addr, "/a/x").status
            == 503),
        "the new shared breaker does not reject"
    );
    assert!(a.count() <= seen + 1, "the new breaker let calls through");
}

/// An operator's disable survives a reload that builds a new breaker, as a trip does:
/// a timed one with the time it had left, an untimed one for good. Before, a changed
/// breaker setting silently re-armed a breaker the operator had disabled mid-incident.
#[test]
fn an_operators_disable_and_its_time_left_survive_a_new_breaker() {
    let up = Upstream::start();
    up.answer(500, "down");
    let dir = temp_dir("reload-disable");
    let config = |failures: u32| {
        let breaker = TRIPS_ONCE.replace(
            "consecutive_failures = 1",
            &format!("consecutive_failures = {failures}"),
        );
        format!(
            "{}{}{breaker}\n{}{breaker}",
            listeners(),
            upstream("a", &up, ""),
            upstream("b", &up, ""),
        )
    };
    let proxy = ProxyProcess::start(&dir, &config(1));
    assert_eq!(
        admin_post(proxy.admin, "/breakers/a/disable?for=10m", &[]).status,
        200
    );
    assert_eq!(
        admin_post(proxy.admin, "/breakers/b/disable", &[]).status,
        200
    );

    let reply = rewrite_and_reload(&dir, &proxy, &config(2));
    assert_eq!(reply.status, 200, "{reply:?}");
    let summary = reply.json();
    assert_eq!(summary["changed"][0]["breaker"], "new", "{summary}");
    assert_eq!(summary["changed"][1]["breaker"], "new", "{summary}");
    assert_eq!(summary["warnings"], serde_json::json!([]), "{summary}");
    for name in ["a", "b"] {
        assert_eq!(proxy.phase(name), "disabled", "{name}: {}", proxy.status());
        // Disabled: failures pass through and trip nothing.
        for _ in 0..3 {
            assert_eq!(get(proxy.addr, &format!("/{name}/x")).status, 500);
        }
        assert_eq!(proxy.phase(name), "disabled", "{name}");
    }
    let left = proxy.status()["breakers"]["a"]["override_left_ms"]
        .as_u64()
        .unwrap_or(0);
    assert!(
        (500_000..=600_000).contains(&left),
        "a's disable keeps its time left (10 min less the reload): {left} ms"
    );
    assert!(
        proxy.status()["breakers"]["b"]["override_left_ms"].is_null(),
        "b's disable has no end: {}",
        proxy.status()
    );
}
