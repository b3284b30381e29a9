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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use breakerbox::contract::{Breaker, BreakerPermit, LocalAdmission, RecordedNow};
use breakerbox::{CircuitBreaker, Phase};
use failsafe::{backoff, failure_policy, CircuitBreaker as _};
use recloser::Recloser;

/// A recovery timeout no measurement outlives, so an open breaker stays open.
const LONG: Duration = Duration::from_secs(3600);
/// Samples per operation, taken in turns with the rest of its row.
const ROUNDS: usize = 9;

#[derive(Clone, Copy)]
struct Plan {
    warm_up: Duration,
    target: Duration,
    min_iters: u64,
    max_iters: u64,
}

const FULL: Plan = Plan {
    warm_up: Duration::from_millis(100),
    target: Duration::from_millis(80),
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

/// What one column measured: the median of its samples, and the quietest (the fastest:
/// what the code costs when nothing else on the machine takes the core).
#[derive(Clone, Copy)]
struct Measured {
    median: f64,
    quietest: f64,
}

/// Which figure of a [`Measured`] a table shows.
type Pick = fn(Measured) -> f64;

/// Something to time: `sample` runs it `iters` times on each of `threads` threads.
trait Sampler {
    fn sample(&self, threads: usize, iters: u64) -> f64;
}

/// An operation to time, as a [`Sampler`]: the loop stays monomorphic, only the call per
/// sample is dynamic.
struct Op<F>(F);

impl<F: Fn() + Sync> Sampler for Op<F> {
    fn sample(&self, threads: usize, iters: u64) -> f64 {
        run(threads, iters, &self.0)
    }
}

/// Warms `op` up and sizes its iteration count to the plan's target time.
fn size(plan: Plan, threads: usize, op: &dyn Sampler) -> u64 {
    let mut iters = 10_000u64;
    let warm_start = Instant::now();
    let mut per_call = op.sample(threads, iters);
    while warm_start.elapsed() < plan.warm_up {
        iters = (iters * 2).min(plan.max_iters);
        per_call = op.sample(threads, iters);
    }
    let sized = (plan.target.as_nanos() as f64 / per_call.max(0.1)) as u64;
    sized.clamp(plan.min_iters, plan.max_iters)
}

/// Measures the operations of one row side by side: each is warmed up and sized alone,
/// then they are sampled in turns, `ROUNDS` rounds with a different one first each round,
/// so that a slow phase of a shared machine (seconds long on the hosts we measure on)
/// falls on all of them alike instead of on whichever ran then.
fn measure_all(plan: Plan, threads: usize, ops: &[&dyn Sampler]) -> Vec<Measured> {
    let iters: Vec<u64> = ops.iter().map(|op| size(plan, threads, *op)).collect();
    let mut samples: Vec<Vec<f64>> = vec![Vec::with_capacity(ROUNDS); ops.len()];
    for round in 0..ROUNDS {
        for turn in 0..ops.len() {
            let i = (round + turn) % ops.len();
            samples[i].push(ops[i].sample(threads, iters[i]));
        }
    }
    samples
        .into_iter()
        .map(|mut s| {
            s.sort_by(f64::total_cmp);
            Measured {
                median: s[s.len() / 2],
                quietest: s[0],
            }
        })
        .collect()
}

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

/// Fixed work that touches no shared memory: a chain of eight dependent multiplications
/// (about 8 ns on a 3 GHz core). Sampled in turns with each row, its median against its
/// quietest sample shows how much a neighbour slowed the core during that row.
fn reference() -> impl Fn() + Sync {
    || {
        let mut x = black_box(0x9e37_79b9_7f4a_7c15u64);
        for _ in 0..8 {
            x = x.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ (x >> 29);
        }
        black_box(x);
    }
}

impl Row {
    /// Measures breakerbox's three ways of calling and the peers that have this case side
    /// by side (see [`measure_all`]).
    fn measure(
        plan: Plan,
        threads: usize,
        case: &'static str,
        ours: [&dyn Sampler; 3],
        failsafe: Option<&dyn Sampler>,
        recloser: Option<&dyn Sampler>,
    ) -> Row {
        let fixed = Op(reference());
        let mut ops: Vec<&dyn Sampler> = ours.to_vec();
        ops.push(&fixed);
        ops.extend(failsafe);
        ops.extend(recloser);
        let measured = measure_all(plan, threads, &ops);
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

/// A mixed-traffic row: breakerbox's three columns and the peers given, side by side.
fn mixed_row(
    plan: Plan,
    threads: usize,
    case: &'static str,
    breaker: &CircuitBreaker,
    every: u32,
    failsafe: Option<&dyn Sampler>,
    recloser: Option<&dyn Sampler>,
) -> Row {
    let permit = Op(ours_permit_mixed(breaker, every));
    let contract = Op(ours_contract_mixed(breaker, every));
    let call = Op(ours_call_mixed(breaker, every));
    Row::measure(
        plan,
        threads,
        case,
        [&permit, &contract, &call],
        failsafe,
        recloser,
    )
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
    let row = mixed_row(
        plan,
        threads,
        case,
        &breaker,
        every,
        Some(&fs_op),
        Some(&rc_op),
    );
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
    let fs_op = Op(failsafe_call_mixed(&fs, every));
    let row = mixed_row(plan, threads, case, &breaker, every, Some(&fs_op), None);
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
    let (permit, contract, call) = (
        Op(ours_permit(&breaker)),
        Op(ours_contract(&breaker)),
        Op(ours_call(&breaker)),
    );
    let fs_op = Op(failsafe_call(&fs));
    let rc_op = Op(recloser_call(&rc));
    let row = Row::measure(
        plan,
        threads,
        "closed success, consecutive failures (5)",
        [&permit, &contract, &call],
        Some(&fs_op),
        Some(&rc_op),
    );
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
    let (permit, contract, call) = (
        Op(ours_permit(&breaker)),
        Op(ours_contract(&breaker)),
        Op(ours_call(&breaker)),
    );
    let fs_op = Op(failsafe_call(&fs));
    let rc_op = Op(recloser_call(&rc));
    let row = Row::measure(
        plan,
        threads,
        "closed success, failure rate 0.5 over 100 calls",
        [&permit, &contract, &call],
        Some(&fs_op),
        Some(&rc_op),
    );
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
    let (permit, contract, call) = (
        Op(ours_permit(&breaker)),
        Op(ours_contract(&breaker)),
        Op(ours_call(&breaker)),
    );
    let fs_op = Op(failsafe_call(&fs));
    let row = Row::measure(
        plan,
        threads,
        "closed success, failure rate 0.5 over 10 s",
        [&permit, &contract, &call],
        Some(&fs_op),
        None,
    );
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

    let (permit, contract, call) = (
        Op(ours_permit(&breaker)),
        Op(ours_contract(&breaker)),
        Op(ours_call(&breaker)),
    );
    let fs_op = Op(failsafe_call(&fs));
    let rc_op = Op(recloser_call(&rc));
    let row = Row::measure(
        plan,
        threads,
        "open rejection (tripped by failures)",
        [&permit, &contract, &call],
        Some(&fs_op),
        Some(&rc_op),
    );
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
