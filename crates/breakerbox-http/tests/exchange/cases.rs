//! The one table of HTTP exchanges and their judgements. The same file is included (with
//! `#[path]`) by every runner: the sans-IO judge (`breakerbox-http/tests/exchange_table.rs`),
//! tower (`breakerbox-tower/tests/exchange_table.rs`), reqwest
//! (`breakerbox-reqwest/tests/exchange_table.rs`) and the proxy binary
//! (`breakerbox-cli/tests/proxy_exchange_table.rs`). A case that one of them judges
//! differently fails there.

#![allow(dead_code)] // each runner uses what it needs

use std::time::Duration;

use breakerbox::Verdict;
use breakerbox_http::{HttpJudge, HttpJudgeConfig};

/// What the upstream does with the request.
#[derive(Copy, Clone, Debug)]
pub enum Upstream {
    /// Answers after `delay_ms`, with `headers` and the whole `body` (with its length).
    Answers {
        status: u16,
        headers: &'static [(&'static str, &'static str)],
        body: &'static str,
        delay_ms: u64,
    },
    /// Sends the head at once, then the body one byte every `byte_every_ms`.
    TricklesBody {
        status: u16,
        body: &'static str,
        byte_every_ms: u64,
    },
    /// Declares the whole body, sends only its first `sent` bytes, then closes.
    CutsBody {
        status: u16,
        body: &'static str,
        sent: usize,
    },
    /// Reads the request and closes the connection without answering.
    HangsUp,
    /// Nothing listens: the connection is refused.
    Refuses,
}

/// One exchange and how every adapter must judge it.
#[derive(Copy, Clone, Debug)]
pub struct Case {
    /// What the case shows, as a sentence.
    pub name: &'static str,
    /// The judge: the lines of a judge table in TOML (what the proxy's
    /// `[upstream.judge]` holds).
    pub judge: &'static str,
    /// Whether the call is a half-open probe (the breaker is tripped and has recovered).
    pub probe: bool,
    /// What the upstream does.
    pub upstream: Upstream,
    /// The expected verdict.
    pub verdict: Verdict,
    /// The expected reason; a `*` matches any text (measured latencies vary).
    pub reason: &'static str,
    /// The expected `Retry-After` hint, in seconds.
    pub retry_after: Option<u64>,
}

impl Case {
    /// The judge, parsed from [`Case::judge`].
    pub fn http_judge(&self) -> HttpJudge {
        let config: HttpJudgeConfig = match toml::from_str(self.judge) {
            Ok(config) => config,
            Err(error) => panic!("{}: bad judge: {error}", self.name),
        };
        match HttpJudge::from_config(config) {
            Ok(judge) => judge,
            Err(error) => panic!("{}: bad judge: {error}", self.name),
        }
    }

    /// Whether `reason` is the expected one.
    pub fn reason_matches(&self, reason: &str) -> bool {
        matches_pattern(self.reason, reason)
    }

    /// Panics, naming the case and the adapter, unless `(verdict, reason, retry_after)`
    /// is the expected judgement.
    pub fn check(
        &self,
        adapter: &str,
        verdict: Verdict,
        reason: &str,
        retry_after: Option<Duration>,
    ) {
        let expected = (
            self.verdict,
            self.reason,
            self.retry_after.map(Duration::from_secs),
        );
        assert!(
            verdict == self.verdict
                && self.reason_matches(reason)
                && retry_after == self.retry_after.map(Duration::from_secs),
            "{adapter}: {}: judged ({verdict:?}, {reason:?}, {retry_after:?}), expected {expected:?}",
            self.name,
        );
    }
}

