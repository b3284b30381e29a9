//! What a process tree costs the machine, read from /proc: CPU time and run-queue wait
//! (`/proc/PID/task/TID/schedstat`, in ns) and context switches (`/proc/PID/task/TID/status`), summed over a process, its
//! descendants (nginx's workers) and all their threads. Linux only; zero elsewhere.

use std::fs;

/// Counters of a process tree at one moment.
#[derive(Clone, Copy, Default)]
pub struct Usage {
    cpu_ns: f64,
    runqueue_ns: f64,
    voluntary: f64,
    involuntary: f64,
}

/// A difference of [`Usage`] divided by a number of requests.
#[derive(Clone, Copy, Default)]
pub struct PerRequest {
    pub cpu_us: f64,
    pub runqueue_us: f64,
    pub voluntary: f64,
    pub involuntary: f64,
}

fn children(pid: u32) -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| {
            fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|stat| {
                    // The field after the parenthesised command name and the state.
                    let rest = &stat[stat.rfind(')')? + 2..];
                    rest.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(pid)
        })
        .collect()
}

fn field(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

impl Usage {
    /// The counters of `pid`, its descendants and their threads.
    pub fn of_tree(pid: u32) -> Usage {
        let mut total = Usage::default();
        let mut todo = vec![pid];
        while let Some(p) = todo.pop() {
            total.add_process(p);
            todo.extend(children(p));
        }
        total
    }

    fn add_process(&mut self, pid: u32) {
        let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
            return;
        };
        for task in tasks.flatten() {
            let path = task.path();
            if let Ok(stat) = fs::read_to_string(path.join("schedstat")) {
                let mut it = stat
                    .split_whitespace()
                    .map(|v| v.parse::<f64>().unwrap_or(0.0));
                self.cpu_ns += it.next().unwrap_or(0.0);
                self.runqueue_ns += it.next().unwrap_or(0.0);
            }
            if let Ok(status) = fs::read_to_string(path.join("status")) {
                self.voluntary += field(&status, "voluntary_ctxt_switches:");
                self.involuntary += field(&status, "nonvoluntary_ctxt_switches:");
            }
        }
    }

    /// What happened between `before` and `self`. Threads that ended meanwhile are lost
    /// (none of the targets start or stop threads under load).
    pub fn since(&self, before: &Usage) -> Usage {
        Usage {
            cpu_ns: self.cpu_ns - before.cpu_ns,
            runqueue_ns: self.runqueue_ns - before.runqueue_ns,
            voluntary: self.voluntary - before.voluntary,
            involuntary: self.involuntary - before.involuntary,
        }
    }

    /// Per request, for `requests` requests.
    pub fn per(&self, requests: f64) -> PerRequest {
        let n = requests.max(1.0);
        PerRequest {
            cpu_us: self.cpu_ns / n / 1000.0,
            runqueue_us: self.runqueue_ns / n / 1000.0,
            voluntary: self.voluntary / n,
            involuntary: self.involuntary / n,
        }
    }
}

impl PerRequest {
    /// Each counter's median over `runs` (none for no runs).
    pub fn median(runs: &[PerRequest]) -> Option<PerRequest> {
        if runs.is_empty() {
            return None;
        }
        let pick = |f: fn(&PerRequest) -> f64| {
            let mut v: Vec<f64> = runs.iter().map(f).collect();
            super::median(&mut v)
        };
        Some(PerRequest {
            cpu_us: pick(|r| r.cpu_us),
            runqueue_us: pick(|r| r.runqueue_us),
            voluntary: pick(|r| r.voluntary),
            involuntary: pick(|r| r.involuntary),
        })
    }
}
