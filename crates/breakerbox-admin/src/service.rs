//! [`AdminService`]: the tower `Service` that answers every admin request.

use std::convert::Infallible;
use std::fmt;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use breakerbox::contract::{Breaker, DynError};
use breakerbox::{Clock, MonotonicClock, Nanos};
use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_SECURITY_POLICY, REFERRER_POLICY, X_FRAME_OPTIONS};
use http::{Method, Request, Response, StatusCode};
use http_body::Body;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde_json::json;

use crate::access::Access;
use crate::route::{self, Action, Route};
use crate::source::{Listed, Sources};
use crate::status;
use crate::transitions::TransitionLog;
use crate::{exposition, reply, AdminBody, AdminServiceBuilder};

/// Renders `/metrics`: Prometheus text exposition, format 0.0.4.
pub(crate) type Renderer = Arc<dyn Fn() -> String + Send + Sync>;

/// What a status section answers at each request.
pub(crate) type Section = Arc<dyn Fn() -> serde_json::Value + Send + Sync>;

/// The body of an action (`{"for": "10m"}`) is read up to this many bytes.
const MAX_BODY: usize = 4096;
/// ... and for at most this long.
const BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// The peer address of a request, inserted into its extensions by the server that accepted
/// the connection. Without a token, actions are allowed from a loopback peer only, so
/// without a known peer they are refused. (With the `axum` feature, axum's
/// `ConnectInfo<SocketAddr>` is read too.)
///
/// ```
/// use breakerbox_admin::PeerAddr;
///
/// let mut request = http::Request::new(String::new());
/// request.extensions_mut().insert(PeerAddr("127.0.0.1:50000".parse().unwrap()));
/// ```
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct PeerAddr(pub SocketAddr);

/// The admin service: status JSON, Prometheus metrics, the live dashboard and the manual
/// operations, for every breaker of its sources. Build one with [`AdminService::builder`].
///
/// A tower [`Service`](tower_service::Service) for any request body; it is always ready,
/// never fails (errors are HTTP answers), and cloning it is cheap. Serve it with hyper
/// (`hyper_util::service::TowerToHyperService`), mount it in axum
/// ([`router`](crate::router) with the `axum` feature, or `Router::nest_service`), or call
/// [`AdminService::handle`] from a server of your own. It needs a tokio runtime with time
/// enabled: engine operations and request bodies are bounded in time.
///
/// See the [crate docs](crate) for the routes and the rules of access.
#[derive(Clone)]
pub struct AdminService {
    pub(crate) shared: Arc<Shared>,
    /// The path prefix it answers under (`""` or e.g. `/admin`).
    pub(crate) prefix: Arc<str>,
}

/// What every clone of a service shares.
pub(crate) struct Shared {
    pub(crate) sources: Sources,
    pub(crate) access: Access,
    pub(crate) metrics: Option<Renderer>,
    pub(crate) transitions: Option<TransitionLog>,
    pub(crate) page: Bytes,
    pub(crate) timeout: Duration,
    /// Keys added to the status document ([`crate::AdminServiceBuilder::status_section`]).
    pub(crate) sections: Vec<(String, Section)>,
    pub(crate) clock: MonotonicClock,
    pub(crate) started: Nanos,
}

impl fmt::Debug for AdminService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdminService")
            .field("prefix", &self.prefix)
            .field("sources", &self.shared.sources.0.len())
            .field("access", &self.shared.access)
            .field("metrics", &self.shared.metrics.is_some())
            .field("transitions", &self.shared.transitions)
            .field("timeout", &self.shared.timeout)
            .finish()
    }
}

impl AdminService {
    /// A builder with no breakers, no token, no prefix, and `/metrics` written from the
    /// breakers' phases.
    pub fn builder() -> AdminServiceBuilder {
        AdminServiceBuilder::new()
    }

    /// The path prefix the service answers under: `""`, or e.g. `/admin`.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Every breaker the service serves now (each name once, first source first).
    pub fn breakers(&self) -> Vec<Listed> {
        self.shared.sources.list()
    }

