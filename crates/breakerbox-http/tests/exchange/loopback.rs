//! For the in-process runners of the exchange table (tower, reqwest): a raw HTTP/1.1
//! upstream on 127.0.0.1 that plays a case's [`Upstream`] byte for byte, and breakers that
//! tell which verdict an adapter recorded. Included with `#[path]` next to `cases.rs`.

#![allow(dead_code)] // each runner uses what it needs
#![allow(clippy::unwrap_used)] // test support: a failed bind ends the test

use std::net::SocketAddr;
use std::time::Duration;

use breakerbox::{CircuitBreaker, Config, Phase, Snapshot, Verdict};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use super::cases::{Case, Upstream};

/// An upstream playing one case; it stops when dropped.
pub struct Loopback {
    /// Where it listens (nothing listens there for [`Upstream::Refuses`]).
    pub addr: SocketAddr,
    task: Option<JoinHandle<()>>,
}

impl Drop for Loopback {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Starts an upstream that plays `upstream` on every connection.
pub async fn serve(upstream: Upstream) -> Loopback {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    if let Upstream::Refuses = upstream {
        drop(listener);
        return Loopback { addr, task: None };
    }
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(play(stream, upstream));
        }
    });
    Loopback {
        addr,
        task: Some(task),
    }
}

/// Reads one request head (the runners send no body), then plays `upstream`.
async fn play(mut stream: TcpStream, upstream: Upstream) {
    let mut seen = Vec::new();
    let mut buffer = [0u8; 1024];
    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => seen.extend_from_slice(&buffer[..n]),
        }
    }
    let head = |status: u16, headers: &[(&str, &str)], len: usize| {
        let mut head = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {len}\r\nconnection: close\r\n"
        );
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        head.into_bytes()
    };
    match upstream {
        Upstream::Answers {
            status,
            headers,
            body,
            delay_ms,
        } => {
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            let mut bytes = head(status, headers, body.len());
            bytes.extend_from_slice(body.as_bytes());
            let _ = stream.write_all(&bytes).await;
        }
        Upstream::TricklesBody {
            status,
            body,
            byte_every_ms,
        } => {
            if stream
                .write_all(&head(status, &[], body.len()))
                .await
                .is_err()
            {
                return;
            }
            for byte in body.as_bytes() {
                tokio::time::sleep(Duration::from_millis(byte_every_ms)).await;
                if stream.write_all(std::slice::from_ref(byte)).await.is_err() {
                    return;
                }
            }
        }
        Upstream::CutsBody { status, body, sent } => {
            let mut bytes = head(status, &[], body.len());
            bytes.extend_from_slice(&body.as_bytes()[..sent.min(body.len())]);
            let _ = stream.write_all(&bytes).await;
        }
        Upstream::HangsUp | Upstream::Refuses => {}
    }
    let _ = stream.flush().await;
    let _ = stream.shutdown().await;
}

/// The breaker config for `case`: a normal case never trips (the window only counts its
/// call); a probe case trips on one failure and recovers quickly, for one probe.
pub fn config_for(case: &Case) -> Config {
    let builder = if case.probe {
        Config::builder()
            .consecutive_failures(1)
            .recovery_timeout(RECOVERY)
            .max_probes(1)
            .required_successes(1)
    } else {
        Config::builder()
            .count_window(100)
            .min_calls(100)
            .failure_rate(1.0)
    };
    builder.build().unwrap()
}

const RECOVERY: Duration = Duration::from_millis(50);

/// Readies `breaker` (built from [`config_for`]) for `case`: for a probe case, trips it
/// and waits until it lets one probe through.
pub async fn ready_for(case: &Case, breaker: &CircuitBreaker) {
    if case.probe {
        breaker.try_acquire().unwrap().record(Verdict::Failure);
        assert_eq!(breaker.phase(), Phase::Open);
        tokio::time::sleep(RECOVERY + Duration::from_millis(20)).await;
    }
}

/// A breaker for `case`, ready for it ([`config_for`], [`ready_for`]).
pub async fn breaker_for(case: &Case) -> CircuitBreaker {
    let breaker = CircuitBreaker::builder()
        .config(config_for(case))
        .build()
        .unwrap();
    ready_for(case, &breaker).await;
    breaker
}

/// The verdict `breaker` recorded for the one call made since `before`, read from its
/// window (a normal case) or from the phase the probe left it in.
pub fn recorded(case: &Case, breaker: &CircuitBreaker, before: &Snapshot) -> Verdict {
    let after = breaker.snapshot();
    if case.probe {
        return match after.phase {
            Phase::Closed => Verdict::Success,
            Phase::Open => Verdict::Failure,
            Phase::HalfOpen => Verdict::Ignore,
            other => panic!("{}: the probe left the breaker {other:?}", case.name),
        };
    }
    let calls = after.window.calls - before.window.calls;
    let failures = after.window.failures - before.window.failures;
    match (calls, failures) {
        (0, 0) => Verdict::Ignore,
        (1, 0) => Verdict::Success,
        (1, 1) => Verdict::Failure,
        other => panic!("{}: the window moved by {other:?}", case.name),
    }
}
