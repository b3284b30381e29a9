//! The admin dashboard rendered by headless Chromium (Debian's `chromium`): its text after
//! the page's own refresh from `/status`, and a screenshot.

#![allow(clippy::disallowed_methods)]

#[path = "support/cdp.rs"]
mod cdp;
#[path = "support/proxy_harness.rs"]
mod harness;

use cdp::{card, headless as chromium, section};
use harness::{admin_post, eventually, get, listeners, temp_dir, write, ProxyProcess, Upstream};

#[test]
fn the_dashboard_shows_every_breaker_with_its_live_phase_and_a_screenshot_is_written() {
    let upstream = Upstream::start();
    upstream.answer(500, "down");
    let config = format!(
        "{}\n[[upstream]]\nname = \"payments\"\nroute = \"/payments/\"\nurl = \"{u}\"\n[upstream.breaker]\nconsecutive_failures = 2\nrecovery_timeout = \"5m\"\n\
         [[upstream]]\nname = \"inventory\"\nroute = \"/inventory/\"\nurl = \"{u}\"\n\
         [[upstream]]\nname = \"search\"\nroute = \"/search/\"\nurl = \"{u}\"\n",
        listeners(),
        u = upstream.url()
    );
    let dir = temp_dir("dashboard");
    let proxy = ProxyProcess::start(&dir, &config);
    for _ in 0..2 {
        get(proxy.addr, "/payments/charge");
    }
    assert_eq!(
        admin_post(proxy.admin, "/breakers/search/trip", &[]).status,
        200
    );

    let page = get(proxy.admin, "/");
    assert_eq!(page.status, 200);
    assert!(page
        .header("content-type")
        .unwrap()
        .starts_with("text/html"));
    assert!(
        !page.body.contains("data-breaker=\"payments\""),
        "cards come from the script, not the server"
    );
    assert!(
        !page.body.contains("src=\"http") && !page.body.contains("href=\"http"),
        "no external assets"
    );

    let url = format!("http://{}/", proxy.admin);
    let out = chromium(&dir.join("profile-dom"), &["--dump-dom", &url]);
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let payments = card(&dom, "payments");
    assert!(
        payments.contains("class=\"phase open\""),
        "payments card: {payments}"
    );
    assert!(
        payments.contains("trips</dt><dd>1</dd>"),
        "payments card: {payments}"
    );
    let inventory = card(&dom, "inventory");
    assert!(
        inventory.contains("class=\"phase closed\""),
        "inventory card: {inventory}"
    );
    let search = card(&dom, "search");
    assert!(search.contains("forced open"), "search card: {search}");
    assert!(
        dom.contains("id=\"live\" class=\"ok\""),
        "the page did not reach /status: {dom}"
    );
    assert!(
        dom.contains("consecutive_failures"),
        "the transition list is missing: {dom}"
    );

    // The page refreshes itself: a change after load shows up in a new rendering.
    assert_eq!(
        admin_post(proxy.admin, "/breakers/search/reset", &[]).status,
        200
    );
    let out = chromium(&dir.join("profile-dom2"), &["--dump-dom", &url]);
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        card(&dom, "search").contains("class=\"phase closed\""),
        "{dom}"
    );
    assert_eq!(
        admin_post(proxy.admin, "/breakers/search/trip", &[]).status,
        200
    );

    let shot = dir.join("dashboard.png");
    let _ = std::fs::remove_file(&shot);
    let out = chromium(
        &dir.join("profile-shot"),
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1200,800",
            &url,
        ],
    );
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let png = std::fs::read(&shot).expect("the screenshot was written");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    assert!(
        png.len() > 10_000,
        "a suspiciously small screenshot: {} bytes",
        png.len()
    );
    eprintln!("dashboard screenshot: {}", shot.display());
}

