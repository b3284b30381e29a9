//! The dashboard served by the embedded service, in headless Chromium (Debian's
//! `chromium`): rendered under a prefix with every breaker's live phase, and its trip,
//! disable and reset buttons clicked in a real browser (the token asked for once).

#![allow(clippy::unwrap_used)]
#![allow(clippy::disallowed_methods)]

#[path = "../../breakerbox-cli/tests/support/cdp.rs"]
mod cdp;
mod support;

use std::time::Duration;

use breakerbox::contract::{Breaker, LocalAdmission};
use breakerbox::{CircuitBreaker, Phase};
use breakerbox_admin::{AdminService, Listed, TransitionLog};
use cdp::{card, headless, section, Browser};
use serde_json::json;
use support::{eventually, temp_dir, Served};

#[test]
fn the_dashboard_under_a_prefix_shows_every_breaker_with_its_live_phase() {
    let log = TransitionLog::new();
    let payments = CircuitBreaker::builder()
        .name("payments")
        .consecutive_failures(1)
        .listener(log.clone())
        .build()
        .unwrap();
    let search = CircuitBreaker::builder()
        .name("search")
        .listener(log.clone())
        .build()
        .unwrap();
    let served = Served::service(
        AdminService::builder()
            .breaker(payments.clone())
            .source(Listed::new(search.clone()).with_detail("route", "/search/"))
            .transitions(log)
            .prefix("/admin")
            .title("checkout service")
            // What the server around the breakers adds to its status: each key its own
            // table, whatever its shape.
            .status_section("build", || json!({"version": "1.2.3", "started_ms": 1500}))
            .status_section("notes", || {
                json!([
                    {"text": "<b>bold</b> & more", "tags": ["a", "b"]},
                    {"text": "second", "extra": 7},
                ])
            })
            .status_section("nothing_yet", || json!([]))
            .build()
            .unwrap(),
    );
    match Breaker::try_acquire_local(&payments) {
        LocalAdmission::Admitted(permit) => permit.failure(),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        served.act("/admin/breakers/search/disable", &[], "").status,
        200
    );

    let dir = temp_dir("dashboard");
    let url = format!("http://{}/admin", served.addr);
    let out = headless(&dir.join("profile-dom"), &["--dump-dom", &url]);
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(dom.contains("<h1>checkout service</h1>"), "{dom}");
    assert!(
        dom.contains("id=\"live\" class=\"ok\""),
        "the page did not reach /admin/status: {dom}"
    );
    let p = card(&dom, "payments");
    assert!(p.contains("class=\"phase open\""), "payments card: {p}");
    assert!(p.contains("trips</dt><dd>1</dd>"), "payments card: {p}");
    assert!(p.contains("consecutive_failures 1"), "the config line: {p}");
    let s = card(&dom, "search");
    assert!(s.contains("class=\"phase disabled\""), "search card: {s}");
    for act in ["trip", "disable", "reset"] {
        assert!(
            s.contains(&format!("data-act=\"{act}\"")),
            "{act} button: {s}"
        );
    }
    assert!(
        dom.contains("consecutive_failures</td>"),
        "the transitions table: {dom}"
    );
    // The added status keys, after the page's own (the document's keys come sorted).
    let build = section(&dom, "build");
    assert!(build.contains("<h3>build</h3>"), "build section: {build}");
    assert!(
        build.contains("<th>started</th><th>version</th>"),
        "one column per key, `_ms` dropped from the heading: {build}"
    );
    assert!(
        build.contains("<td>1.5 s</td><td>1.2.3</td>"),
        "a `_ms` number is shown as a duration: {build}"
    );
    let notes = section(&dom, "notes");
    assert!(
        notes.contains("<th>tags</th><th>text</th><th>extra</th>"),
        "the union of the rows' keys: {notes}"
    );
    assert!(
        notes.contains("<td>a, b</td><td>&lt;b&gt;bold&lt;/b&gt; &amp; more</td><td>–</td>"),
        "values escaped, lists joined, a missing key shown as a dash: {notes}"
    );
    assert!(
        notes.contains("<td>–</td><td>second</td><td>7</td>"),
        "the second row: {notes}"
    );
    assert!(
        !notes.contains("<b>bold"),
        "markup from a section is never rendered: {notes}"
    );
    let nothing = section(&dom, "nothing_yet");
    assert!(nothing.contains("<h3>nothing yet</h3>"), "{nothing}");
    assert!(
        nothing.contains("<td class=\"empty\">none</td>"),
        "an empty list says so: {nothing}"
    );
    assert!(
        dom.find("Recent transitions") < dom.find("data-section=\"build\""),
        "the added sections come after the page's own"
    );

    let shot = dir.join("dashboard.png");
    let out = headless(
        &dir.join("profile-shot"),
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1200,700",
            &format!("{url}/"),
        ],
    );
    assert!(out.status.success());
    let png = std::fs::read(&shot).expect("the screenshot was written");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    eprintln!("dashboard screenshot: {}", shot.display());
}

