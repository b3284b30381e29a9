//! `breakerbox proxy` against operator mistakes: a port already in use, upstream URLs
//! that cannot work, and configs that route ambiguously.

#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)]

#[path = "support/proxy_harness.rs"]
mod harness;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use harness::{check, get, listeners, temp_dir, write, ProxyProcess, Upstream};

fn with_url(url: &str) -> String {
    format!(
        "{}[[upstream]]\nname = \"a\"\nroute = \"/\"\nurl = \"{url}\"\n",
        listeners()
    )
}

#[test]
fn a_second_proxy_on_a_port_in_use_fails_clearly_instead_of_sharing_it() {
    let upstream = Upstream::start();
    let config = |listen: &str| {
        format!(
            "listen = \"{listen}\"\n[admin]\nlisten = \"127.0.0.1:0\"\n[[upstream]]\nname = \"a\"\nroute = \"/\"\nurl = \"{}\"\n",
            upstream.url()
        )
    };
    let dir = temp_dir("port-in-use");
    let first = ProxyProcess::start(&dir, &config("127.0.0.1:0"));
    let path = write(&dir, "second.toml", &config(&first.addr.to_string()));
    let mut second = Command::new(harness::binary())
        .args(["proxy", "--config"])
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = second.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let Some(status) = status else {
        let _ = second.kill();
        let _ = second.wait();
        panic!("a second proxy started on {} (port in use)", first.addr);
    };
    assert!(!status.success());
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut second.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(
        stderr.contains(&format!("cannot listen on {}", first.addr)) && stderr.contains("in use"),
        "{stderr}"
    );
    assert_eq!(get(first.addr, "/x").status, 200);
}

#[test]
fn upstream_urls_with_bad_ports_no_host_or_credentials_are_rejected_naming_the_key() {
    let dir = temp_dir("bad-urls");
    for (url, expected) in [
        (
            "http://127.0.0.1:18001999",
            "upstream[0].url: port 18001999 is out of range (1-65535)",
        ),
        (
            "http://127.0.0.1:65536",
            "upstream[0].url: port 65536 is out of range (1-65535)",
        ),
        (
            "http://127.0.0.1:0",
            "upstream[0].url: port 0 is out of range (1-65535)",
        ),
        (
            "http://127.0.0.1:http",
            "upstream[0].url: port \"http\" is not a number",
        ),
        ("http://127.0.0.1:", "upstream[0].url: empty port"),
        ("http://:8080", "upstream[0].url: no host"),
        (
            "http://user:pw@127.0.0.1:3000",
            "upstream[0].url: credentials (user:password@) are not allowed",
        ),
    ] {
        let (ok, stderr) = check(&dir, "bad.toml", &with_url(url));
        assert!(!ok, "{url} passed --check");
        assert!(
            stderr.contains(expected),
            "{url}: missing {expected:?} in:\n{stderr}"
        );
        assert!(
            !stderr.contains("pw"),
            "{url}: a password was printed:\n{stderr}"
        );
    }
    let (ok, stderr) = check(&dir, "good.toml", &with_url("http://[::1]:3000/base"));
    assert!(ok, "{stderr}");
}

#[test]
fn ambiguous_or_meaningless_configs_are_errors_naming_the_key() {
    let dir = temp_dir("config-errors");
    let upstreams = |a: &str, b: &str| {
        format!(
            "{}[[upstream]]\nname = \"a\"\nurl = \"http://127.0.0.1:1\"\n{a}\n[[upstream]]\nname = \"b\"\nurl = \"http://127.0.0.1:2\"\n{b}\n",
            listeners()
        )
    };
    for (config, expected) in [
        (
            upstreams("route = \"/api/\"", "route = \"/api/\""),
            "upstream[1].route: duplicate route \"/api/\" (also upstream[0])",
        ),
        (
            upstreams("host = \"Shop.example\"", "host = \"shop.EXAMPLE\""),
            "upstream[1].host: duplicate host \"shop.example\" (also upstream[0]; hosts are compared without case)",
        ),
        (
            upstreams("host = \"\"", "route = \"/\""),
            "upstream[0].host: must not be empty",
        ),
        (
            format!("redis_prefix = \"bb:\"\n{}", with_url("http://127.0.0.1:1")),
            "redis_prefix: set without `redis`",
        ),
        (
            format!("{}[redis_options]\ntimeout = \"1s\"\n", with_url("http://127.0.0.1:1")),
            "redis_options: set without `redis`",
        ),
        (
            format!("redis = \"redis://127.0.0.1:1\"\n{}[redis_options]\ntimeout = 100\n", with_url("http://127.0.0.1:1")),
            "redis_options.timeout: invalid duration 100",
        ),
        (
            format!("redis = \"redis://127.0.0.1:1\"\n{}[redis_options]\nnode_id = 0\n", with_url("http://127.0.0.1:1")),
            "redis_options.node_id: invalid value 0",
        ),
        (
            format!("redis = \"redis://127.0.0.1:1\"\n{}[redis_options]\nflush = \"1s\"\n", with_url("http://127.0.0.1:1")),
            "unknown field `flush`",
        ),
        (
            format!("redis = \"redis://127.0.0.1:1\"\nredis_prefix = \"a:\"\n{}[redis_options]\nprefix = \"b:\"\n", with_url("http://127.0.0.1:1")),
            "redis_options.prefix: set as well as `redis_prefix`",
        ),
        (
            format!("{}token = \"pässwort\"\n[[upstream]]\nname = \"a\"\nroute = \"/\"\nurl = \"http://127.0.0.1:1\"\n", listeners()),
            "admin.token: must be non-empty visible ASCII and contain no whitespace",
        ),
        (
            format!("{}hosts = [\"admin!internal\"]\n[[upstream]]\nname = \"a\"\nroute = \"/\"\nurl = \"http://127.0.0.1:1\"\n", listeners()),
            "admin.hosts[0]: expected a host name without a port",
        ),
        (
            format!("{}[limits]\nmax_header_bytes = 1073741824\n[[upstream]]\nname = \"a\"\nroute = \"/\"\nurl = \"http://127.0.0.1:1\"\n", listeners()),
            "limits.max_header_bytes: invalid value 1073741824: expected at most 1048576",
        ),
        (
            format!("{}[upstream.judge]\ngrpc = \"yes\"\n", with_url("http://127.0.0.1:1")),
            "upstream[0].judge",
        ),
        // Every boolean key says the same about a value that is not one.
        (
            upstreams("route = \"/a/\"\nstrip_prefix = \"yes\"", "route = \"/b/\""),
            "upstream[0].strip_prefix: expected a boolean (true or false), found string \"yes\"",
        ),
        (
            format!("{}[upstream.tls]\nsystem_roots = 1\n", with_url("https://127.0.0.1:1")),
            "upstream[0].tls.system_roots: expected a boolean (true or false), found integer 1",
        ),
        (
            format!("pin_workers = \"auto\"\n{}", with_url("http://127.0.0.1:1")),
            "pin_workers: expected a boolean (true or false), found string \"auto\"",
        ),
    ] {
        let (ok, stderr) = check(&dir, "bad.toml", &config);
        assert!(!ok, "passed --check:\n{config}");
        assert!(stderr.contains(expected), "missing {expected:?} in:\n{stderr}");
    }
}

