//! [`AdminServiceBuilder`]: the breakers, the rules of access and the options of an
//! [`AdminService`], checked once.

use std::fmt::{self, Display};
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use breakerbox::contract::Breaker;
use breakerbox::{Clock, ConfigError, MonotonicClock, Registry};
use bytes::Bytes;

use crate::access::Access;
use crate::service::{AdminService, Renderer, Section, Shared};
use crate::source::{BreakerSource, Listed, Sources};
use crate::transitions::TransitionLog;

/// The dashboard page: no external assets; it refreshes itself from `status`.
const DASHBOARD: &str = include_str!("dashboard.html");

/// How long an engine operation (a snapshot, a manual operation) may take by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);

/// Builds an [`AdminService`]: what it serves and who may act. Every option is checked by
/// [`AdminServiceBuilder::build`], which names the option it refuses.
///
/// ```
/// use std::sync::Arc;
/// use breakerbox::{CircuitBreaker, Config, Registry};
/// use breakerbox_admin::{AdminService, TransitionLog};
///
/// let log = TransitionLog::new();
/// let payments = CircuitBreaker::builder().name("payments").listener(log.clone()).build()?;
/// let hosts = Arc::new(
///     Registry::<String>::new(Config::builder().build()?, 1000)?
///         .with_listener(Arc::new(log.clone())),
/// );
/// let admin = AdminService::builder()
///     .breaker(payments)          // one breaker, any engine
///     .registry(hosts)            // a registry, listed as it grows
///     .transitions(log)
///     .token("s3cret")
///     .allow_host("admin.internal")
///     .prefix("/admin")
///     .build()?;
/// assert_eq!(admin.prefix(), "/admin");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct AdminServiceBuilder {
    sources: Vec<Arc<dyn BreakerSource>>,
    token: Option<String>,
    hosts: Vec<String>,
    metrics: Option<Renderer>,
    prefix: String,
    transitions: Option<TransitionLog>,
    timeout: Duration,
    title: String,
    sections: Vec<(String, Section)>,
}

/// The status document's own keys, which no section may take.
const STATUS_KEYS: [&str; 3] = ["uptime_ms", "breakers", "transitions"];

