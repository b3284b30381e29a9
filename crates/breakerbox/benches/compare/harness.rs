//! The comparison's harness: timing an operation on one or two threads, and sampling the
//! operations of a row in turns (the method is in the bench's own header).

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// Samples per operation, taken in turns with the rest of its row.
pub const ROUNDS: usize = 9;

#[derive(Clone, Copy)]
pub struct Plan {
    pub warm_up: Duration,
    pub target: Duration,
    pub min_iters: u64,
    pub max_iters: u64,
}

pub const FULL: Plan = Plan {
    warm_up: Duration::from_millis(100),
    target: Duration::from_millis(80),
    min_iters: 200_000,
    max_iters: 50_000_000,
};

pub const SMOKE: Plan = Plan {
    warm_up: Duration::from_millis(2),
    target: Duration::from_millis(2),
    min_iters: 1_000,
    max_iters: 100_000,
};

/// Whether `--cpu-time` asked for each thread's CPU clock instead of wall time.
pub static CPU_TIME: AtomicBool = AtomicBool::new(false);

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
pub struct Measured {
    pub median: f64,
    pub quietest: f64,
}

/// Which figure of a [`Measured`] a table shows.
pub type Pick = fn(Measured) -> f64;

/// Something to time: `sample` runs it `iters` times on each of `threads` threads.
pub trait Sampler {
    fn sample(&self, threads: usize, iters: u64) -> f64;
}

/// An operation to time, as a [`Sampler`]: the loop stays monomorphic, only the call per
/// sample is dynamic.
pub struct Op<F>(pub F);

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
pub fn measure_all(plan: Plan, threads: usize, ops: &[&dyn Sampler]) -> Vec<Measured> {
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

/// Fixed work that touches no shared memory: a chain of eight dependent multiplications
/// (about 2.3 ns a call on the `AMD EPYC`, where consecutive calls overlap). Sampled in turns with each row, its median against its
/// quietest sample shows how much a neighbour slowed the core during that row.
pub fn reference() -> impl Fn() + Sync {
    || {
        let mut x = black_box(0x9e37_79b9_7f4a_7c15u64);
        for _ in 0..8 {
            x = x.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ (x >> 29);
        }
        black_box(x);
    }
}