    /// The same service answering at the root: what axum's `nest_service` mounts (it
    /// strips the prefix itself).
    #[cfg(feature = "axum")]
    pub(crate) fn without_prefix(&self) -> AdminService {
        AdminService {
            shared: self.shared.clone(),
            prefix: Arc::from(""),
        }
    }

    /// Answers one request. Never panics; every failure is an HTTP answer with a JSON body
    /// saying why.
    pub async fn handle<B>(&self, request: Request<B>) -> Response<AdminBody>
    where
        B: Body,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let shared = &self.shared;
        if let Err(why) = shared.access.check_host(request.headers()) {
            return reply::denied(why);
        }
        let path = request.uri().path().to_owned();
        let Some(rest) = under_prefix(&path, &self.prefix) else {
            return reply::not_found(&path);
        };
        let read = matches!(*request.method(), Method::GET | Method::HEAD);
        match route::route(rest) {
            Route::Dashboard | Route::Status | Route::Metrics if !read => {
                reply::method_not_allowed("GET, HEAD")
            }
            Route::Dashboard => self.dashboard(),
            Route::Status => self.status().await,
            Route::Metrics => self.metrics(),
            Route::Action { name, action } => self.action(request, &name, action).await,
            Route::UnknownAction => reply::error(
                StatusCode::NOT_FOUND,
                "not_found",
                None,
                Some(route::ACTIONS),
            ),
            Route::BadName => reply::bad_parameter(
                "name",
                "the breaker name is not valid percent-encoded UTF-8",
            ),
            Route::NotFound => reply::not_found(&path),
        }
    }

    /// Checks a state-changing request of the application's own (a route this service
    /// does not answer, such as a proxy's `POST /reload`) under the rules of the service's
    /// actions: `Host` names the service, `Origin` (when sent) matches it, and the admin
    /// token is sent, or without a token the peer is loopback and the content type is JSON
    /// (see the crate docs). `Some` is the refusal to send (401 or 403, with a JSON body);
    /// `None`, the request may go on.
    pub fn refuse_action<B>(&self, request: &Request<B>) -> Option<Response<AdminBody>> {
        self.shared
            .access
            .check_action(request.headers(), peer(request))
            .err()
            .map(reply::denied)
    }

    fn dashboard(&self) -> Response<AdminBody> {
        let mut response = reply::text(
            StatusCode::OK,
            "text/html; charset=utf-8",
            self.shared.page.clone(),
        );
        let headers = response.headers_mut();
        // The page runs only its own inline script, talks only to this service, and may not
        // be framed (a framing page could trick a click on "trip").
        headers.insert(
            CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(
                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                 connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
            ),
        );
        headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
        headers.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
        response
    }

    async fn status(&self) -> Response<AdminBody> {
        let shared = &self.shared;
        let uptime = shared.clock.now().saturating_sub(shared.started);
        let mut document = status::document(
            shared.sources.list(),
            shared.transitions.as_ref(),
            uptime.as_duration(),
            shared.timeout,
        )
        .await;
        if let serde_json::Value::Object(map) = &mut document {
            for (key, section) in &shared.sections {
                map.insert(key.clone(), section());
            }
        }
        reply::json(StatusCode::OK, &document)
    }

    fn metrics(&self) -> Response<AdminBody> {
        let text = match &self.shared.metrics {
            Some(render) => render(),
            None => exposition::states(&self.shared.sources.list()),
        };
        reply::text(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            text,
        )
    }

    /// `POST /breakers/{name}/{action}`: the method, then the guard, then the parameters
    /// (the body is read only for a request that passed the guard), then the breaker.
    async fn action<B>(
        &self,
        request: Request<B>,
        name: &str,
        action: Action,
    ) -> Response<AdminBody>
    where
        B: Body,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        if request.method() != Method::POST {
            return reply::method_not_allowed("POST");
        }
        let shared = &self.shared;
        if let Err(why) = shared
            .access
            .check_action(request.headers(), peer(&request))
        {
            return reply::denied(why);
        }
        let query = request.uri().query().map(str::to_owned);
        let body = match read_body(request.into_body()).await {
            Ok(body) => body,
            Err(response) => return response,
        };
        let duration = match route::duration_for(action, query.as_deref(), &body) {
            Ok(duration) => duration,
            Err(bad) => return reply::bad_parameter(&bad.parameter, &bad.detail),
        };
        let Some(listed) = shared.sources.find(name) else {
            return reply::error(StatusCode::NOT_FOUND, "unknown_breaker", Some(name), None);
        };
        let breaker = listed.breaker();
        type Operation = Pin<Box<dyn Future<Output = Result<(), DynError>> + Send>>;
        let operation: Operation = match (action, duration) {
            (Action::Trip, None) => Box::pin(breaker.force_open()),
            (Action::Trip, Some(d)) => Box::pin(breaker.force_open_for(d)),
            (Action::Disable, None) => Box::pin(breaker.disable()),
            (Action::Disable, Some(d)) => Box::pin(breaker.disable_for(d)),
            (Action::Reset, _) => Box::pin(breaker.reset()),
            (Action::Shadow, _) => Box::pin(breaker.set_shadow(true)),
            (Action::Unshadow, _) => Box::pin(breaker.set_shadow(false)),
        };
        let done = match tokio::time::timeout(shared.timeout, operation).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(status::chain(&error)),
            Err(_) => Err(format!("timed out after {:?}", shared.timeout)),
        };
        match done {
            Ok(()) => reply::json(
                StatusCode::OK,
                &json!({
                    "ok": true,
                    "breaker": name,
                    "action": action.as_str(),
                    "for_ms": duration.map(status::ms),
                    "phase": breaker.phase().as_str(),
                }),
            ),
            Err(error) => reply::error(
                StatusCode::BAD_GATEWAY,
                "action_failed",
                Some(name),
                Some(&error),
            ),
        }
    }
}

