//! Side by side, in one process: breakerbox against failsafe 1.3.0 and recloser 1.4.0, in
//! the steady state (every breaker built once, before the timed loop), for one and two
//! threads, with every call succeeding and with mixed traffic (every 100th or every 10th
//! call of each thread failing). Prints a markdown table of nanoseconds per protected no-op
//! call.
//!
//! Run: `cargo bench -p breakerbox --bench compare`. Without `--bench` (as under
//! `cargo test --benches`) it runs a short smoke pass whose numbers mean nothing.
//!
//! Method, per case and per library: warm up for about 100 ms, which also sizes a fixed
//! number of iterations per thread (about 150 ms of work, between 200 thousand and 50
//! million); then 5 measurements, each starting its threads on a `Barrier` and timing
//! each thread's tight loop with `Instant`. A measurement's value is the slowest thread's
//! elapsed time divided by the iterations per thread: wall time per call on each thread,
//! as recloser's own benches report. The table shows the median of the 5.
//!
//! On a busy machine (other processes competing for the cores) wall time counts the time a
//! bench thread waits for a core. `-- --cpu-time` times each thread with its own CPU clock
//! instead (Linux): steadier under load for one thread, but with two threads it hides
//! contention whenever the two are not scheduled side by side. The header says which.

#![allow(clippy::disallowed_methods)] // a bench binary times itself with Instant

use std::cell::Cell;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use breakerbox::contract::{Breaker, BreakerPermit, LocalAdmission, RecordedNow};
use breakerbox::{CircuitBreaker, Phase};
use failsafe::{backoff, failure_policy, CircuitBreaker as _};
use recloser::Recloser;

/// A recovery timeout no measurement outlives, so an open breaker stays open.
const LONG: Duration = Duration::from_secs(3600);
const REPEATS: usize = 5;

#[derive(Clone, Copy)]
struct Plan {
    warm_up: Duration,
    target: Duration,
    min_iters: u64,
    max_iters: u64,
}

const FULL: Plan = Plan {
    warm_up: Duration::from_millis(100),
    target: Duration::from_millis(150),
    min_iters: 200_000,
    max_iters: 50_000_000,
};

const SMOKE: Plan = Plan {
    warm_up: Duration::from_millis(2),
    target: Duration::from_millis(2),
    min_iters: 1_000,
    max_iters: 100_000,
};

/// Whether `--cpu-time` asked for each thread's CPU clock instead of wall time.
static CPU_TIME: AtomicBool = AtomicBool::new(false);

/// A start time on the clock the run asked for.
enum Stamp {
    Wall(Instant),
    #[cfg(target_os = "linux")]
    Cpu(Duration),
}

#[cfg(target_os = "linux")]
fn thread_cpu_time() -> Duration {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}

impl Stamp {
    fn now() -> Stamp {
        #[cfg(target_os = "linux")]
        if CPU_TIME.load(Ordering::Relaxed) {
            return Stamp::Cpu(thread_cpu_time());
        }
        Stamp::Wall(Instant::now())
    }

    fn elapsed(&self) -> Duration {
        match self {
            Stamp::Wall(start) => start.elapsed(),
            #[cfg(target_os = "linux")]
            Stamp::Cpu(start) => thread_cpu_time().saturating_sub(*start),
        }
    }
}

/// Runs `op` `iters` times on each of `threads` threads started together; returns the
/// slowest thread's nanoseconds per call.
fn run<F: Fn() + Sync>(threads: usize, iters: u64, op: &F) -> f64 {
    let barrier = Barrier::new(threads);
    let elapsed: Vec<Duration> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    let start = Stamp::now();
                    for _ in 0..iters {
                        op();
                    }
                    start.elapsed()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a bench thread panicked"))
            .collect()
    });
    let slowest = elapsed.into_iter().max().unwrap_or_default();
    slowest.as_nanos() as f64 / iters as f64
}

