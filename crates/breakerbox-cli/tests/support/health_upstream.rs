//! A loopback HTTP/1.1 upstream with a health path of its own: it answers the health
//! path and every other path with separately scripted statuses, and counts each kind of
//! request (method and path kept), so a test can tell health checks from real requests.

#![allow(dead_code)]
// Test code: a poisoned lock or an absurd delay is a test bug.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// The upstream; `health` is its health path.
pub struct HealthUpstream {
    pub addr: SocketAddr,
    state: Arc<State>,
}

#[derive(Default)]
struct State {
    health: String,
    real_status: AtomicU16,
    health_status: AtomicU16,
    health_delay_ms: AtomicU64,
    /// (method, target) of every request, in arrival order.
    seen: Mutex<Vec<(String, String)>>,
}

impl HealthUpstream {
    /// Answers 200 everywhere, `health` being the health path.
    pub fn start(health: &str) -> HealthUpstream {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind upstream");
        let addr = listener.local_addr().expect("upstream addr");
        let state = Arc::new(State {
            health: health.to_string(),
            real_status: AtomicU16::new(200),
            health_status: AtomicU16::new(200),
            ..State::default()
        });
        let s = state.clone();
        thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let s = s.clone();
                thread::spawn(move || serve(stream, &s));
            }
        });
        HealthUpstream { addr, state }
    }

    /// Real requests (any path but the health path) get `status` from now on.
    pub fn real(&self, status: u16) {
        self.state.real_status.store(status, Ordering::SeqCst);
    }

    /// The health path answers `status` after `delay` from now on.
    pub fn health(&self, status: u16, delay: Duration) {
        self.state.health_status.store(status, Ordering::SeqCst);
        let ms = u64::try_from(delay.as_millis()).unwrap();
        self.state.health_delay_ms.store(ms, Ordering::SeqCst);
    }

    /// Requests to any path but the health path so far.
    pub fn real_requests(&self) -> Vec<(String, String)> {
        let seen = self.state.seen.lock().unwrap();
        seen.iter()
            .filter(|(_, t)| *t != self.state.health)
            .cloned()
            .collect()
    }

    /// Requests to the health path so far (their methods).
    pub fn checks(&self) -> Vec<String> {
        let seen = self.state.seen.lock().unwrap();
        seen.iter()
            .filter(|(_, t)| *t == self.state.health)
            .map(|(m, _)| m.clone())
            .collect()
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

fn serve(stream: TcpStream, state: &State) {
    let mut writer = match stream.try_clone() {
        Ok(w) => w,
        Err(_) => return,
    };
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut words = line.split_whitespace();
        let method = words.next().unwrap_or("").to_string();
        let target = words.next().unwrap_or("").to_string();
        let mut length = 0usize;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let health = target == state.health;
        state.seen.lock().unwrap().push((method, target));
        let status = if health {
            let delay = state.health_delay_ms.load(Ordering::SeqCst);
            thread::sleep(Duration::from_millis(delay));
            state.health_status.load(Ordering::SeqCst)
        } else {
            state.real_status.load(Ordering::SeqCst)
        };
        let answer = format!("HTTP/1.1 {status} X\r\ncontent-length: 2\r\n\r\nok");
        if writer.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}
