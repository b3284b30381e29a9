//! The admin dashboard rendered by headless Chromium (Debian's `chromium`): its text after
//! the page's own refresh from `/status`, and a screenshot.

#![allow(clippy::disallowed_methods)]

#[path = "support/cdp.rs"]
mod cdp;
#[path = "support/proxy_harness.rs"]
mod harness;

use cdp::{card, headless as chromium};
use harness::{admin_post, get, listeners, temp_dir, ProxyProcess, Upstream};

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
