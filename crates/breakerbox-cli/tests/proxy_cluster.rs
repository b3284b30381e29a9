//! Two `breakerbox proxy` processes sharing one breaker through a real Redis Cluster
//! (`redis = "redis+cluster://..."` in their config files).

#![allow(clippy::disallowed_methods)]

#[path = "support/proxy_harness.rs"]
mod harness;
// The Redis engine's own harnesses: real servers on free loopback ports.
#[path = "../../breakerbox-redis/tests/support/cluster.rs"]
mod cluster;
#[path = "../../breakerbox-redis/tests/support/redis_server.rs"]
mod redis_server;

use std::time::Duration;

use harness::{admin_post, eventually, get, temp_dir, ProxyProcess, Upstream};

fn cluster_config(url: &str, upstream: &Upstream) -> String {
    format!(
        "listen = \"127.0.0.1:0\"\nredis = \"{url}\"\nredis_prefix = \"proxytest:\"\n[admin]\nlisten = \"127.0.0.1:0\"\n\
         [[upstream]]\nname = \"payments\"\nroute = \"/\"\nurl = \"{}\"\n\
         [upstream.breaker]\nconsecutive_failures = 2\nrecovery_timeout = \"30s\"\n",
        upstream.url()
    )
}

#[test]
fn proxies_on_a_cluster_share_a_trip_and_a_reset() {
    let cluster = cluster::RedisCluster::start();
    let url = cluster.url();
    let upstream_a = Upstream::start();
    let upstream_b = Upstream::start();
    upstream_a.answer(500, "down");
    let a = ProxyProcess::start(&temp_dir("cluster-a"), &cluster_config(&url, &upstream_a));
    let b = ProxyProcess::start(&temp_dir("cluster-b"), &cluster_config(&url, &upstream_b));
    assert_eq!(get(b.addr, "/x").status, 200, "closed at first");
    for _ in 0..2 {
        assert_eq!(get(a.addr, "/x").status, 500);
    }
    assert!(
        eventually(Duration::from_secs(3), || get(a.addr, "/x").status == 503),
        "proxy A did not open"
    );
    assert!(
        eventually(Duration::from_secs(5), || get(b.addr, "/x").status == 503),
        "proxy B never rejected"
    );
    assert_eq!(b.status()["breakers"]["payments"]["shared"], true);
    assert_eq!(
        admin_post(b.admin, "/breakers/payments/reset", &[]).status,
        200
    );
    assert!(
        eventually(Duration::from_secs(5), || a.phase("payments") == "closed"),
        "the reset through B did not reach A"
    );
    // The state lives on the cluster, on its key's slot.
    let owner = cluster.primary_of("proxytest:{payments}");
    assert_eq!(
        cluster.nodes[owner]
            .command(&["HGET", "proxytest:{payments}", "phase"])
            .as_deref(),
        Some("0")
    );
}