/// An upstream with an active health check shows it on its card: what it asks, how
/// often, its last answer and the requests it held back; one without shows none.
#[test]
fn the_dashboard_shows_an_upstreams_health_check_and_its_last_answer() {
    let upstream = Upstream::start();
    upstream.answer(500, "down");
    let config = format!(
        "{}\n[[upstream]]\nname = \"payments\"\nroute = \"/payments/\"\nurl = \"{u}\"\n\
         health = {{ path = \"/healthz\", interval = \"500ms\", timeout = \"400ms\" }}\n\
         [upstream.breaker]\nconsecutive_failures = 1\nrecovery_timeout = \"300ms\"\n\
         jitter = 0.0\n\
         [[upstream]]\nname = \"search\"\nroute = \"/search/\"\nurl = \"{u}\"\n",
        listeners(),
        u = upstream.url()
    );
    let dir = temp_dir("dashboard-health");
    let proxy = ProxyProcess::start(&dir, &config);
    get(proxy.addr, "/payments/charge");
    assert_eq!(proxy.phase("payments"), "open");
    // Past the open phase the checker probes /healthz (rule 24), which fails too.
    assert!(
        harness::eventually(std::time::Duration::from_secs(10), || {
            !proxy.status()["breakers"]["payments"]["health"]["last"].is_null()
        }),
        "a health check ran: {}",
        proxy.status()
    );
    get(proxy.addr, "/payments/charge");

    let url = format!("http://{}/", proxy.admin);
    let out = chromium(&dir.join("profile-dom"), &["--dump-dom", &url]);
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dom = String::from_utf8_lossy(&out.stdout);
    let payments = card(&dom, "payments");
    assert!(
        payments.contains(
            "<dt>health check</dt><dd class=\"health\">GET /healthz every 500 ms · last failure"
        ),
        "{payments}"
    );
    assert!(payments.contains("requests held back"), "{payments}");
    // (The last card runs on to the page's end, its script included.)
    assert!(
        !card(&dom, "search").contains("class=\"health\">GET"),
        "no check, no row"
    );
}

/// After a reload removed an upstream that still has a request in flight, the dashboard
/// shows it draining (which upstreams, the config generation that replaced them); once
/// the request ends, the section says none are left.
#[test]
fn the_dashboard_shows_the_upstreams_a_reload_left_draining() {
    let fast = Upstream::start();
    let slow = Upstream::start();
    slow.answer(200, "slow done");
    slow.delay(std::time::Duration::from_secs(4));
    let route = |name: &str, up: &Upstream| {
        format!(
            "[[upstream]]\nname = \"{name}\"\nroute = \"/{name}/\"\nurl = \"{}\"\n",
            up.url()
        )
    };
    let dir = temp_dir("dashboard-draining");
    let proxy = ProxyProcess::start(
        &dir,
        &format!(
            "{}\n{}{}",
            listeners(),
            route("fast", &fast),
            route("slow", &slow)
        ),
    );
    let addr = proxy.addr;
    let in_flight = std::thread::spawn(move || get(addr, "/slow/x"));
    assert!(
        eventually(std::time::Duration::from_secs(5), || slow.heads() == 1),
        "the slow request never reached its upstream"
    );
    write(
        &dir,
        "proxy.toml",
        &format!("{}\n{}", listeners(), route("fast", &fast)),
    );
    let reload = admin_post(proxy.admin, "/reload", &[]);
    assert_eq!(reload.status, 200, "{reload:?}");

    let url = format!("http://{}/", proxy.admin);
    let out = chromium(&dir.join("profile-draining"), &["--dump-dom", &url]);
    let dom = String::from_utf8_lossy(&out.stdout);
    let draining = section(&dom, "draining");
    assert!(
        draining.contains("<th>for</th><th>replaced by generation</th><th>upstreams</th>"),
        "draining section: {draining}"
    );
    assert!(
        draining.contains("<td>1</td><td>slow</td>"),
        "the slow upstream drains, replaced by generation 1: {draining}"
    );

    let finished = in_flight.join().unwrap();
    assert_eq!(finished.status, 200, "{finished:?}");
    assert!(
        eventually(std::time::Duration::from_secs(5), || proxy.status()
            ["draining"]
            == serde_json::json!([])),
        "{}",
        proxy.status()
    );
    let out = chromium(&dir.join("profile-drained"), &["--dump-dom", &url]);
    let dom = String::from_utf8_lossy(&out.stdout);
    let draining = section(&dom, "draining");
    assert!(
        draining.contains("<td class=\"empty\">none</td>") && !draining.contains("slow"),
        "nothing left draining: {draining}"
    );
}