fn open(browser: &mut Browser, url: &str) {
    browser.call("Page.enable", json!({}));
    browser.call("Page.navigate", json!({ "url": url }));
    let ready = eventually(Duration::from_secs(20), || {
        browser.eval(
            "!!document.querySelector('[data-breaker=\"payments\"] button[data-act=\"trip\"]')",
        ) == json!(true)
    });
    assert!(ready, "the dashboard did not show the payments card");
}

fn click(browser: &mut Browser, act: &str) {
    browser.eval(&format!(
        "document.querySelector('[data-breaker=\"payments\"] button[data-act=\"{act}\"]').click(); true"
    ));
}

/// Waits for `phase`, failing at once with the page's dialog if it shows one.
fn wait_phase(browser: &mut Browser, breaker: &CircuitBreaker, phase: Phase) {
    let reached = eventually(Duration::from_secs(15), || {
        if let Some(alert) = browser.wait_event("Page.javascriptDialogOpening", Duration::ZERO) {
            panic!("the page showed a dialog: {}", alert["params"]["message"]);
        }
        breaker.phase() == phase
    });
    assert!(
        reached,
        "payments did not become {phase:?}: {:?}",
        breaker.phase()
    );
}

#[test]
fn the_buttons_trip_for_the_chosen_time_disable_and_reset_through_the_embedded_service() {
    let payments = CircuitBreaker::builder().name("payments").build().unwrap();
    let served = Served::service(
        AdminService::builder()
            .breaker(payments.clone())
            .prefix("/ops")
            .build()
            .unwrap(),
    );
    let mut browser = Browser::launch(&temp_dir("buttons-profile"));
    open(
        &mut browser,
        &format!("http://{}/ops/dashboard", served.addr),
    );
    browser.eval("document.getElementById('for').value = '10m'; true");
    click(&mut browser, "trip");
    wait_phase(&mut browser, &payments, Phase::ForcedOpen);
    let left = payments.snapshot().retry_after.unwrap();
    assert!(
        left > Duration::from_secs(590),
        "tripped for 10 min: {left:?}"
    );
    click(&mut browser, "disable");
    wait_phase(&mut browser, &payments, Phase::Disabled);
    click(&mut browser, "reset");
    wait_phase(&mut browser, &payments, Phase::Closed);
}

#[test]
fn with_a_token_the_buttons_ask_for_it_once_and_send_it() {
    let payments = CircuitBreaker::builder().name("payments").build().unwrap();
    let served = Served::service(
        AdminService::builder()
            .breaker(payments.clone())
            .token("s3cret")
            .build()
            .unwrap(),
    );
    let mut browser = Browser::launch(&temp_dir("buttons-token-profile"));
    open(&mut browser, &format!("http://{}/", served.addr));
    click(&mut browser, "trip");
    let dialog = browser
        .wait_event("Page.javascriptDialogOpening", Duration::from_secs(15))
        .expect("the page asked for the token");
    assert_eq!(dialog["params"]["type"], "prompt", "{dialog}");
    browser.call(
        "Page.handleJavaScriptDialog",
        json!({ "accept": true, "promptText": "s3cret" }),
    );
    wait_phase(&mut browser, &payments, Phase::ForcedOpen);
    // The token is remembered for the tab: no second prompt.
    click(&mut browser, "reset");
    wait_phase(&mut browser, &payments, Phase::Closed);
}

#[test]
fn the_shadow_button_switches_shadow_mode_and_the_card_counts_would_be_rejections() {
    let payments = CircuitBreaker::builder().name("payments").build().unwrap();
    let served = Served::service(
        AdminService::builder()
            .breaker(payments.clone())
            .build()
            .unwrap(),
    );
    let mut browser = Browser::launch(&temp_dir("shadow-profile"));
    open(&mut browser, &format!("http://{}/", served.addr));
    click(&mut browser, "trip");
    wait_phase(&mut browser, &payments, Phase::ForcedOpen);
    let shown = |browser: &mut Browser, act: &str| {
        eventually(Duration::from_secs(15), || {
            browser.eval(&format!(
                "!!document.querySelector('[data-breaker=\"payments\"] button[data-act=\"{act}\"]')"
            )) == json!(true)
        })
    };
    assert!(shown(&mut browser, "shadow"), "no shadow button");
    click(&mut browser, "shadow");
    assert!(
        eventually(Duration::from_secs(15), || payments.is_shadow()),
        "the shadow button did not switch shadow mode on"
    );
    assert!(
        payments.try_acquire().is_ok(),
        "in shadow, nothing is rejected"
    );
    let counted = eventually(Duration::from_secs(15), || {
        browser.eval("document.querySelector('[data-breaker=\"payments\"] dd.shadow').textContent")
            == json!("on, 1 would-be rejections")
    });
    assert!(counted, "the card did not show the would-be rejection");
    assert!(shown(&mut browser, "unshadow"), "no unshadow button");
    click(&mut browser, "unshadow");
    assert!(
        eventually(Duration::from_secs(15), || !payments.is_shadow()),
        "the unshadow button did not switch shadow mode off"
    );
    assert_eq!(
        payments.phase(),
        Phase::ForcedOpen,
        "shadow changed no phase"
    );
}