/// Warms up, sizes the iteration count, and returns the median of `REPEATS` runs.
fn measure<F: Fn() + Sync>(plan: Plan, threads: usize, op: F) -> f64 {
    let mut iters = 10_000u64;
    let warm_start = Instant::now();
    let mut per_call = run(threads, iters, &op);
    while warm_start.elapsed() < plan.warm_up {
        iters = (iters * 2).min(plan.max_iters);
        per_call = run(threads, iters, &op);
    }
    let sized = (plan.target.as_nanos() as f64 / per_call.max(0.1)) as u64;
    let iters = sized.clamp(plan.min_iters, plan.max_iters);
    let mut samples: Vec<f64> = (0..REPEATS).map(|_| run(threads, iters, &op)).collect();
    samples.sort_by(f64::total_cmp);
    samples[REPEATS / 2]
}

/// One row's worth of measurements: `None` where a library has no such case.
struct Row {
    case: &'static str,
    threads: usize,
    ours_permit: f64,
    ours_contract: f64,
    ours_call: f64,
    failsafe: Option<f64>,
    recloser: Option<f64>,
}

fn ours_permit<C: breakerbox::Clock>(breaker: &CircuitBreaker<C>) -> impl Fn() + Sync + '_ {
    move || match breaker.try_acquire() {
        Ok(permit) => permit.success(),
        Err(open) => {
            black_box(open);
        }
    }
}

/// The same through the engine contract, as the tower layer, the reqwest middleware and the
/// registry call any engine: `Breaker::try_acquire_local` (the borrowed permit), then
/// `BreakerPermit::success`.
fn ours_contract<C: breakerbox::Clock + Clone>(
    breaker: &CircuitBreaker<C>,
) -> impl Fn() + Sync + '_ {
    move || match Breaker::try_acquire_local(breaker) {
        LocalAdmission::Admitted(permit) => {
            let RecordedNow = BreakerPermit::success(permit);
        }
        other => {
            black_box(other);
        }
    }
}

fn ours_call<C: breakerbox::Clock>(breaker: &CircuitBreaker<C>) -> impl Fn() + Sync + '_ {
    move || {
        black_box(breaker.call(|| Ok::<u8, ()>(black_box(0))).is_ok());
    }
}

fn failsafe_call<B: failsafe::CircuitBreaker + Sync>(breaker: &B) -> impl Fn() + Sync + '_ {
    move || {
        black_box(breaker.call(|| Ok::<u8, ()>(black_box(0))).is_ok());
    }
}

fn recloser_call(breaker: &Recloser) -> impl Fn() + Sync + '_ {
    move || {
        black_box(breaker.call(|| Ok::<u8, ()>(black_box(0))).is_ok());
    }
}

thread_local! {
    /// Calls left before this thread's next failing call (mixed traffic).
    static UNTIL_FAILURE: Cell<u32> = const { Cell::new(0) };
}

/// Whether this thread's next call fails, for mixed traffic: every `every`-th call of each
/// thread fails, deterministically (a countdown; no division on the measured path).
/// `every == 0` means no call fails.
#[inline(always)]
fn next_fails(every: u32) -> bool {
    if every == 0 {
        return false;
    }
    UNTIL_FAILURE.with(|left| match left.get() {
        0 => {
            left.set(every - 1);
            true
        }
        n => {
            left.set(n - 1);
            false
        }
    })
}

fn ours_permit_mixed<C: breakerbox::Clock>(
    breaker: &CircuitBreaker<C>,
    every: u32,
) -> impl Fn() + Sync + '_ {
    move || match breaker.try_acquire() {
        Ok(permit) if next_fails(every) => permit.failure(),
        Ok(permit) => permit.success(),
        Err(open) => {
            black_box(open);
        }
    }
}

fn ours_contract_mixed<C: breakerbox::Clock + Clone>(
    breaker: &CircuitBreaker<C>,
    every: u32,
) -> impl Fn() + Sync + '_ {
    move || match Breaker::try_acquire_local(breaker) {
        LocalAdmission::Admitted(permit) => {
            let RecordedNow = if next_fails(every) {
                BreakerPermit::failure(permit)
            } else {
                BreakerPermit::success(permit)
            };
        }
        other => {
            black_box(other);
        }
    }
}

