//! `/metrics`: the proxy's counters through the `metrics` facade, written by
//! `metrics-exporter-prometheus` (a recorder of the proxy's own, not the process-wide one,
//! so it holds exactly what the proxy counts). Names and labels are the proxy's since its
//! first release; the library's metrics (`breakerbox::metrics`) use the same names.

use metrics::{counter, describe_counter, describe_gauge, gauge};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle, PrometheusRecorder};

use breakerbox::Phase;

use super::health::{HealthStats, RESULTS};
use super::metrics::{
    Recorder, UpstreamError, CLIENT_FAULTS, REJECT_REASONS, TRIP_REASONS, VERDICTS,
};

/// The proxy's own recorder and the handle that renders it.
pub struct Exposition {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
}

impl Exposition {
    /// An empty exposition.
    pub fn new() -> Exposition {
        let recorder = PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        Exposition { recorder, handle }
    }

    /// The text exposition of every breaker `(name, phase as seen here)`: the counters are
    /// brought up to the recorder's values, then the exporter writes them.
    pub fn render(
        &self,
        recorder: &Recorder,
        breakers: &[(&str, Phase)],
        reloads: [u64; 2],
    ) -> String {
        metrics::with_local_recorder(&self.recorder, || {
            describe();
            for (result, n) in ["ok", "error"].into_iter().zip(reloads) {
                counter!("breakerbox_reloads_total", "result" => result).absolute(n);
            }
            for (name, phase) in breakers {
                let breaker = name.to_string();
                for p in Phase::ALL {
                    gauge!("breakerbox_state", "breaker" => breaker.clone(), "phase" => p.as_str())
                        .set(f64::from(u8::from(p == *phase)));
                }
                let Some(s) = recorder.stats(name) else {
                    continue;
                };
                for v in VERDICTS {
                    counter!(
                        "breakerbox_calls_total",
                        "breaker" => breaker.clone(),
                        "verdict" => v.as_str()
                    )
                    .absolute(s.calls(v));
                }
                for reason in REJECT_REASONS {
                    counter!(
                        "breakerbox_rejections_total",
                        "breaker" => breaker.clone(),
                        "reason" => reason.as_str()
                    )
                    .absolute(s.rejections_for(reason));
                }
                health(&breaker, &s.health);
                for ((from, to), n) in s.transitions() {
                    counter!(
                        "breakerbox_transitions_total",
                        "breaker" => breaker.clone(),
                        "from" => from,
                        "to" => to
                    )
                    .absolute(n);
                }
                counter!("breakerbox_stale_results_total", "breaker" => breaker.clone())
                    .absolute(s.stale());
                for reason in TRIP_REASONS {
                    let n = s.local_opens(reason);
                    if n > 0 {
                        counter!(
                            "breakerbox_local_opens_total",
                            "breaker" => breaker.clone(),
                            "reason" => reason.as_str()
                        )
                        .absolute(n);
                    }
                }
                counter!("breakerbox_shadow_rejections_total", "breaker" => breaker.clone())
                    .absolute(s.shadow_rejections());
                counter!("breakerbox_overloaded_total", "breaker" => breaker.clone())
                    .absolute(s.overloads());
                for kind in UpstreamError::ALL {
                    counter!(
                        "breakerbox_upstream_errors_total",
                        "breaker" => breaker.clone(),
                        "kind" => kind.as_str()
                    )
                    .absolute(s.upstream_errors(kind));
                }
                for fault in CLIENT_FAULTS {
                    counter!(
                        "breakerbox_client_errors_total",
                        "breaker" => breaker.clone(),
                        "kind" => fault.as_str()
                    )
                    .absolute(s.client_errors(fault));
                }
            }
        });
        self.handle.render()
    }
}

fn describe() {
    describe_counter!(
        "breakerbox_reloads_total",
        "Config reloads (SIGHUP or POST /reload): ok (applied) or error (refused; the \
         running config stayed)."
    );
    describe_gauge!(
        "breakerbox_state",
        "1 for the phase each breaker is in, 0 for the others."
    );
    describe_counter!(
        "breakerbox_calls_total",
        "Forwarded calls by the judge's verdict."
    );
    describe_counter!(
        "breakerbox_rejections_total",
        "Requests answered 503 without contacting the upstream, by reason: open (the phase \
         rejects), ramp (a recovery ramping up admitted only a fraction) or health (a health \
         check probes, rule 24)."
    );
    describe_counter!(
        "breakerbox_health_checks_total",
        "Rule 24: health checks by result (a verdict, or skipped when no probe slot was free)."
    );
    describe_counter!(
        "breakerbox_transitions_total",
        "Phase changes seen by this process."
    );
    describe_counter!(
        "breakerbox_shadow_rejections_total",
        "Requests forwarded in shadow mode that the breaker would have answered 503."
    );
    describe_counter!(
        "breakerbox_local_opens_total",
        "Rule 21: this node opened its own view of a shared breaker, a rule having fired \
         without the quorum of nodes (the shared breaker stayed closed)."
    );
    describe_counter!(
        "breakerbox_overloaded_total",
        "Requests answered 503 at the upstream's max_in_flight and max_pending, not judged."
    );
    describe_counter!(
        "breakerbox_stale_results_total",
        "Results dropped because their permit was from an older generation."
    );
    describe_counter!(
        "breakerbox_upstream_errors_total",
        "Requests that got no response from the upstream, by kind."
    );
    describe_counter!(
        "breakerbox_client_errors_total",
        "Requests their client spoiled (stalled, gone, malformed or oversized body), not judged."
    );
}

/// Rule 24: an upstream's health checks and the requests they held back (only once there
/// are some: an upstream without `health` shows none).
fn health(breaker: &str, stats: &HealthStats) {
    let checks = stats.checks();
    let rejected = stats.rejections();
    if checks.iter().all(|&n| n == 0) && rejected == 0 {
        return;
    }
    for (result, n) in RESULTS.into_iter().zip(checks) {
        counter!(
            "breakerbox_health_checks_total",
            "breaker" => breaker.to_string(),
            "result" => result
        )
        .absolute(n);
    }
    counter!(
        "breakerbox_rejections_total",
        "breaker" => breaker.to_string(),
        "reason" => "health"
    )
    .absolute(rejected);
}
