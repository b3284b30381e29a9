//! The service as an [`axum::Router`] (feature `axum`).

use axum::Router;

use crate::AdminService;

/// `service` as an axum `Router`, to `merge` into an application's router: nested under
/// the service's prefix (`Router::nest_service`, so the rest of the application keeps
/// its own routes and fallback), or as the fallback when it has none. The state type is
/// the application's; the service needs none.
///
/// Serve the application with `into_make_service_with_connect_info::<SocketAddr>()` so
/// that the service knows the peer (without a token, actions are allowed from loopback
/// only).
///
/// ```
/// use std::net::SocketAddr;
/// use breakerbox::CircuitBreaker;
/// use breakerbox_admin::AdminService;
///
/// let admin = AdminService::builder()
///     .breaker(CircuitBreaker::builder().name("payments").build()?)
///     .prefix("/admin")
///     .build()?;
/// let app: axum::Router = axum::Router::new()
///     .route("/", axum::routing::get(|| async { "hello" }))
///     .merge(breakerbox_admin::router(admin));
/// let _make_service = app.into_make_service_with_connect_info::<SocketAddr>();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn router<S>(service: AdminService) -> Router<S>
where
    S: Clone + Send + Sync + 'static,
{
    if service.prefix().is_empty() {
        Router::new().fallback_service(service)
    } else {
        let prefix = service.prefix().to_owned();
        Router::new().nest_service(&prefix, service.without_prefix())
    }
}
