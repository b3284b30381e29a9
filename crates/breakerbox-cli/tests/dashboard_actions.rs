//! The dashboard's trip and reset buttons, clicked in headless Chromium (Debian's
//! `chromium`): they send what the admin listener requires, the token included once the
//! listener asks for it.

#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)]

#[path = "support/cdp.rs"]
mod cdp;
#[path = "support/proxy_harness.rs"]
mod harness;

use std::time::Duration;

use cdp::Browser;
use harness::{eventually, temp_dir, ProxyProcess, Upstream};
use serde_json::json;

fn start(name: &str, admin: &str) -> (Upstream, ProxyProcess) {
    let upstream = Upstream::start();
    let config = format!(
        "listen = \"127.0.0.1:0\"\n[admin]\nlisten = \"127.0.0.1:0\"\n{admin}\n\
         [[upstream]]\nname = \"payments\"\nroute = \"/\"\nurl = \"{}\"\n",
        upstream.url()
    );
    let proxy = ProxyProcess::start(&temp_dir(name), &config);
    (upstream, proxy)
}

fn open_dashboard(browser: &mut Browser, proxy: &ProxyProcess) {
    browser.call("Page.enable", json!({}));
    browser.call(
        "Page.navigate",
        json!({ "url": format!("http://{}/", proxy.admin) }),
    );
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

/// Waits for `phase`, failing at once with the page's alert if it shows one.
fn wait_phase(browser: &mut Browser, proxy: &ProxyProcess, phase: &str) {
    let reached = eventually(Duration::from_secs(15), || {
        if let Some(alert) = browser.wait_event("Page.javascriptDialogOpening", Duration::ZERO) {
            panic!("the page showed a dialog: {}", alert["params"]["message"]);
        }
        proxy.phase("payments") == phase
    });
    assert!(
        reached,
        "payments did not become {phase}: {}",
        proxy.phase("payments")
    );
}

#[test]
fn without_a_token_the_buttons_trip_and_reset_the_breaker() {
    let (_upstream, proxy) = start("dashboard-buttons", "");
    let mut browser = Browser::launch(&temp_dir("dashboard-buttons-profile"));
    open_dashboard(&mut browser, &proxy);
    click(&mut browser, "trip");
    wait_phase(&mut browser, &proxy, "forced_open");
    click(&mut browser, "reset");
    wait_phase(&mut browser, &proxy, "closed");
}

#[test]
fn with_a_token_the_buttons_ask_for_it_once_and_send_it() {
    let (_upstream, proxy) = start("dashboard-buttons-token", "token = \"s3cret\"");
    let mut browser = Browser::launch(&temp_dir("dashboard-buttons-token-profile"));
    open_dashboard(&mut browser, &proxy);
    click(&mut browser, "trip");
    let dialog = browser
        .wait_event("Page.javascriptDialogOpening", Duration::from_secs(15))
        .expect("the page asked for the token");
    assert_eq!(dialog["params"]["type"], "prompt", "{dialog}");
    browser.call(
        "Page.handleJavaScriptDialog",
        json!({ "accept": true, "promptText": "s3cret" }),
    );
    wait_phase(&mut browser, &proxy, "forced_open");
    // The token is remembered for the tab: no second prompt.
    click(&mut browser, "reset");
    wait_phase(&mut browser, &proxy, "closed");
}
