//! Side by side, in one process: breakerbox against failsafe 1.3.0 and recloser 1.4.0, in
//! the steady state (every breaker built once, before the timed loop), for one and two
//! threads, with every call succeeding and with mixed traffic (every 100th or every 10th
//! call of each thread failing). Prints a markdown table of nanoseconds per protected no-op
//! call: two tables, the median and the quietest sample of each.
//!
//! Run: `cargo bench -p breakerbox --bench compare`. Without `--bench` (as under
//! `cargo test --benches`) it runs a short smoke pass whose numbers mean nothing.
//!
//! Method, per row (one case, one thread count): every column's operation is warmed up
//! for about 100 ms, which also sizes a fixed number of iterations per thread (about 80 ms
//! of work, between 200 thousand and 50 million). Then the columns are sampled in turns,
//! 9 rounds, a different column first each round. A sample starts its threads on a
//! `Barrier` and times each thread's tight loop with `Instant`; its value is the slowest
//! thread's elapsed time divided by the iterations per thread: wall time per call on each
//! thread, as recloser's own benches report.
//!
//! Why in turns: on the shared VMs we measure on, a neighbour slows a core by up to 70 %
//! for seconds at a time (the same binary reads 7.5 ns a call for a second, 12.5 the next).
//! Measured one after the other, a column could fall entirely in a slow phase and another
//! in a fast one; in turns, every column of a row meets the same phases. The median says
//! what a call costs on the machine as it was; the quietest sample what it costs when
//! nothing else takes the core, the figure to compare code by. The last column, a fixed
//! loop of arithmetic sampled in the same turns, shows how slow the machine was: its
//! median over its quietest is the neighbour's toll during that row.
//!
//! On a busy machine (other processes competing for the cores) wall time counts the time a
//! bench thread waits for a core. `-- --cpu-time` times each thread with its own CPU clock
//! instead (Linux): steadier under load for one thread, but with two threads it hides
//! contention whenever the two are not scheduled side by side. The header says which.

#![allow(clippy::disallowed_methods)] // a bench binary times itself with Instant

use std::cell::Cell;
use std::hint::black_box;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use breakerbox::contract::{Breaker, BreakerPermit, LocalAdmission, RecordedNow};
use breakerbox::{CircuitBreaker, Phase};
use failsafe::{backoff, failure_policy, CircuitBreaker as _};
use recloser::Recloser;

#[path = "compare/harness.rs"]
mod harness;

use harness::{
    measure_all, reference, Measured, Op, Pick, Plan, Sampler, CPU_TIME, FULL, ROUNDS, SMOKE,
};

/// A recovery timeout no measurement outlives, so an open breaker stays open.
const LONG: Duration = Duration::from_secs(3600);
/// One row's worth of measurements: `None` where a library has no such case.
struct Row {
    case: &'static str,
    threads: usize,
    ours_permit: Measured,
    ours_contract: Measured,
    ours_call: Measured,
    failsafe: Option<Measured>,
    recloser: Option<Measured>,
    /// [`reference`], sampled in the same turns: how fast the machine was meanwhile.
    reference: Measured,
}

