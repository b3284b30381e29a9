//! A real `redis-server` for tests: spawned on a free loopback port, killed on drop, and
//! able to be killed, paused (SIGSTOP), resumed (SIGCONT) and restarted on the same port.

#![allow(dead_code)]
// Tests wait on the real OS clock (a real server starting up), so they may read it.
#![allow(clippy::disallowed_methods)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A redis-server child process.
pub struct RedisServer {
    port: u16,
    child: Option<Child>,
    extra: Vec<String>,
    env: Vec<(String, String)>,
    password: Option<String>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind a free port")
        .local_addr()
        .expect("local addr")
        .port()
}

fn binary() -> String {
    std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_string())
}

impl RedisServer {
    /// Starts a server on a free port and waits until it answers PING.
    pub fn start() -> RedisServer {
        RedisServer::start_with(&[], None)
    }

    /// Starts a server with extra arguments (e.g. an ACL user); `password` is used by the
    /// harness's own commands (`AUTH default <password>`).
    pub fn start_with(extra: &[&str], password: Option<&str>) -> RedisServer {
        RedisServer::start_with_env(extra, password, &[])
    }

    /// Like [`RedisServer::start_with`], with extra environment variables for the server
    /// process (kept for restarts), e.g. an `LD_PRELOAD` shim.
    pub fn start_with_env(
        extra: &[&str],
        password: Option<&str>,
        env: &[(&str, &str)],
    ) -> RedisServer {
        for _ in 0..5 {
            let mut server = RedisServer {
                port: free_port(),
                child: None,
                extra: extra.iter().map(|s| s.to_string()).collect(),
                env: env
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                password: password.map(str::to_string),
            };
            if server.spawn() {
                return server;
            }
        }
        panic!("could not start redis-server (is it installed? set REDIS_SERVER)");
    }

    fn spawn(&mut self) -> bool {
        let child = Command::new(binary())
            .args([
                "--port",
                &self.port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(&self.extra)
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if self.ping() {
                // The port may have been taken meanwhile by another test's server (the
                // free port was only free when asked): it must be this child answering.
                let pid = self.child.as_ref().map(Child::id);
                let info = self.command(&["INFO", "server"]).unwrap_or_default();
                if pid.is_some_and(|pid| info.contains(&format!("process_id:{pid}\r\n"))) {
                    return true;
                }
                self.kill();
                return false;
            }
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(_)) = child.try_wait() {
                    self.child = None;
                    return false;
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill();
        false
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:port/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Whether it answers PING within 200 ms.
    pub fn ping(&self) -> bool {
        self.command(&["PING"])
            .map(|reply| reply.starts_with("+PONG"))
            .unwrap_or(false)
    }

    /// Sends one command over a fresh connection and returns the first reply line (and,
    /// for bulk replies, the payload line), or `None` on failure.
    pub fn command(&self, args: &[&str]) -> Option<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        stream
            .set_read_timeout(Some(Duration::from_millis(500)))
            .ok()?;
        let encode = |args: &[&str]| {
            let mut out = format!("*{}\r\n", args.len());
            for a in args {
                out.push_str(&format!("${}\r\n{}\r\n", a.len(), a));
            }
            out
        };
        let mut out = String::new();
        if let Some(password) = &self.password {
            out.push_str(&encode(&["AUTH", password]));
        }
        out.push_str(&encode(args));
        stream.write_all(out.as_bytes()).ok()?;
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        if self.password.is_some() {
            reader.read_line(&mut line).ok()?;
            line.clear();
        }
        reader.read_line(&mut line).ok()?;
        if let Some(len) = line.strip_prefix('$') {
            let len: i64 = len.trim().parse().ok()?;
            if len < 0 {
                return Some("(nil)".to_string());
            }
            let mut body = vec![0; len as usize + 2];
            reader.read_exact(&mut body).ok()?;
            return Some(String::from_utf8_lossy(&body[..len as usize]).into_owned());
        }
        Some(line.trim_end().to_string())
    }

    /// [`RedisServer::command`], tried up to `tries` times (a server busy with thousands
    /// of breakers may take longer than one try's 500 ms to answer).
    pub fn command_patiently(&self, args: &[&str], tries: usize) -> Option<String> {
        (0..tries.max(1)).find_map(|_| self.command(args))
    }

    /// The calls of `command` in INFO commandstats, asked patiently (`None`: no answer).
    pub fn command_calls_patiently(&self, command: &str) -> Option<u64> {
        let info = self.command_patiently(&["INFO", "commandstats"], 20)?;
        let prefix = format!("cmdstat_{command}:calls=");
        Some(
            info.lines()
                .find_map(|l| l.strip_prefix(&prefix))
                .and_then(|rest| rest.split(',').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0),
        )
    }

    /// Every script call the server ran so far (`EVALSHA`, `EVAL`, their read-only
    /// forms and `SCRIPT LOAD`), as `INFO commandstats` counts them; `None` if it did
    /// not answer.
    pub fn script_calls_patiently(&self) -> Option<u64> {
        let info = self.command_patiently(&["INFO", "commandstats"], 20)?;
        let scripts = ["evalsha", "eval", "evalsha_ro", "eval_ro", "script|load"];
        Some(
            info.lines()
                .filter_map(|l| l.strip_prefix("cmdstat_")?.split_once(":calls="))
                .filter(|(name, _)| scripts.contains(name))
                .filter_map(|(_, rest)| rest.split(',').next()?.parse::<u64>().ok())
                .sum(),
        )
    }

    /// Kills the server (SIGKILL) and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn signal(&self, sig: &str) {
        if let Some(child) = &self.child {
            let _ = Command::new("kill")
                .args([sig, &child.id().to_string()])
                .status();
        }
    }

    /// Freezes the server (SIGSTOP): connections stay open, nothing answers.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Thaws a paused server (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    /// Starts a fresh, empty server on the same port (after [`RedisServer::kill`]).
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if self.spawn() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("could not restart redis-server on port {}", self.port);
    }

    /// A field of INFO commandstats: the number of calls of `command` (lower case).
    pub fn command_calls(&self, command: &str) -> u64 {
        let info = self.info("commandstats");
        let prefix = format!("cmdstat_{command}:calls=");
        info.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|rest| rest.split(',').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }

    /// The total of every command's calls in INFO commandstats.
    /// Calls so far per command (`INFO commandstats`), by command name.
    pub fn calls_by_command(&self) -> std::collections::BTreeMap<String, u64> {
        self.info("commandstats")
            .lines()
            .filter_map(|l| {
                let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(":calls=")?;
                Some((
                    name.to_string(),
                    rest.split(',').next()?.parse::<u64>().ok()?,
                ))
            })
            .collect()
    }

    pub fn total_command_calls(&self) -> u64 {
        self.info("commandstats")
            .lines()
            .filter_map(|l| l.split_once(":calls="))
            .filter_map(|(_, rest)| rest.split(',').next()?.parse::<u64>().ok())
            .sum()
    }

    /// Redis `TIME` as the server sees it, in microseconds (through a script, so it is
    /// the time the breaker's scripts read).
    pub fn time_us(&self) -> Option<u64> {
        let script = "local t = redis.call('TIME') return t[1] * 1000000 + t[2]";
        let reply = self.command(&["EVAL", script, "0"])?;
        reply.strip_prefix(':')?.parse().ok()
    }

    /// The text of `INFO section`.
    pub fn info(&self, section: &str) -> String {
        self.command(&["INFO", section]).unwrap_or_default()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.resume();
        self.kill();
    }
}