/// The part of `path` under `prefix`, if it is under it (`/admin` and `/admin/...` are;
/// `/administrator` is not).
fn under_prefix<'a>(path: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = path.strip_prefix(prefix)?;
    (rest.is_empty() || rest.starts_with('/')).then_some(rest)
}

/// The peer's address, as the server recorded it in the request's extensions.
fn peer<B>(request: &Request<B>) -> Option<IpAddr> {
    let extensions = request.extensions();
    if let Some(PeerAddr(addr)) = extensions.get::<PeerAddr>() {
        return Some(addr.ip());
    }
    #[cfg(feature = "axum")]
    if let Some(info) = extensions.get::<axum::extract::ConnectInfo<SocketAddr>>() {
        return Some(info.0.ip());
    }
    None
}

/// The whole body, bounded in size and time; the answer to send when it cannot be had.
async fn read_body<B>(body: B) -> Result<Bytes, Response<AdminBody>>
where
    B: Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    if body.is_end_stream() {
        return Ok(Bytes::new());
    }
    if body.size_hint().lower() > MAX_BODY as u64 {
        return Err(too_large());
    }
    match tokio::time::timeout(BODY_TIMEOUT, Limited::new(body, MAX_BODY).collect()).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(error)) if error.is::<LengthLimitError>() => Err(too_large()),
        Ok(Err(_)) => Err(reply::error(
            StatusCode::BAD_REQUEST,
            "bad_request",
            None,
            Some("the request body could not be read"),
        )),
        Err(_) => Err(reply::error(
            StatusCode::REQUEST_TIMEOUT,
            "request_timeout",
            None,
            Some("the request body did not arrive in time"),
        )),
    }
}

fn too_large() -> Response<AdminBody> {
    reply::error(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        None,
        Some("an action's body is at most 4096 bytes"),
    )
}

/// The future of [`AdminService`]'s `call`: the response, never an error.
pub struct ResponseFuture {
    inner: Pin<Box<dyn Future<Output = Response<AdminBody>> + Send>>,
}

impl fmt::Debug for ResponseFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ResponseFuture")
    }
}

impl Future for ResponseFuture {
    type Output = Result<Response<AdminBody>, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inner.as_mut().poll(cx).map(Ok)
    }
}

impl<B> tower_service::Service<Request<B>> for AdminService
where
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = Response<AdminBody>;
    type Error = Infallible;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> ResponseFuture {
        let service = self.clone();
        ResponseFuture {
            inner: Box::pin(async move { service.handle(request).await }),
        }
    }
}