impl fmt::Debug for AdminServiceBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdminServiceBuilder")
            .field("sources", &self.sources.len())
            .field("token", &self.token.as_ref().map(|_| "***"))
            .field("hosts", &self.hosts)
            .field("metrics", &self.metrics.is_some())
            .field("prefix", &self.prefix)
            .field("timeout", &self.timeout)
            .field("title", &self.title)
            .field(
                "sections",
                &self.sections.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl Default for AdminServiceBuilder {
    fn default() -> AdminServiceBuilder {
        AdminServiceBuilder::new()
    }
}

impl AdminServiceBuilder {
    /// No breakers, no token, no extra host names, no prefix, `/metrics` from the
    /// breakers' phases, engine operations bounded by [`DEFAULT_TIMEOUT`].
    pub fn new() -> AdminServiceBuilder {
        AdminServiceBuilder {
            sources: Vec::new(),
            token: None,
            hosts: Vec::new(),
            metrics: None,
            prefix: String::new(),
            transitions: None,
            timeout: DEFAULT_TIMEOUT,
            title: "breakerbox".to_string(),
            sections: Vec::new(),
        }
    }

    /// Serves one breaker of any engine: a `CircuitBreaker`, a `RedisBreaker`, a
    /// `DynBreaker`.
    pub fn breaker<B: Breaker>(self, breaker: B) -> AdminServiceBuilder {
        self.source(Listed::new(breaker))
    }

    /// Serves every breaker of a registry (in memory or shared), as it is at each request.
    pub fn registry<K, B>(self, registry: Arc<Registry<K, B>>) -> AdminServiceBuilder
    where
        K: Hash + Eq + Clone + Display + Send + Sync + 'static,
        B: Breaker,
        Registry<K, B>: Send + Sync,
    {
        self.source(registry)
    }

    /// Serves every breaker of `source`, listed at each request. Sources are listed in the
    /// order they were added; a name listed by more than one is served from the first.
    pub fn source(mut self, source: impl BreakerSource) -> AdminServiceBuilder {
        self.sources.push(Arc::new(source));
        self
    }

    /// Requires `Authorization: Bearer TOKEN` (any case of `bearer`) for every action,
    /// from any peer: 401 with a challenge without it, 403 with another. Without a token,
    /// actions are allowed from loopback peers only.
    pub fn token(mut self, token: impl Into<String>) -> AdminServiceBuilder {
        self.token = Some(token.into());
        self
    }

    /// Answers under this host name (without a port) too, besides IP literals and
    /// `localhost`. Compared without case.
    pub fn allow_host(mut self, host: impl Into<String>) -> AdminServiceBuilder {
        self.hosts.push(host.into());
        self
    }

    /// Writes `/metrics` with `render`, called at each scrape: e.g.
    /// `move || handle.render()` with a `metrics_exporter_prometheus::PrometheusHandle`
    /// and the core's `metrics` feature. Without one, `/metrics` holds the gauge
    /// `breakerbox_state` of every breaker.
    pub fn metrics(
        mut self,
        render: impl Fn() -> String + Send + Sync + 'static,
    ) -> AdminServiceBuilder {
        self.metrics = Some(Arc::new(render));
        self
    }

    /// Answers under `prefix` (e.g. `/admin`: the dashboard at `/admin/`, the status at
    /// `/admin/status`) and nowhere else. `""` or `/` is the root.
    pub fn prefix(mut self, prefix: impl Into<String>) -> AdminServiceBuilder {
        self.prefix = prefix.into();
        self
    }

    /// Lists the transitions `log` keeps in the status document and on the dashboard.
    pub fn transitions(mut self, log: TransitionLog) -> AdminServiceBuilder {
        self.transitions = Some(log);
        self
    }

    /// Bounds each engine operation (a snapshot, a manual operation; each may be a round
    /// trip to a shared store) by `timeout`.
    pub fn timeout(mut self, timeout: Duration) -> AdminServiceBuilder {
        self.timeout = timeout;
        self
    }

    /// Adds the key `key` to the status document, with what `section` answers at each
    /// request: the place for what the server around the breakers knows (a proxy's
    /// upstreams still draining after a reload, say). `key` must be a name of ASCII
    /// letters, digits and `_`, other than the document's own keys (`uptime_ms`,
    /// `breakers`, `transitions`) and than an earlier section's.
    ///
    /// The dashboard shows each section as a table after the transitions: one row per
    /// object of a list (one row for an object), one column per key, `_ms` numbers as
    /// durations, and `none` for an empty list.
    ///
    /// ```
    /// use breakerbox_admin::AdminService;
    /// let admin = AdminService::builder()
    ///     .status_section("build", || serde_json::json!({"version": "1.2.3"}))
    ///     .build()?;
    /// # drop(admin);
    /// assert!(AdminService::builder()
    ///     .status_section("breakers", || serde_json::Value::Null)
    ///     .build()
    ///     .is_err());
    /// # Ok::<(), breakerbox::ConfigError>(())
    /// ```
    pub fn status_section(
        mut self,
        key: impl Into<String>,
        section: impl Fn() -> serde_json::Value + Send + Sync + 'static,
    ) -> AdminServiceBuilder {
        self.sections.push((key.into(), Arc::new(section)));
        self
    }

    /// The dashboard's title (default `breakerbox`).
    pub fn title(mut self, title: impl Into<String>) -> AdminServiceBuilder {
        self.title = title.into();
        self
    }

    /// The service, or the first option refused (`prefix`, `token`, `hosts`, `timeout`,
    /// `title`), naming it and the value.
    pub fn build(self) -> Result<AdminService, ConfigError> {
        let prefix = check_prefix(&self.prefix)?;
        if let Some(token) = &self.token {
            let visible = |c: char| c.is_ascii_graphic();
            if token.is_empty() || !token.chars().all(visible) {
                return Err(ConfigError::new(
                    "token",
                    "(hidden)",
                    "a non-empty token of visible ASCII characters, without spaces",
                ));
            }
        }
        let mut hosts = Vec::with_capacity(self.hosts.len());
        for host in &self.hosts {
            let ok = !host.is_empty()
                && host
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
            if !ok {
                return Err(ConfigError::new(
                    "hosts",
                    format_args!("{host:?}"),
                    "a host name without a port, like \"admin.internal\"",
                ));
            }
            hosts.push(host.to_ascii_lowercase());
        }
        if self.timeout.is_zero() {
            return Err(ConfigError::new(
                "timeout",
                format_args!("{:?}", self.timeout),
                "a duration above zero",
            ));
        }
        if self.title.chars().count() > 200 || self.title.chars().any(char::is_control) {
            return Err(ConfigError::new(
                "title",
                format_args!("{:?}", self.title),
                "at most 200 characters, none of them control characters",
            ));
        }
        for (i, (key, _)) in self.sections.iter().enumerate() {
            let named =
                !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            let taken = STATUS_KEYS.contains(&key.as_str())
                || self.sections[..i].iter().any(|(earlier, _)| earlier == key);
            if !named || taken {
                return Err(ConfigError::new(
                    "status_section",
                    format_args!("{key:?}"),
                    "a key of ASCII letters, digits and _, not uptime_ms, breakers, \
                     transitions or an earlier section's",
                ));
            }
        }
        let page = DASHBOARD.replace("{{title}}", &escape_html(&self.title));
        let clock = MonotonicClock;
        Ok(AdminService {
            shared: Arc::new(Shared {
                sources: Sources(self.sources),
                access: Access::new(self.token, hosts),
                metrics: self.metrics,
                transitions: self.transitions,
                page: Bytes::from(page),
                timeout: self.timeout,
                sections: self.sections,
                started: clock.now(),
                clock,
            }),
            prefix: Arc::from(prefix),
        })
    }
}

/// `""` for the root; otherwise `/a/b` of unreserved characters, no empty, `.` or `..`
/// segment, no trailing slash (a trailing slash is dropped).
fn check_prefix(prefix: &str) -> Result<String, ConfigError> {
    let trimmed = prefix.strip_suffix('/').unwrap_or(prefix);
    if trimmed.is_empty() {
        return Ok(String::new());
    }
    let ok = trimmed.strip_prefix('/').is_some_and(|rest| {
        rest.split('/').all(|segment| {
            !segment.is_empty()
                && segment != "."
                && segment != ".."
                && segment
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~'))
        })
    });
    if ok {
        Ok(trimmed.to_string())
    } else {
        Err(ConfigError::new(
            "prefix",
            format_args!("{prefix:?}"),
            "a path such as \"/admin\" (letters, digits, - . _ ~ between slashes)",
        ))
    }
}

fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_options_are_refused_naming_the_option() {
        for (builder, field) in [
            (AdminService::builder().prefix("admin"), "prefix"),
            (AdminService::builder().prefix("/a//b"), "prefix"),
            (AdminService::builder().prefix("/a/../b"), "prefix"),
            (AdminService::builder().prefix("/{x}"), "prefix"),
            (AdminService::builder().token(""), "token"),
            (AdminService::builder().token("a b"), "token"),
            (AdminService::builder().allow_host("a:80"), "hosts"),
            (AdminService::builder().allow_host("a/b"), "hosts"),
            (AdminService::builder().timeout(Duration::ZERO), "timeout"),
            (AdminService::builder().title("a\nb"), "title"),
        ] {
            assert_eq!(builder.build().unwrap_err().field(), field);
        }
        let error = AdminService::builder().token("a b").build().unwrap_err();
        assert!(!error.to_string().contains("a b"), "the token is not shown");
    }

    #[test]
    fn a_prefix_is_normalised_and_the_title_escaped() {
        let admin = AdminService::builder()
            .prefix("/ops/admin/")
            .title("<b>")
            .build()
            .unwrap();
        assert_eq!(admin.prefix(), "/ops/admin");
        let page = String::from_utf8_lossy(&admin.shared.page).into_owned();
        assert!(page.contains("<title>&lt;b&gt;</title>"));
        assert_eq!(
            AdminService::builder()
                .prefix("/")
                .build()
                .unwrap()
                .prefix(),
            ""
        );
    }
}
