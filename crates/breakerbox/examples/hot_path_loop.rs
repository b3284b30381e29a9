//! A loop of protected no-op calls on one thread, for counting instructions per call with
//! `valgrind --tool=callgrind` (`scripts/instructions.sh` runs it): an instruction count
//! does not move with the machine's load, so it tells a change of one or two instructions
//! on the hot path that a wall-clock bench on a shared machine cannot.
//!
//! `cargo run --release --example hot_path_loop -- CALLS RULE [FAIL_EVERY [VIA]]`, where RULE
//! is `consecutive`, `count`, `time`, `deadline` (consecutive failures with a call timeout)
//! or `open` (a tripped breaker), every FAIL_EVERY-th call fails (0: none), and VIA is
//! `permit` (the default: `try_acquire` and a verdict) or `call` (`CircuitBreaker::call`
//! with a closure returning `Ok` or `Err`, judged by the default judge).

use std::hint::black_box;
use std::process::ExitCode;
use std::time::Duration;

use breakerbox::{CircuitBreaker, ConfigError};

fn breaker(rule: &str) -> Result<CircuitBreaker, ConfigError> {
    let builder = CircuitBreaker::builder();
    match rule {
        "count" => builder.failure_rate(0.5).count_window(100).build(),
        "time" => builder
            .failure_rate(0.5)
            .time_window(Duration::from_secs(10), 10)
            .build(),
        "deadline" => builder
            .consecutive_failures(5)
            .call_timeout(Duration::from_secs(1))
            .build(),
        "open" => {
            let breaker = builder
                .consecutive_failures(1)
                .recovery_timeout(Duration::from_secs(3600))
                .build()?;
            if let Ok(permit) = breaker.try_acquire() {
                permit.failure();
            }
            Ok(breaker)
        }
        _ => builder.consecutive_failures(5).build(),
    }
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let calls: u64 = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let rule = args.next().unwrap_or_else(|| "consecutive".to_string());
    let fail_every: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let via_call = args.next().is_some_and(|via| via == "call");
    let breaker = match breaker(&rule) {
        Ok(breaker) => breaker,
        Err(error) => {
            eprintln!("hot_path_loop: {error}");
            return ExitCode::FAILURE;
        }
    };
    if via_call {
        for i in 0..calls {
            let fails = fail_every > 0 && i % fail_every == 0;
            let result = breaker.call(|| if fails { Err(()) } else { Ok(black_box(0u8)) });
            black_box(result.is_ok());
        }
        black_box(&breaker);
        return ExitCode::SUCCESS;
    }
    for i in 0..calls {
        match breaker.try_acquire() {
            Ok(permit) if fail_every > 0 && i % fail_every == 0 => permit.failure(),
            Ok(permit) => permit.success(),
            Err(open) => {
                black_box(open);
            }
        }
    }
    black_box(&breaker);
    ExitCode::SUCCESS
}