fn ours_call_mixed<C: breakerbox::Clock>(
    breaker: &CircuitBreaker<C>,
    every: u32,
) -> impl Fn() + Sync + '_ {
    move || {
        let fails = next_fails(every);
        black_box(
            breaker
                .call(|| if fails { Err(()) } else { Ok(black_box(0u8)) })
                .is_ok(),
        );
    }
}

fn failsafe_call_mixed<B: failsafe::CircuitBreaker + Sync>(
    breaker: &B,
    every: u32,
) -> impl Fn() + Sync + '_ {
    move || {
        let fails = next_fails(every);
        black_box(
            breaker
                .call(|| if fails { Err(()) } else { Ok(black_box(0u8)) })
                .is_ok(),
        );
    }
}

fn recloser_call_mixed(breaker: &Recloser, every: u32) -> impl Fn() + Sync + '_ {
    move || {
        let fails = next_fails(every);
        black_box(
            breaker
                .call(|| if fails { Err(()) } else { Ok(black_box(0u8)) })
                .is_ok(),
        );
    }
}

/// A row with breakerbox's three columns measured under mixed traffic (the peers' left
/// empty, for the caller to fill).
fn ours_mixed(
    plan: Plan,
    threads: usize,
    case: &'static str,
    breaker: &CircuitBreaker,
    every: u32,
) -> Row {
    Row {
        case,
        threads,
        ours_permit: measure(plan, threads, ours_permit_mixed(breaker, every)),
        ours_contract: measure(plan, threads, ours_contract_mixed(breaker, every)),
        ours_call: measure(plan, threads, ours_call_mixed(breaker, every)),
        failsafe: None,
        recloser: None,
    }
}

/// Mixed traffic (every `every`-th call of each thread fails) against a failure rate of 0.5
/// over a count window of 100: it never trips, but the window always holds failures.
fn mixed_count_window(plan: Plan, threads: usize, every: u32) -> Row {
    let breaker = ours(
        CircuitBreaker::builder()
            .failure_rate(0.5)
            .count_window(100),
    );
    // failsafe's default policy (consecutive failures 5 with backoff), as users get it.
    let fs = failsafe::Config::new().build();
    let rc = Recloser::custom().error_rate(0.5).closed_len(100).build();
    let case = match every {
        100 => "mixed 1 % failures, failure rate 0.5 over 100 calls",
        _ => "mixed 10 % failures, failure rate 0.5 over 100 calls",
    };
    let row = Row {
        failsafe: Some(measure(plan, threads, failsafe_call_mixed(&fs, every))),
        recloser: Some(measure(plan, threads, recloser_call_mixed(&rc, every))),
        ..ours_mixed(plan, threads, case, &breaker, every)
    };
    assert_eq!(breaker.phase(), Phase::Closed);
    row
}

/// Mixed traffic against a failure rate of 0.5 over 10 s in `buckets` buckets.
fn mixed_time_window(plan: Plan, threads: usize, every: u32, buckets: u32) -> Row {
    let breaker = ours(
        CircuitBreaker::builder()
            .failure_rate(0.5)
            .time_window(Duration::from_secs(10), buckets),
    );
    let fs = failsafe::Config::new()
        .failure_policy(failure_policy::success_rate_over_time_window(
            0.5,
            10,
            Duration::from_secs(10),
            backoff::constant(Duration::from_secs(30)),
        ))
        .build();
    let case = match (every, buckets) {
        (100, 10) => "mixed 1 % failures, failure rate 0.5 over 10 s (10 buckets)",
        (100, _) => "mixed 1 % failures, failure rate 0.5 over 10 s (1,000 buckets)",
        (_, 10) => "mixed 10 % failures, failure rate 0.5 over 10 s (10 buckets)",
        _ => "mixed 10 % failures, failure rate 0.5 over 10 s (1,000 buckets)",
    };
    let row = Row {
        failsafe: Some(measure(plan, threads, failsafe_call_mixed(&fs, every))),
        ..ours_mixed(plan, threads, case, &breaker, every)
    };
    assert_eq!(breaker.phase(), Phase::Closed);
    row
}

