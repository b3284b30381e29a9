//! Caller groups: each group has nodes (each with its breaker, or none) that send the same
//! steady traffic to the upstream; every call's fate is counted.

use breakerbox::TokioClock;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use breakerbox::contract::BreakerPermit;
use breakerbox::model::TransitionReason;
use breakerbox::{Phase, RejectReason, Verdict};
use breakerbox_http::{AfterHead, HttpJudge, Judgement, TransportError};
use bytes::Bytes;
use http::{Request, Uri};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use tokio::task::JoinSet;
use tokio::time::{Instant, MissedTickBehavior};

use super::node::{self, NodeBreaker};
use super::upstream::GROUP_HEADER;

/// The HTTP client every caller shares.
pub type HttpClient = Client<HttpConnector, Empty<Bytes>>;

/// How the calls of a stretch of time went.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counts {
    /// Calls offered (sent or rejected), counted when they start, like `sent`,
    /// `rejected` and `probes`; outcomes and waiting are counted when calls end.
    pub offered: u64,
    /// Calls that went to the upstream.
    pub sent: u64,
    /// Calls the breaker rejected without calling.
    pub rejected: u64,
    /// Rule 23: of those, the calls the ramp after a recovery turned away (closed).
    pub ramp_rejected: u64,
    /// Calls judged successful.
    pub ok: u64,
    /// Failures: an error status.
    pub status: u64,
    /// Failures: no answer within the callers' timeout.
    pub timeout: u64,
    /// Failures: an answer slower than the judge allows.
    pub slow: u64,
    /// Failures: the connection failed.
    pub transport: u64,
    /// Half-open probes among the calls sent.
    pub probes: u64,
    /// Time callers spent waiting for an answer or a rejection.
    pub waited: Duration,
}

impl Counts {
    /// Every failure of the calls sent.
    pub fn failed(&self) -> u64 {
        self.status + self.timeout + self.slow + self.transport
    }

    fn add_failure(&mut self, judgement: &Judgement) {
        let reason = judgement.reason.as_ref();
        if reason.starts_with("slow") {
            self.slow += 1;
        } else if reason == TransportError::Timeout.reason() {
            self.timeout += 1;
        } else if reason.starts_with("transport") {
            self.transport += 1;
        } else {
            self.status += 1;
        }
    }
}

/// A phase change of a group's breaker, seen by one node.
#[derive(Copy, Clone, Debug)]
pub struct Change {
    /// When.
    pub at: Instant,
    /// Which node saw it.
    pub node: usize,
    /// The new phase.
    pub to: Phase,
    /// Why.
    pub reason: TransitionReason,
    /// The new generation (shared breakers report each change once per generation).
    pub generation: u64,
}

/// A group of nodes calling the upstream the same way.
pub struct Group {
    /// Its title in the view.
    pub name: String,
    /// Its index (sent to the upstream in a header).
    pub index: usize,
    /// Whether its nodes share one breaker (Redis).
    pub shared: bool,
    /// Its nodes.
    pub nodes: Vec<NodeBreaker>,
    /// This second's counts and the totals.
    pub counts: Mutex<(Counts, Counts)>,
    /// Phase changes of its breakers.
    pub changes: Arc<Mutex<Vec<Change>>>,
}

impl Group {
    /// A group named `name` of `nodes`, recording phase changes into `changes`.
    pub fn new(
        name: impl Into<String>,
        index: usize,
        shared: bool,
        nodes: Vec<NodeBreaker>,
        changes: Arc<Mutex<Vec<Change>>>,
    ) -> Group {
        Group {
            name: name.into(),
            index,
            shared,
            nodes,
            counts: Mutex::new((Counts::default(), Counts::default())),
            changes,
        }
    }

    /// Whether the group calls through breakers.
    pub fn has_breaker(&self) -> bool {
        self.nodes.iter().any(Option::is_some)
    }

    fn count(&self, update: impl Fn(&mut Counts)) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        update(&mut counts.0);
        update(&mut counts.1);
    }

    /// This second's counts, starting the next second.
    pub fn take_second(&self) -> Counts {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        std::mem::take(&mut counts.0)
    }

    /// The counts since the start.
    pub fn total(&self) -> Counts {
        self.counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .1
            .clone()
    }

    /// The phases the nodes see now: `closed`, or `open 2/half 1` when they differ.
    pub fn phase_text(&self) -> String {
        let mut seen: Vec<(Phase, usize)> = Vec::new();
        for phase in self.nodes.iter().filter_map(node::phase) {
            match seen.iter_mut().find(|(p, _)| *p == phase) {
                Some((_, n)) => *n += 1,
                None => seen.push((phase, 1)),
            }
        }
        match seen.as_slice() {
            [] => "-".to_owned(),
            [(phase, _)] => phase.as_str().to_owned(),
            _ => seen
                .iter()
                .map(|(p, n)| {
                    let short = match p {
                        Phase::HalfOpen => "half",
                        Phase::ForcedOpen => "forced",
                        other => other.as_str(),
                    };
                    format!("{short} {n}")
                })
                .collect::<Vec<_>>()
                .join("/"),
        }
    }

    /// Phase changes, one per generation for a shared breaker, in time order.
    pub fn changes_by_node(&self) -> Vec<Vec<Change>> {
        let mut all = self
            .changes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        all.sort_by_key(|c| c.at);
        if self.shared {
            let mut seen = std::collections::HashSet::new();
            all.retain(|c| seen.insert(c.generation));
            return vec![all];
        }
        let mut by_node = vec![Vec::new(); self.nodes.len()];
        for change in all {
            if let Some(list) = by_node.get_mut(change.node) {
                list.push(change);
            }
        }
        by_node
    }
}