impl Row {
    /// Measures breakerbox's three ways of calling `breaker` (see [`ours_ops`]) and the
    /// peers that have this case side by side (see [`measure_all`]), and checks that the
    /// traffic left `breaker` in the phase it found it in (the case measured is the case
    /// named).
    fn measure(
        plan: Plan,
        threads: usize,
        case: &'static str,
        (breaker, every): (&CircuitBreaker, Option<u32>),
        failsafe: Option<&dyn Sampler>,
        recloser: Option<&dyn Sampler>,
    ) -> Row {
        let phase = breaker.phase();
        let ours = ours_ops(breaker, every);
        let fixed = Op(reference());
        let mut ops: Vec<&dyn Sampler> = ours.iter().map(|op| &**op).collect();
        ops.push(&fixed);
        ops.extend(failsafe);
        ops.extend(recloser);
        let measured = measure_all(plan, threads, &ops);
        assert_eq!(
            breaker.phase(),
            phase,
            "{case}: the traffic moved the breaker"
        );
        let mut peers = measured[4..].iter().copied();
        Row {
            case,
            threads,
            ours_permit: measured[0],
            ours_contract: measured[1],
            ours_call: measured[2],
            failsafe: failsafe.and_then(|_| peers.next()),
            recloser: recloser.and_then(|_| peers.next()),
            reference: measured[3],
        }
    }
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

/// Breakerbox's three ways of calling `breaker`: `try_acquire`+verdict, the contract, and
/// `call`; every call succeeds, or with `every`, every `every`-th call of each thread fails.
fn ours_ops(breaker: &CircuitBreaker, every: Option<u32>) -> [Box<dyn Sampler + '_>; 3] {
    match every {
        None => [
            Box::new(Op(ours_permit(breaker))),
            Box::new(Op(ours_contract(breaker))),
            Box::new(Op(ours_call(breaker))),
        ],
        Some(every) => [
            Box::new(Op(ours_permit_mixed(breaker, every))),
            Box::new(Op(ours_contract_mixed(breaker, every))),
            Box::new(Op(ours_call_mixed(breaker, every))),
        ],
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
    let (fs_op, rc_op) = (
        Op(failsafe_call_mixed(&fs, every)),
        Op(recloser_call_mixed(&rc, every)),
    );
    Row::measure(
        plan,
        threads,
        case,
        (&breaker, Some(every)),
        Some(&fs_op),
        Some(&rc_op),
    )
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
    let fs_op = Op(failsafe_call_mixed(&fs, every));
    Row::measure(
        plan,
        threads,
        case,
        (&breaker, Some(every)),
        Some(&fs_op),
        None,
    )
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
    let fs_op = Op(failsafe_call(&fs));
    let rc_op = Op(recloser_call(&rc));
    let row = Row::measure(
        plan,
        threads,
        "closed success, consecutive failures (5)",
        (&breaker, None),
        Some(&fs_op),
        Some(&rc_op),
    );
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
    let fs_op = Op(failsafe_call(&fs));
    let rc_op = Op(recloser_call(&rc));
    let row = Row::measure(
        plan,
        threads,
        "closed success, failure rate 0.5 over 100 calls",
        (&breaker, None),
        Some(&fs_op),
        Some(&rc_op),
    );
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
    let fs_op = Op(failsafe_call(&fs));
    Row::measure(
        plan,
        threads,
        "closed success, failure rate 0.5 over 10 s",
        (&breaker, None),
        Some(&fs_op),
        None,
    )
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

    let fs_op = Op(failsafe_call(&fs));
    let rc_op = Op(recloser_call(&rc));
    let row = Row::measure(
        plan,
        threads,
        "open rejection (tripped by failures)",
        (&breaker, None),
        Some(&fs_op),
        Some(&rc_op),
    );
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
    let unit = if cpu_time {
        "ns of thread CPU time per protected no-op call; with 2 threads: the slowest \
         thread's CPU time / calls per thread"
    } else {
        "ns per protected no-op call; with 2 threads: wall time per call on each thread \
         (slowest thread's elapsed / calls per thread)"
    };
    let tables: [(&str, Pick); 2] = [
        ("the median", |m| m.median),
        ("the quietest (fastest)", |m| m.quietest),
    ];
    for (which, pick) in tables {
        println!(
            "\n{unit}: {which} of {ROUNDS} samples, taken in turns with the rest of the row\n"
        );
        println!("| case | threads | breakerbox try_acquire+success | breakerbox contract | breakerbox call | failsafe 1.3.0 call | recloser 1.4.0 call | reference loop |");
        println!("|---|---:|---:|---:|---:|---:|---:|---:|");
        for row in &rows {
            println!(
                "| {} | {} | {:.1} | {:.1} | {:.1} | {} | {} | {:.1} |",
                row.case,
                row.threads,
                pick(row.ours_permit),
                pick(row.ours_contract),
                pick(row.ours_call),
                cell(row.failsafe.map(pick)),
                cell(row.recloser.map(pick)),
                pick(row.reference)
            );
        }
    }
    println!(
        "\n(total {:.1} s; {} cores; 1-minute load average {} before, {} after)",
        started.elapsed().as_secs_f64(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load_before,
        load_average()
    );
}
