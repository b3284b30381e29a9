//! One exchange with an upstream up to its response head, bounded by `request_timeout`.
//! The time charged to the upstream excludes the time spent waiting on the client's
//! request body, and a failure the client caused is reported as the client's.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use breakerbox::{Clock, MonotonicClock, Nanos};
use http::uri::Authority;
use http::{Request, Response};
use tokio::time::Sleep;

use super::body::ProxyBody;
use super::in_place;
use super::pool::{Lent, Pool, SendError};
use super::pool_h2::H2Pool;
use super::upload::{ClientFault, UploadState};
use super::upstream_body::UpstreamBody;
use breakerbox::contract::{BreakerPermit, DynPermit};

/// How an exchange failed before a response head arrived.
#[derive(Debug)]
pub enum Failed {
    /// The client's fault: never judged against the upstream.
    Client(ClientFault),
    /// The upstream took longer than `request_timeout` (its own time only).
    Timeout,
    /// The upstream failed, after this much of its own time.
    Upstream(SendError, Duration),
    /// A keep-alive race that could not be retried: answered 502, not judged.
    Race(SendError),
}

/// A response head, the connection it came on, and the time charged to the upstream.
pub struct Head {
    /// The response, its body still unread.
    pub response: Response<UpstreamBody>,
    /// The HTTP/1.1 connection, to give back at the end of the body (`None` for a stream
    /// of a shared HTTP/2 connection).
    pub lent: Option<Lent>,
    /// Time from sending to the head, minus the time spent waiting on the client.
    pub latency: Duration,
    /// Time from sending to the head, all of it: what a caller's own deadline runs in.
    pub elapsed: Duration,
}

/// The clock time charged to the upstream between `started` and `now`.
pub fn charged(started: Nanos, now: Nanos, upload: Option<&UploadState>) -> Duration {
    let elapsed = now.saturating_sub(started).as_duration();
    match upload {
        Some(u) => elapsed.saturating_sub(u.client_time(now)),
        None => elapsed,
    }
}

/// How long a half-open probe may wait on its client's body before its permit goes back:
/// probes are few, and a client that holds one while it stalls would keep the breaker
/// from closing (or, past the half-open deadline, re-open it).
const PROBE_CLIENT_PATIENCE: Duration = Duration::from_secs(1);

/// A client that has sent nothing of its unfinished body for this long when the upstream
/// gives up (an error, or a 408) is the one at fault: servers time out stalled bodies too.
const CLIENT_STALLED: Duration = Duration::from_millis(100);

/// Waits for `timer` (forever without one).
async fn patiently(timer: &mut Option<Pin<Box<Sleep>>>) {
    match timer {
        Some(timer) => timer.as_mut().await,
        None => std::future::pending().await,
    }
}

/// Sends `request` to upstream `slot` (over HTTP/2 when `h2` has it) and waits for the response head, at most `timeout`
/// of the upstream's own time. A probe `ticket` whose client makes the exchange wait
/// longer than [`PROBE_CLIENT_PATIENCE`] is released (taken out of `ticket`).
#[allow(clippy::too_many_arguments)]
pub async fn send(
    pool: &Arc<Pool>,
    h2: &H2Pool,
    slot: usize,
    authority: &Authority,
    request: Request<ProxyBody>,
    upload: Option<&UploadState>,
    timeout: Duration,
    ticket: &mut Option<DynPermit>,
) -> Result<Head, Failed> {
    let clock = MonotonicClock;
    let started = clock.now();
    let client_fault = || upload.and_then(UploadState::fault).map(Failed::Client);
    let sending = async {
        match h2.get(slot) {
            None => pool.send(slot, authority, request).await,
            // Boxed: the HTTP/1.1 path's state stays as small as it was.
            Some(h2) => in_place::pinned(|| h2.send(authority, request))
                .await
                .map(|response| (response.map(UpstreamBody::Hyper), None)),
        }
    };
    tokio::pin!(sending);
    let sleep = tokio::time::sleep(timeout);
    tokio::pin!(sleep);
    // Only a probe with a body to upload is watched (no timer otherwise).
    let watched = upload.filter(|_| ticket.as_ref().is_some_and(DynPermit::is_probe));
    let mut patience = watched.map(|_| Box::pin(tokio::time::sleep(PROBE_CLIENT_PATIENCE)));
    loop {
        tokio::select! {
            biased;
            sent = &mut sending => {
                let now = clock.now();
                let latency = charged(started, now, upload);
                let elapsed = now.saturating_sub(started).as_duration();
                let stalled = upload.is_some_and(|u| u.stalled(now, CLIENT_STALLED));
                return match sent {
                    Ok((response, lent)) => {
                        if stalled && response.status() == http::StatusCode::REQUEST_TIMEOUT {
                            // The upstream timed out the client's body: not judged.
                            drop(ticket.take());
                        }
                        Ok(Head {
                            response,
                            lent,
                            latency,
                            elapsed,
                        })
                    }
                    Err(_) if stalled && client_fault().is_none() => {
                        Err(Failed::Client(ClientFault::Stalled))
                    }
                    Err(error) => Err(client_fault().unwrap_or(match error {
                        race @ SendError::Race(_) => Failed::Race(race),
                        error => Failed::Upstream(error, latency),
                    })),
                };
            }
            () = &mut sleep => {
                if let Some(fault) = client_fault() {
                    return Err(fault);
                }
                let used = charged(started, clock.now(), upload);
                if used >= timeout {
                    return Err(Failed::Timeout);
                }
                // The client held things up: the upstream gets that time back.
                let deadline = sleep.deadline() + (timeout - used);
                sleep.as_mut().reset(deadline);
            }
            () = patiently(&mut patience), if patience.is_some() && ticket.is_some() => {
                let waited = watched.map_or(Duration::ZERO, |u| u.current_wait(clock.now()));
                if waited >= PROBE_CLIENT_PATIENCE {
                    // Unjudged from here on: the slot goes to a probe that can report.
                    drop(ticket.take());
                } else if let Some(timer) = &mut patience {
                    let deadline = timer.deadline() + (PROBE_CLIENT_PATIENCE - waited);
                    timer.as_mut().reset(deadline);
                }
            }
        }
    }
}