#[test]
fn a_redis_password_in_the_config_is_never_printed() {
    let dir = temp_dir("redis-password");
    let upstream = "[[upstream]]\nname = \"a\"\nroute = \"/\"\nurl = \"http://127.0.0.1:1\"\n";
    for redis in [
        "rediss:/:pw-in-config-77@127.0.0.1:6379/",
        "http://user:pw-in-config-77@127.0.0.1:6379/",
        "redis+cluster://user:pw-in-config-77@127.0.0.1:7000,127.0.0.1:notaport",
        "redis+cluster://user:pw-in-config-77@127.0.0.1:7000/3",
        "redis+sentinel://:pw-in-config-77@127.0.0.1:26379/",
        "redis+sentinel://:pw-in-config-77@127.0.0.1:26379,,127.0.0.1:1/main",
    ] {
        let config = format!("redis = \"{redis}\"\n{}{upstream}", listeners());
        let (ok, stderr) = check(&dir, "redis.toml", &config);
        assert!(!ok, "{redis} passed --check");
        assert!(stderr.contains("redis: invalid value"), "{stderr}");
        assert!(
            !stderr.contains("pw-in-config-77"),
            "the password was printed:\n{stderr}"
        );
    }
    let config = format!(
        "redis = \"redis://:pw-in-config-77@127.0.0.1:notaport/\"\n{}{upstream}",
        listeners()
    );
    let path = write(&dir, "start.toml", &config);
    let out = Command::new(harness::binary())
        .args(["proxy", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("pw-in-config-77"),
        "the password was printed:\n{stderr}"
    );
}

#[test]
fn one_server_a_cluster_and_sentinels_are_all_accepted_redis_urls() {
    let dir = temp_dir("redis-forms");
    let upstream = "[[upstream]]\nname = \"a\"\nroute = \"/\"\nurl = \"http://127.0.0.1:1\"\n";
    for redis in [
        "redis://127.0.0.1:6379/",
        "redis://user:pw@127.0.0.1:6379/2",
        "redis+cluster://127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002",
        "redis+cluster://user:pw@10.0.0.1:7000",
        "redis+sentinel://127.0.0.1:26379,127.0.0.1:26380/payments",
        "redis+sentinel://:pw@sentinel.internal/payments/1",
    ] {
        let config = format!("redis = \"{redis}\"\n{}{upstream}", listeners());
        let (ok, stderr) = check(&dir, "forms.toml", &config);
        assert!(ok, "{redis} refused:\n{stderr}");
    }
}

#[test]
fn an_upstream_mode_is_enforce_or_shadow_and_never_contradicts_its_breaker() {
    let dir = temp_dir("mode");
    let base = with_url("http://127.0.0.1:3000");
    let (ok, stderr) = check(&dir, "shadow.toml", &format!("{base}mode = \"shadow\"\n"));
    assert!(ok, "{stderr}");
    let (ok, stderr) = check(&dir, "bad.toml", &format!("{base}mode = \"dry-run\"\n"));
    assert!(!ok);
    assert!(
        stderr.contains("upstream[0].mode: invalid value \"dry-run\""),
        "{stderr}"
    );
    let (ok, stderr) = check(
        &dir,
        "both.toml",
        &format!("{base}mode = \"enforce\"\n[upstream.breaker]\nshadow = true\n"),
    );
    assert!(!ok);
    assert!(
        stderr.contains("upstream[0].mode: contradicts breaker.shadow"),
        "{stderr}"
    );
}

#[test]
fn grpc_judging_is_accepted_over_either_protocol() {
    let dir = temp_dir("grpc-judge");
    for protocol in ["", "protocol = \"http2\"\n", "protocol = \"http1\"\n"] {
        for judge in [
            "[upstream.judge]\ngrpc = true\n",
            "[upstream.judge.grpc.codes]\nNOT_FOUND = \"failure\"\n",
        ] {
            let config = format!("{}{protocol}{judge}", with_url("http://127.0.0.1:1"));
            let (ok, stderr) = check(&dir, "grpc.toml", &config);
            assert!(ok, "refused:\n{config}\n{stderr}");
        }
    }
}
