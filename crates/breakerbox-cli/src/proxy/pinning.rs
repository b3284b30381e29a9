//! Each worker thread on a CPU of its own (`pin_workers = true`).
//!
//! A worker serves its connections alone: while it waits for a CPU, every one of them
//! waits. Left to the scheduler, two workers on a 2-CPU machine shared one CPU a third
//! to a half of the time under load (the wake-ups of clients and upstreams pull a worker
//! next to them), and then one waited a whole time slice for the other: 3-4 ms stalls.
//! Pinned, the workers never queue behind each other, at the price of the scheduler no
//! longer moving them to a CPU that is free (BENCHMARKS.md, "Worker threads and CPUs":
//! with one worker per CPU, pinning cut the HTTP/1.1 p99 from 2.60 to 1.54 ms in one
//! run and cost 2-3 % of throughput). Off by default: the default of two workers per CPU
//! (`proxy.rs`) shortens the stalls without taking placement from the scheduler.
//!
//! With more workers than allowed CPUs, worker `i` goes to the `i`-th allowed CPU, round
//! robin.

/// The CPU each of `workers` workers is pinned to, in worker order, or `None` when there
/// is none to pin to. `allowed` is the process's CPUs, in increasing order.
///
/// ```text
/// plan(2, &[0, 1]) == Some([0, 1])
/// plan(3, &[4, 5]) == Some([4, 5, 4])
/// ```
fn plan(workers: usize, allowed: &[usize]) -> Option<Vec<usize>> {
    if allowed.is_empty() || workers == 0 {
        return None;
    }
    Some((0..workers).map(|i| allowed[i % allowed.len()]).collect())
}

/// The CPU of each of `workers` workers under `pin_workers = pin`, or `None` to leave
/// them to the scheduler. Not knowing the allowed CPUs is an error only when pinning.
pub fn placement(pin: bool, workers: usize) -> anyhow::Result<Option<Vec<usize>>> {
    if !pin {
        return Ok(None);
    }
    let allowed = allowed_cpus().map_err(|e| {
        anyhow::anyhow!("pin_workers: cannot read the CPUs this process may use: {e}")
    })?;
    Ok(plan(workers, &allowed))
}

/// The CPUs this thread may run on (those of the process, for the thread that starts
/// the workers), in increasing order.
#[cfg(target_os = "linux")]
fn allowed_cpus() -> std::io::Result<Vec<usize>> {
    let set = rustix::thread::sched_getaffinity(None)?;
    Ok((0..rustix::thread::CpuSet::MAX_CPU)
        .filter(|&cpu| set.is_set(cpu))
        .collect())
}

/// Not Linux: no affinity to read, so `pin_workers = true` refuses to start.
#[cfg(not(target_os = "linux"))]
fn allowed_cpus() -> std::io::Result<Vec<usize>> {
    Err(std::io::ErrorKind::Unsupported.into())
}

/// Restricts the calling thread to `cpu`.
#[cfg(target_os = "linux")]
pub fn pin_current_thread(cpu: usize) -> std::io::Result<()> {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set)?;
    Ok(())
}

/// Not Linux: pinning is not supported.
#[cfg(not(target_os = "linux"))]
pub fn pin_current_thread(_cpu: usize) -> std::io::Result<()> {
    Err(std::io::ErrorKind::Unsupported.into())
}

/// "0,1,2" for the start-up line.
pub fn describe(cpus: &[usize]) -> String {
    cpus.iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_go_round_robin_over_the_allowed_cpus() {
        assert_eq!(plan(2, &[0, 1]), Some(vec![0, 1]));
        assert_eq!(plan(2, &[2, 5]), Some(vec![2, 5]));
        assert_eq!(plan(3, &[4, 5]), Some(vec![4, 5, 4]));
        assert_eq!(plan(1, &[4, 5]), Some(vec![4]));
        assert_eq!(plan(2, &[]), None);
        assert_eq!(plan(0, &[0, 1]), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_thread_pinned_to_an_allowed_cpu_runs_only_there() {
        let allowed = allowed_cpus().expect("read the affinity");
        let last = *allowed.last().expect("at least one CPU");
        let seen = std::thread::spawn(move || {
            pin_current_thread(last).expect("pin");
            allowed_cpus().expect("read the affinity")
        })
        .join()
        .expect("the thread ran");
        assert_eq!(seen, vec![last]);
        // Other threads are untouched.
        assert_eq!(allowed_cpus().expect("read the affinity"), allowed);
    }
}
