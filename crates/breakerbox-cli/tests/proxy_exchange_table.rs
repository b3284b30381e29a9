//! The exchange table (`breakerbox-http/tests/exchange/cases.rs`) through the real
//! `breakerbox proxy` binary: one upstream per case (a scripted loopback server, its own
//! route, breaker and judge), the verdict and reason read back from `/status`.

#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)]

#[path = "../../breakerbox-http/tests/exchange/cases.rs"]
mod cases;
#[path = "support/proxy_harness.rs"]
mod harness;

use std::fmt::Write as _;
use std::net::TcpListener;
use std::thread;
use std::time::Duration;

use breakerbox::Verdict;
use cases::{Case, Upstream, CASES};
use harness::{eventually, get, listeners, temp_dir, Fault, ProxyProcess};

/// How long a probe case's breaker stays open after its priming failure.
const RECOVERY: Duration = Duration::from_millis(200);

/// A scripted upstream for `case`, or none for a refused connection.
fn upstream_for(case: &Case) -> Option<harness::Upstream> {
    let upstream = match case.upstream {
        Upstream::Refuses => return None,
        _ => harness::Upstream::start(),
    };
    play(&upstream, case);
    Some(upstream)
}

/// Scripts `upstream` to do what `case` says.
fn play(upstream: &harness::Upstream, case: &Case) {
    match case.upstream {
        Upstream::Answers {
            status,
            headers,
            body,
            delay_ms,
        } => {
            upstream.answer(status, body);
            upstream.headers(headers);
            upstream.delay(Duration::from_millis(delay_ms));
            upstream.fault(Fault::None);
        }
        Upstream::TricklesBody {
            status,
            body,
            byte_every_ms,
        } => {
            upstream.answer(status, body);
            upstream.fault(Fault::Trickle(Duration::from_millis(byte_every_ms)));
        }
        Upstream::CutsBody { status, body, sent } => {
            upstream.answer(status, body);
            upstream.fault(Fault::Truncate(sent));
        }
        Upstream::HangsUp => upstream.fault(Fault::DropAll),
        Upstream::Refuses => {}
    }
}

/// A loopback address nothing listens on.
fn closed_port() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}")
}

fn calls(status: &serde_json::Value, name: &str) -> u64 {
    let calls = &status["breakers"][name]["calls"];
    ["success", "failure", "ignore"]
        .iter()
        .map(|v| calls[*v].as_u64().unwrap())
        .sum()
}

#[test]
fn every_case_of_the_table_is_judged_as_the_table_says_by_the_proxy() {
    let upstreams: Vec<Option<harness::Upstream>> = CASES.iter().map(upstream_for).collect();
    let mut config = listeners().to_string();
    for (i, (case, upstream)) in CASES.iter().zip(&upstreams).enumerate() {
        let url = upstream.as_ref().map_or_else(closed_port, |u| u.url());
        let breaker = if case.probe {
            format!(
                "consecutive_failures = 1\nrecovery_timeout = \"{}ms\"\nmax_probes = 1\nrequired_successes = 1\nhalf_open_timeout = \"60s\"",
                RECOVERY.as_millis()
            )
        } else {
            "consecutive_failures = 1000".to_string()
        };
        write!(
            config,
            "[[upstream]]\nname = \"case{i}\"\nroute = \"/case{i}/\"\nurl = \"{url}\"\n\
             [upstream.breaker]\n{breaker}\n[upstream.judge]\n{}\n",
            case.judge
        )
        .unwrap();
    }
    let dir = temp_dir("exchange-table");
    let proxy = ProxyProcess::start(&dir, &config);

    for (i, (case, upstream)) in CASES.iter().zip(&upstreams).enumerate() {
        let name = format!("case{i}");
        let path = format!("/case{i}/x");
        if case.probe {
            // Trip the breaker with one failure, then wait until it lets a probe through.
            if let Some(upstream) = upstream {
                upstream.answer(500, "down");
                upstream.delay(Duration::ZERO);
            }
            get(proxy.addr, &path);
            assert_eq!(proxy.phase(&name), "open", "{}", case.name);
            if let Some(upstream) = upstream {
                play(upstream, case);
            }
            thread::sleep(RECOVERY + Duration::from_millis(50));
        }
        let before = calls(&proxy.status(), &name);
        let _ = harness::try_request(proxy.addr, "GET", &path, &[], b"");
        // The exchange is recorded when the body ends, which may be just after the client
        // has read it.
        let judged = eventually(Duration::from_secs(5), || {
            calls(&proxy.status(), &name) == before + 1
        });
        assert!(judged, "proxy: {}: the call was not judged", case.name);
        let status = proxy.status();
        let breaker = &status["breakers"][name.as_str()];
        let last = &breaker["last_judgement"];
        let verdict = match last["verdict"].as_str() {
            Some("success") => Verdict::Success,
            Some("failure") => Verdict::Failure,
            Some("ignore") => Verdict::Ignore,
            other => panic!("proxy: {}: no verdict in {last}: {other:?}", case.name),
        };
        let reason = last["reason"].as_str().unwrap_or_default();
        let retry_after = last["retry_after_ms"].as_u64().map(Duration::from_millis);
        case.check("proxy", verdict, reason, retry_after);
        if case.probe {
            let phase = match case.verdict {
                Verdict::Success => "closed",
                Verdict::Failure => "open",
                _ => "half_open",
            };
            assert_eq!(
                breaker["phase"], phase,
                "proxy: {}: the probe was recorded otherwise",
                case.name
            );
        }
    }
}
