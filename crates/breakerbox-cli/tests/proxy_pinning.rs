//! `breakerbox proxy`'s worker threads on CPUs of their own (`pin_workers`): read back
//! from the running process's threads (`/proc/PID/task/TID/status`).

#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)]

#[path = "support/proxy_harness.rs"]
mod harness;

use harness::{admin_post, check, get, listeners, temp_dir, write, ProxyProcess, Upstream};

/// The CPUs in a `Cpus_allowed_list` ("0-3,6").
fn cpu_list(list: &str) -> Vec<usize> {
    let mut cpus = Vec::new();
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(a.parse::<usize>().unwrap()..=b.parse().unwrap()),
            None => cpus.push(part.parse().unwrap()),
        }
    }
    cpus
}

fn allowed(status: &str) -> Vec<usize> {
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap();
    cpu_list(line)
}

/// The CPUs this test process may run on (the proxy it starts inherits them).
fn own_cpus() -> Vec<usize> {
    allowed(&std::fs::read_to_string("/proc/self/status").unwrap())
}

/// Each `proxy-worker-N` thread of `pid` with its allowed CPUs, in worker order.
fn workers(pid: u32) -> Vec<(String, Vec<usize>)> {
    let mut found = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let path = task.unwrap().path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap();
        let comm = comm.trim();
        if comm.starts_with("proxy-worker-") {
            let status = std::fs::read_to_string(path.join("status")).unwrap();
            found.push((comm.to_string(), allowed(&status)));
        }
    }
    found.sort_by_key(|(name, _)| {
        name.trim_start_matches("proxy-worker-")
            .parse::<usize>()
            .unwrap()
    });
    found
}

fn config(upstream: &Upstream, head: &str) -> String {
    format!(
        "{head}\n{}[[upstream]]\nname = \"a\"\nroute = \"/\"\nurl = \"{}\"\n",
        listeners(),
        upstream.url()
    )
}

#[test]
fn pinned_workers_get_a_cpu_each_and_the_other_threads_keep_every_cpu() {
    let upstream = Upstream::start();
    let cpus = own_cpus();
    let dir = temp_dir("pin-each");
    let head = format!("workers = {}\npin_workers = true", cpus.len());
    let proxy = ProxyProcess::start(&dir, &config(&upstream, &head));
    let seen = workers(proxy.pid());
    assert_eq!(seen.len(), cpus.len(), "{seen:?}");
    for ((name, on), cpu) in seen.iter().zip(&cpus) {
        assert_eq!(on, &vec![*cpu], "{name} is not pinned to CPU {cpu}");
    }
    let listed: Vec<String> = cpus.iter().map(usize::to_string).collect();
    assert!(
        proxy
            .stderr()
            .contains(&format!("worker(s) on CPUs {},", listed.join(","))),
        "{}",
        proxy.stderr()
    );
    // The main thread (the admin listener, Redis work) keeps every CPU.
    let main = std::fs::read_to_string(format!("/proc/{}/status", proxy.pid())).unwrap();
    assert_eq!(allowed(&main), cpus);
    assert_eq!(get(proxy.addr, "/x").status, 200);
}

#[test]
fn more_workers_than_cpus_are_pinned_round_robin() {
    let upstream = Upstream::start();
    let cpus = own_cpus();
    let n = cpus.len() + 1;
    let dir = temp_dir("pin-round-robin");
    let head = format!("workers = {n}\npin_workers = true");
    let proxy = ProxyProcess::start(&dir, &config(&upstream, &head));
    let seen = workers(proxy.pid());
    let expected: Vec<Vec<usize>> = (0..n).map(|i| vec![cpus[i % cpus.len()]]).collect();
    assert_eq!(
        seen.into_iter().map(|(_, on)| on).collect::<Vec<_>>(),
        expected
    );
    assert_eq!(get(proxy.addr, "/x").status, 200);
}

#[test]
fn by_default_two_workers_per_cpu_run_unpinned() {
    let upstream = Upstream::start();
    let cpus = own_cpus();
    // What the proxy counts (its affinity and CPU quota), as this test process sees it.
    let expected = std::thread::available_parallelism().unwrap().get() * 2;
    let dir = temp_dir("pin-default");
    let proxy = ProxyProcess::start(&dir, &config(&upstream, ""));
    let seen = workers(proxy.pid());
    assert_eq!(seen.len(), expected, "{seen:?}");
    assert!(seen.iter().all(|(_, on)| on == &cpus), "{seen:?}");
    assert!(
        proxy
            .stderr()
            .contains(&format!("{expected} worker(s), at most")),
        "{}",
        proxy.stderr()
    );
    assert_eq!(get(proxy.addr, "/x").status, 200);

    let dir = temp_dir("pin-never");
    let head = format!("workers = {}\npin_workers = false", cpus.len());
    let proxy = ProxyProcess::start(&dir, &config(&upstream, &head));
    let seen = workers(proxy.pid());
    assert_eq!(seen.len(), cpus.len());
    assert!(seen.iter().all(|(_, on)| on == &cpus), "{seen:?}");
}

#[test]
fn a_bad_pin_workers_is_an_error_naming_the_key_and_cannot_change_on_reload() {
    let upstream = Upstream::start();
    let dir = temp_dir("pin-config");
    for bad in [
        "pin_workers = \"yes\"",
        "pin_workers = \"auto\"",
        "pin_workers = 2",
    ] {
        let (ok, stderr) = check(&dir, "bad.toml", &config(&upstream, bad));
        assert!(!ok, "{bad} passed --check");
        assert!(
            stderr.contains("pin_workers: expected a boolean (true or false), found "),
            "{stderr}"
        );
    }
    for good in ["pin_workers = true", "pin_workers = false"] {
        let (ok, stderr) = check(&dir, "good.toml", &config(&upstream, good));
        assert!(ok, "{good}: {stderr}");
    }

    let proxy = ProxyProcess::start(&dir, &config(&upstream, "workers = 1"));
    write(
        &dir,
        "proxy.toml",
        &config(&upstream, "workers = 1\npin_workers = true"),
    );
    let reply = admin_post(proxy.admin, "/reload", &[]);
    assert_eq!(reply.status, 422, "{reply:?}");
    let errors = reply.json()["errors"].to_string();
    assert!(
        errors.contains("pin_workers: cannot change on reload")
            && errors.contains("running with `pin_workers = false`; the file asks for true"),
        "{errors}"
    );
    assert_eq!(get(proxy.addr, "/x").status, 200);
}