fn ours(build: breakerbox::Builder<breakerbox::MonotonicClock>) -> CircuitBreaker {
    build.build().expect("a valid config")
}

fn closed_consecutive(plan: Plan, threads: usize) -> Row {
    let breaker = ours(CircuitBreaker::builder().consecutive_failures(5));
    let fs = failsafe::Config::new()
        .failure_policy(failure_policy::consecutive_failures(
            5,
            backoff::constant(Duration::from_secs(30)),
        ))
        .build();
    // recloser has no consecutive-failure policy: its only policy is a failure rate over
    // a ring buffer; this is its default (closed_len 100, error rate 0.5).
    let rc = Recloser::custom().build();
    let row = Row {
        case: "closed success, consecutive failures (5)",
        threads,
        ours_permit: measure(plan, threads, ours_permit(&breaker)),
        ours_contract: measure(plan, threads, ours_contract(&breaker)),
        ours_call: measure(plan, threads, ours_call(&breaker)),
        failsafe: Some(measure(plan, threads, failsafe_call(&fs))),
        recloser: Some(measure(plan, threads, recloser_call(&rc))),
    };
    assert_eq!(breaker.phase(), Phase::Closed);
    assert!(fs.is_call_permitted());
    row
}

fn closed_count_window(plan: Plan, threads: usize) -> Row {
    let breaker = ours(
        CircuitBreaker::builder()
            .failure_rate(0.5)
            .count_window(100),
    );
    // failsafe has no count window: its rate policy is an exponentially weighted success
    // rate over a time window, which reads the clock on every outcome.
    let fs = failsafe::Config::new()
        .failure_policy(failure_policy::success_rate_over_time_window(
            0.5,
            10,
            Duration::from_secs(30),
            backoff::constant(Duration::from_secs(30)),
        ))
        .build();
    let rc = Recloser::custom().error_rate(0.5).closed_len(100).build();
    let row = Row {
        case: "closed success, failure rate 0.5 over 100 calls",
        threads,
        ours_permit: measure(plan, threads, ours_permit(&breaker)),
        ours_contract: measure(plan, threads, ours_contract(&breaker)),
        ours_call: measure(plan, threads, ours_call(&breaker)),
        failsafe: Some(measure(plan, threads, failsafe_call(&fs))),
        recloser: Some(measure(plan, threads, recloser_call(&rc))),
    };
    assert_eq!(breaker.phase(), Phase::Closed);
    assert!(fs.is_call_permitted());
    row
}

fn closed_time_window(plan: Plan, threads: usize) -> Row {
    let breaker = ours(
        CircuitBreaker::builder()
            .failure_rate(0.5)
            .time_window(Duration::from_secs(10), 10),
    );
    let fs = failsafe::Config::new()
        .failure_policy(failure_policy::success_rate_over_time_window(
            0.5,
            10,
            Duration::from_secs(10),
            backoff::constant(Duration::from_secs(30)),
        ))
        .build();
    let row = Row {
        case: "closed success, failure rate 0.5 over 10 s",
        threads,
        ours_permit: measure(plan, threads, ours_permit(&breaker)),
        ours_contract: measure(plan, threads, ours_contract(&breaker)),
        ours_call: measure(plan, threads, ours_call(&breaker)),
        failsafe: Some(measure(plan, threads, failsafe_call(&fs))),
        recloser: None,
    };
    assert_eq!(breaker.phase(), Phase::Closed);
    row
}