/// `pattern` with each `*` matching any text, against `text`.
fn matches_pattern(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

const BUSINESS: &str =
    "business = { pointers = [\"/code\"], failure_codes = [\"E1\"], success_codes = [\"OK\"] }";
const BUSINESS_SMALL_CAP: &str = "body_cap = 16\nbusiness = { pointers = [\"/code\"], failure_codes = [\"E1\"], success_codes = [\"OK\"] }";
const BUSINESS_SLOW: &str = "slow_threshold = \"300ms\"\nbusiness = { pointers = [\"/code\"], failure_codes = [\"E1\"], success_codes = [\"OK\"] }";

/// The table.
pub const CASES: &[Case] = &[
    Case {
        name: "a 200 succeeds",
        judge: "",
        probe: false,
        upstream: Upstream::Answers {
            status: 200,
            headers: &[],
            body: "ok",
            delay_ms: 0,
        },
        verdict: Verdict::Success,
        reason: "status 200",
        retry_after: None,
    },
    Case {
        name: "a 503 fails",
        judge: "",
        probe: false,
        upstream: Upstream::Answers {
            status: 503,
            headers: &[],
            body: "down",
            delay_ms: 0,
        },
        verdict: Verdict::Failure,
        reason: "status 503",
        retry_after: None,
    },
    Case {
        name: "a 404 is ignored by default",
        judge: "",
        probe: false,
        upstream: Upstream::Answers {
            status: 404,
            headers: &[],
            body: "no such thing",
            delay_ms: 0,
        },
        verdict: Verdict::Ignore,
        reason: "status 404",
        retry_after: None,
    },
    Case {
        name: "a 404 fails when client errors are failures",
        judge: "client_errors = \"failure\"",
        probe: false,
        upstream: Upstream::Answers {
            status: 404,
            headers: &[],
            body: "no such thing",
            delay_ms: 0,
        },
        verdict: Verdict::Failure,
        reason: "status 404",
        retry_after: None,
    },
    Case {
        name: "a 429 fails and its Retry-After is the hint when honoured",
        judge: "honor_retry_after = true",
        probe: false,
        upstream: Upstream::Answers {
            status: 429,
            headers: &[("retry-after", "7")],
            body: "slow down",
            delay_ms: 0,
        },
        verdict: Verdict::Failure,
        reason: "status 429",
        retry_after: Some(7),
    },
    Case {
        name: "a Retry-After is no hint when not honoured",
        judge: "",
        probe: false,
        upstream: Upstream::Answers {
            status: 503,
            headers: &[("retry-after", "7")],
            body: "down",
            delay_ms: 0,
        },
        verdict: Verdict::Failure,
        reason: "status 503",
        retry_after: None,
    },
    Case {
        name: "a business failure code in a 200 body fails",
        judge: BUSINESS,
        probe: false,
        upstream: Upstream::Answers {
            status: 200,
            headers: &[],
            body: "{\"code\":\"E1\"}",
            delay_ms: 0,
        },
        verdict: Verdict::Failure,
        reason: "business code E1",
        retry_after: None,
    },
    Case {
        name: "a business success code succeeds with its reason",
        judge: BUSINESS,
        probe: false,
        upstream: Upstream::Answers {
            status: 200,
            headers: &[],
            body: "{\"code\":\"OK\"}",
            delay_ms: 0,
        },
        verdict: Verdict::Success,
        reason: "business code OK",
        retry_after: None,
    },
    Case {
        name: "a body that is not JSON is judged by its head",
        judge: BUSINESS,
        probe: false,
        upstream: Upstream::Answers {
            status: 200,
            headers: &[],
            body: "plain text",
            delay_ms: 0,
        },
        verdict: Verdict::Success,
        reason: "status 200",
        retry_after: None,
    },
    Case {
        name: "a body bigger than the cap is judged by its head",
        judge: BUSINESS_SMALL_CAP,
        probe: false,
        upstream: Upstream::Answers {
            status: 200,
            headers: &[],
            body: "{\"code\":\"E1\",\"padding\":\"xxxxxxxxxxxxxxxx\"}",
            delay_ms: 0,
        },
        verdict: Verdict::Success,
        reason: "status 200",
        retry_after: None,
    },
    Case {
        name: "a 500 body is not read for codes listed for 2xx",
        judge: BUSINESS,
        probe: false,
        upstream: Upstream::Answers {
            status: 500,
            headers: &[],
            body: "{\"code\":\"OK\"}",
            delay_ms: 0,
        },
        verdict: Verdict::Failure,
        reason: "status 500",
        retry_after: None,
    },
    Case {
        name: "a 200 slower than the threshold fails",
        judge: "slow_threshold = \"100ms\"",
        probe: false,
        upstream: Upstream::Answers {
            status: 200,
            headers: &[],
            body: "ok",
            delay_ms: 300,
        },
        verdict: Verdict::Failure,
        reason: "slow * > 100ms",
        retry_after: None,
    },
    Case {
        name: "a slow 404 stays ignored",
        judge: "slow_threshold = \"100ms\"",
        probe: false,
        upstream: Upstream::Answers {
            status: 404,
            headers: &[],
            body: "no such thing",
            delay_ms: 300,
        },
        verdict: Verdict::Ignore,
        reason: "status 404",
        retry_after: None,
    },
    Case {
        name: "a normal call is held to the normal threshold",
        judge: "slow_threshold = \"5s\"\nprobe_slow_threshold = \"100ms\"",
        probe: false,
        upstream: Upstream::Answers {
            status: 200,
            headers: &[],
            body: "ok",
            delay_ms: 300,
        },
        verdict: Verdict::Success,
        reason: "status 200",
        retry_after: None,
    },
    Case {
        name: "a half-open probe is held to the probe threshold",
        judge: "slow_threshold = \"5s\"\nprobe_slow_threshold = \"100ms\"",
        probe: true,
        upstream: Upstream::Answers {
            status: 200,
            headers: &[],
            body: "ok",
            delay_ms: 300,
        },
        verdict: Verdict::Failure,
        reason: "slow * > 100ms",
        retry_after: None,
    },
    Case {
        name: "latency runs to the head: a slow body read for business codes does not count",
        judge: BUSINESS_SLOW,
        probe: false,
        upstream: Upstream::TricklesBody {
            status: 200,
            body: "{\"code\":\"OK\"}",
            byte_every_ms: 50,
        },
        verdict: Verdict::Success,
        reason: "business code OK",
        retry_after: None,
    },
    Case {
        name: "a body cut short while read for business codes fails",
        judge: BUSINESS,
        probe: false,
        upstream: Upstream::CutsBody {
            status: 200,
            body: "{\"code\":\"OK\",\"more\":\"to come\"}",
            sent: 5,
        },
        verdict: Verdict::Failure,
        reason: "transport: body read failed",
        retry_after: None,
    },
    Case {
        name: "a refused connection fails",
        judge: "",
        probe: false,
        upstream: Upstream::Refuses,
        verdict: Verdict::Failure,
        reason: "transport: connect failed",
        retry_after: None,
    },
    Case {
        name: "a connection closed without a response fails",
        judge: "",
        probe: false,
        upstream: Upstream::HangsUp,
        verdict: Verdict::Failure,
        reason: "transport: no response",
        retry_after: None,
    },
];

#[test]
fn reason_patterns_match_as_documented() {
    assert!(matches_pattern("status 200", "status 200"));
    assert!(!matches_pattern("status 200", "status 2000"));
    assert!(matches_pattern("slow * > 100ms", "slow 301.2ms > 100ms"));
    assert!(!matches_pattern("slow * > 100ms", "slow 301.2ms > 1s"));
    assert!(!matches_pattern("slow * > 100ms", "status 200"));
}