/// What every caller needs.
#[derive(Clone)]
pub struct Callers {
    /// The shared client.
    pub client: HttpClient,
    /// The upstream's URL.
    pub uri: Uri,
    /// The judge of every answer.
    pub judge: Arc<HttpJudge>,
    /// How long a caller waits for an answer.
    pub timeout: Duration,
}

impl Callers {
    /// Sends `rate` calls per second from `node` of `group` until `until`, each in its own
    /// task in `calls`, on a fixed schedule starting at `start` (the same for every node).
    pub async fn drive(
        &self,
        group: Arc<Group>,
        node: usize,
        rate: u32,
        start: Instant,
        until: Instant,
        calls: Arc<Mutex<JoinSet<()>>>,
    ) {
        let period = Duration::from_secs(1) / rate.max(1);
        let mut ticks = tokio::time::interval_at(start, period);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Burst);
        loop {
            let tick = ticks.tick().await;
            if tick >= until {
                return;
            }
            let callers = self.clone();
            let group = group.clone();
            let mut set = calls.lock().unwrap_or_else(PoisonError::into_inner);
            set.spawn(async move { callers.call(&group, node).await });
            while set.try_join_next().is_some() {}
        }
    }

    async fn call(&self, group: &Group, node: usize) {
        let started = TokioClock::new().instant();
        let Some(breaker) = group.nodes.get(node) else {
            return;
        };
        let permit = match node::acquire(breaker).await {
            Ok(permit) => permit,
            Err(open) => {
                let waited = started.elapsed();
                let ramp = open.reason() == RejectReason::Ramp;
                group.count(|c| {
                    c.offered += 1;
                    c.rejected += 1;
                    c.ramp_rejected += u64::from(ramp);
                    c.waited += waited;
                });
                return;
            }
        };
        let probe = node::is_probe(&permit);
        group.count(|c| {
            c.offered += 1;
            c.sent += 1;
            c.probes += u64::from(probe);
        });
        let sent = TokioClock::new().instant();
        let request = Request::get(self.uri.clone())
            .header(GROUP_HEADER, group.index)
            .body(Empty::<Bytes>::new());
        let outcome = match request {
            Ok(request) => {
                tokio::time::timeout(self.timeout, async {
                    let response = self.client.request(request).await.map_err(|_| ())?;
                    let head = sent.elapsed();
                    let (parts, body) = response.into_parts();
                    let body = body.collect().await.map(|b| b.to_bytes());
                    Ok::<_, ()>((parts, head, body))
                })
                .await
            }
            Err(_) => Ok(Err(())),
        };
        let latency = sent.elapsed();
        // One judging step for every transport: the same exchange judge as the proxy,
        // the tower layer and the reqwest middleware.
        let mut exchange = self.judge.exchange(probe);
        let judgement = match outcome {
            Err(_) => exchange.on_transport_error(TransportError::Timeout, latency),
            Ok(Err(())) => exchange.on_transport_error(TransportError::Other, latency),
            Ok(Ok((parts, head, body))) => {
                match exchange.on_head(parts.status, &parts.headers, head) {
                    AfterHead::Judged(judgement) => judgement,
                    AfterHead::ReadBody { cap } => match body {
                        Ok(body) => exchange.on_body((body.len() <= cap).then_some(&body[..])),
                        Err(_) => exchange.on_body_error(TransportError::Other),
                    },
                    // The demo's upstreams speak HTTP/1.1 without trailers.
                    AfterHead::AwaitTrailers => match body {
                        Ok(_) => exchange.on_trailers(None),
                        Err(_) => exchange.on_body_error(TransportError::Other),
                    },
                }
            }
        };
        let verdict = judgement.verdict;
        if let Some(permit) = permit {
            permit
                .record_with_latency(verdict, exchange.latency())
                .await;
        }
        let waited = started.elapsed();
        group.count(|c| {
            c.waited += waited;
            match verdict {
                Verdict::Failure => c.add_failure(&judgement),
                _ => c.ok += 1,
            }
        });
    }
}