fn open_rejection(plan: Plan, threads: usize) -> Row {
    let breaker = ours(
        CircuitBreaker::builder()
            .consecutive_failures(1)
            .recovery_timeout(LONG),
    );
    let _ = breaker.call(|| Err::<(), _>(()));
    assert_eq!(breaker.phase(), Phase::Open);

    let fs = failsafe::Config::new()
        .failure_policy(failure_policy::consecutive_failures(
            1,
            backoff::constant(LONG),
        ))
        .build();
    let _ = fs.call(|| Err::<(), _>(()));
    assert!(!fs.is_call_permitted());

    // recloser judges its rate only once the ring buffer is full.
    let rc = Recloser::custom()
        .error_rate(0.5)
        .closed_len(10)
        .open_wait(LONG)
        .build();
    let mut tripped = false;
    for _ in 0..100 {
        if let Err(recloser::Error::Rejected) = rc.call(|| Err::<(), _>(())) {
            tripped = true;
            break;
        }
    }
    assert!(tripped, "recloser did not open after 100 failures");

    let row = Row {
        case: "open rejection (tripped by failures)",
        threads,
        ours_permit: measure(plan, threads, ours_permit(&breaker)),
        ours_contract: measure(plan, threads, ours_contract(&breaker)),
        ours_call: measure(plan, threads, ours_call(&breaker)),
        failsafe: Some(measure(plan, threads, failsafe_call(&fs))),
        recloser: Some(measure(plan, threads, recloser_call(&rc))),
    };
    assert_eq!(breaker.phase(), Phase::Open);
    assert!(!fs.is_call_permitted());
    assert!(matches!(
        rc.call(|| Ok::<_, ()>(())),
        Err(recloser::Error::Rejected)
    ));
    row
}

/// The 1-minute load average, where the system tells it: other work on the machine
/// inflates the numbers (with 2 threads on 2 cores, a third runnable task means the two
/// bench threads no longer run side by side).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "unknown".to_string())
}

fn cell(value: Option<f64>) -> String {
    value.map_or_else(|| "n/a".to_string(), |ns| format!("{ns:.1}"))
}

fn main() {
    let full = std::env::args().any(|arg| arg == "--bench");
    let cpu_time = cfg!(target_os = "linux") && std::env::args().any(|arg| arg == "--cpu-time");
    CPU_TIME.store(cpu_time, Ordering::Relaxed);
    let plan = if full { FULL } else { SMOKE };
    let started = Instant::now();
    let load_before = load_average();
    // `BB_COMPARE_ONLY=mixed` (or `steady`) runs only the mixed-traffic (or the
    // success-only and rejection) rows, to iterate on one path.
    let only = std::env::var("BB_COMPARE_ONLY").unwrap_or_default();
    let mut rows = Vec::new();
    for threads in [1, 2] {
        if only != "mixed" {
            rows.push(closed_consecutive(plan, threads));
            rows.push(closed_count_window(plan, threads));
            rows.push(closed_time_window(plan, threads));
            rows.push(open_rejection(plan, threads));
        }
        if only == "steady" {
            continue;
        }
        for every in [100, 10] {
            rows.push(mixed_count_window(plan, threads, every));
            rows.push(mixed_time_window(plan, threads, every, 10));
        }
        rows.push(mixed_time_window(plan, threads, 100, 1000));
    }
    rows.sort_by_key(|row| row.case);
    if !full {
        println!("(smoke run without --bench: the numbers below mean nothing)");
    }
    if cpu_time {
        println!(
            "ns of thread CPU time per protected no-op call, median of {REPEATS}; with 2 \
             threads: the slowest thread's CPU time / calls per thread\n"
        );
    } else {
        println!(
            "ns per protected no-op call, median of {REPEATS}; with 2 threads: wall time per \
             call on each thread (slowest thread's elapsed / calls per thread)\n"
        );
    }
    println!("| case | threads | breakerbox try_acquire+success | breakerbox contract | breakerbox call | failsafe 1.3.0 call | recloser 1.4.0 call |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for row in &rows {
        println!(
            "| {} | {} | {:.1} | {:.1} | {:.1} | {} | {} |",
            row.case,
            row.threads,
            row.ours_permit,
            row.ours_contract,
            row.ours_call,
            cell(row.failsafe),
            cell(row.recloser)
        );
    }
    println!(
        "\n(total {:.1} s; {} cores; 1-minute load average {} before, {} after)",
        started.elapsed().as_secs_f64(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load_before,
        load_average()
    );
}
