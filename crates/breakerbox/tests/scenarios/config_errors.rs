//! Bad configurations are refused with the offending field and value named.

use std::time::Duration;

use breakerbox::{Builder, CircuitBreaker, MonotonicClock};

fn refused(builder: Builder<MonotonicClock>) -> (String, String, String) {
    let err = builder.build().expect_err("the config is invalid");
    (
        err.field().to_string(),
        err.value().to_string(),
        err.to_string(),
    )
}

#[test]
fn config_errors_name_field_and_value() {
    let b = CircuitBreaker::builder;
    let cases: Vec<(Builder<MonotonicClock>, &str, &str)> = vec![
        (b().failure_rate(1.5), "failure_rate", "1.5"),
        (b().failure_rate(0.0), "failure_rate", "0"),
        (b().failure_rate(f64::NAN), "failure_rate", "NaN"),
        (b().slow_call_rate(-0.5), "slow_call_rate", "-0.5"),
        (b().failure_rate(0.5).count_window(0), "window", "count:0"),
        (
            b().failure_rate(0.5).count_window(70_000),
            "window",
            "count:70000",
        ),
        (b().max_probes(0), "max_probes", "0"),
        (b().max_probes(5_000), "max_probes", "5000"),
        (b().required_successes(0), "required_successes", "0"),
        (
            b().failure_rate(0.5).count_window(10).min_calls(11),
            "min_calls",
            "11",
        ),
        (b().failure_rate(0.5).min_calls(0), "min_calls", "0"),
        (b().slow_call_rate(0.5), "slow_call_threshold", "none"),
        (
            b().slow_call_threshold(Duration::ZERO),
            "slow_call_threshold",
            "0s",
        ),
        (b().consecutive_failures(0), "consecutive_failures", "0"),
        (
            b().recovery_timeout(Duration::ZERO),
            "recovery_timeout",
            "0s",
        ),
        (
            b().half_open_timeout(Duration::ZERO),
            "half_open_timeout",
            "0s",
        ),
        (b().call_timeout(Duration::ZERO), "call_timeout", "0s"),
        (b().probe_timeout(Duration::ZERO), "probe_timeout", "0s"),
        (
            b().call_timeout(Duration::from_secs(1))
                .probe_timeout(Duration::from_secs(2)),
            "probe_timeout",
            "2s",
        ),
        (
            b().half_open_timeout(Duration::from_secs(5))
                .probe_timeout(Duration::from_secs(5)),
            "probe_timeout",
            "5s",
        ),
        (
            b().backoff(0.5, Duration::from_secs(60)),
            "backoff_multiplier",
            "0.5",
        ),
        (
            b().recovery_timeout(Duration::from_secs(30))
                .backoff(2.0, Duration::from_secs(10)),
            "max_open_duration",
            "10s",
        ),
        (b().jitter(1.0), "jitter", "1"),
        (b().jitter(-0.1), "jitter", "-0.1"),
        (
            b().failure_rate(0.5)
                .time_window(Duration::from_secs(10), 0),
            "window",
            "time:10s/0",
        ),
        (
            b().failure_rate(0.5).time_window(Duration::ZERO, 10),
            "window",
            "time:0ns/10",
        ),
        (b().count_window(10), "window", "count:10"),
        (b().min_calls(5), "min_calls", "5"),
    ];
    for (builder, field, value) in cases {
        let (got_field, got_value, message) = refused(builder);
        assert_eq!(
            (got_field.as_str(), got_value.as_str()),
            (field, value),
            "{message}"
        );
        assert!(
            message.contains(field) && message.contains(value),
            "{message}"
        );
    }
}

#[test]
fn good_configs_build() {
    let breaker = CircuitBreaker::builder()
        .consecutive_failures(5)
        .failure_rate(1.0)
        .slow_call_threshold(Duration::from_millis(1))
        .slow_call_rate(0.000_001)
        .count_window(65_535)
        .min_calls(65_535)
        .max_probes(4_095)
        .required_successes(4_095)
        .jitter(0.999)
        .build()
        .unwrap();
    assert_eq!(breaker.config().max_probes, 4_095);
}
