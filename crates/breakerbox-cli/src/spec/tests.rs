use std::time::Duration;

use breakerbox::config::WindowKind;

use super::*;

fn spec(text: &str) -> anyhow::Result<DependencySpec> {
    DependencySpec::from_toml_str(text)
}

fn error_of(text: &str) -> String {
    match spec(text).and_then(|s| s.config().map(|_| s)) {
        Ok(_) => panic!("{text:?} was accepted"),
        Err(e) => format!("{e:#}"),
    }
}

#[test]
fn every_key_reaches_the_core_config() {
    let s = spec(
        r#"
        [breaker]
        consecutive_failures = 7
        failure_rate = 0.5
        slow_call_rate = 0.8
        slow_call_threshold = "800ms"
        window = "time:10s/20"
        min_calls = 4
        recovery_timeout = "2s"
        backoff_multiplier = 2.0
        max_open_duration = "1m"
        jitter = 0.1
        max_probes = 3
        required_successes = 4
        half_open_timeout = "5s"

        [judge]
        slow_threshold = "1s"
        "#,
    )
    .unwrap();
    let c = s.config().unwrap();
    assert_eq!(c.consecutive_failures, Some(7));
    let rule = c.rate.unwrap();
    assert_eq!(rule.failure_rate.unwrap().ppm(), 500_000);
    assert_eq!(rule.slow_rate.unwrap().ppm(), 800_000);
    assert_eq!(
        rule.window,
        WindowKind::Time {
            duration: Duration::from_secs(10),
            buckets: 20
        }
    );
    assert_eq!(rule.min_calls, 4);
    assert_eq!(c.slow_call_threshold, Some(Duration::from_millis(800)));
    assert_eq!(c.recovery_timeout, Duration::from_secs(2));
    assert_eq!(c.backoff_multiplier, 2.0);
    assert_eq!(c.max_open_duration, Duration::from_secs(60));
    assert_eq!(c.jitter, 0.1);
    assert_eq!((c.max_probes, c.required_successes), (3, 4));
    assert_eq!(c.half_open_timeout, Duration::from_secs(5));
    assert_eq!(s.judge.slow_threshold, Some(Duration::from_secs(1)));
    s.http_judge().unwrap();
}

#[test]
fn an_empty_file_gives_the_core_defaults() {
    let s = spec("").unwrap();
    assert_eq!(
        s.config().unwrap(),
        breakerbox::Config::builder().build().unwrap()
    );
}

#[test]
fn a_spec_survives_a_round_trip_through_toml() {
    let s = spec(
        r#"
        [breaker]
        failure_rate = 0.25
        window = "time:1m30s/3"
        recovery_timeout = "1.5s"
        "#,
    )
    .unwrap();
    let text = toml::to_string(&s).unwrap();
    assert_eq!(spec(&text).unwrap(), s, "{text}");
}

#[test]
fn an_out_of_range_rate_names_its_key_and_value() {
    let e = error_of("[breaker]\nfailure_rate = 1.5\n");
    assert!(e.contains("breaker.failure_rate"), "{e}");
    assert!(e.contains("1.5"), "{e}");
}

#[test]
fn a_bad_window_size_names_the_window_key() {
    let e = error_of("[breaker]\nfailure_rate = 0.5\nwindow = \"count:0\"\n");
    assert!(e.contains("breaker.window"), "{e}");
}

#[test]
fn a_duration_without_unit_names_its_key() {
    let e = error_of("[breaker]\nrecovery_timeout = \"10\"\n");
    assert!(
        e.contains("recovery_timeout: invalid duration \"10\""),
        "{e}"
    );
    let e = error_of("[breaker]\nhalf_open_timeout = 10\n");
    assert!(e.contains("half_open_timeout: invalid duration 10"), "{e}");
}

#[test]
fn an_unknown_key_is_refused_by_name() {
    let e = error_of("[breaker]\nfailure_ratio = 0.5\n");
    assert!(e.contains("failure_ratio"), "{e}");
    let e = error_of("[breakers]\n");
    assert!(e.contains("breakers"), "{e}");
}

#[test]
fn backoff_without_a_cap_is_refused() {
    let e = error_of("[breaker]\nbackoff_multiplier = 2.0\n");
    assert!(e.contains("breaker.max_open_duration"), "{e}");
}

#[test]
fn a_bad_judge_names_the_judge_key() {
    let s = spec("[judge]\nslow_threshold = \"1s\"\nprobe_slow_threshold = \"2s\"\n").unwrap();
    let e = format!("{:#}", s.http_judge().unwrap_err());
    assert!(e.starts_with("judge.probe_slow_threshold"), "{e}");
}

#[test]
fn errors_can_name_an_embedding_path() {
    let mut b = ConfigFile::default();
    b.jitter = Some(1.0);
    let e = breaker_config_at(&b, "upstreams.api.breaker")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("upstreams.api.breaker.jitter:"), "{e}");
}
