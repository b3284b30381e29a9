//! Building an [`HttpJudge`] in code.

use std::time::Duration;

use breakerbox::Verdict;

use crate::{
    BusinessConfig, GrpcCode, GrpcConfig, HttpJudge, HttpJudgeConfig, HttpJudgeError,
    StatusSelector,
};

/// Builds an [`HttpJudge`]; every method has the name of the config key it sets.
///
/// ```
/// use breakerbox_http::HttpJudge;
/// use breakerbox::Verdict;
///
/// // The seed's rule: every 4xx is the dependency's failure, except 404.
/// let judge = HttpJudge::builder()
///     .client_errors(Verdict::Failure)
///     .status("404", Verdict::Ignore)
///     .build()?;
/// assert_eq!(judge.status_verdict(http::StatusCode::BAD_REQUEST), Verdict::Failure);
/// assert_eq!(judge.status_verdict(http::StatusCode::NOT_FOUND), Verdict::Ignore);
/// # Ok::<(), breakerbox_http::HttpJudgeError>(())
/// ```
#[derive(Clone, Debug, Default)]
#[must_use = "a builder does nothing until built"]
pub struct HttpJudgeBuilder {
    config: HttpJudgeConfig,
    error: Option<HttpJudgeError>,
}

impl HttpJudgeBuilder {
    /// Starts from `config` instead of the defaults.
    pub fn config(mut self, config: HttpJudgeConfig) -> Self {
        self.config = config;
        self
    }

    /// A rule for a code (`"429"`), a range (`"500-599"`) or a class (`"5xx"`). A bad
    /// selector is reported by [`HttpJudgeBuilder::build`].
    pub fn status(mut self, selector: &str, verdict: Verdict) -> Self {
        match selector.parse::<StatusSelector>() {
            Ok(selector) => {
                self.config.status.insert(selector, verdict);
            }
            Err(error) => {
                self.error.get_or_insert(error);
            }
        }
        self
    }

    /// A rule for an already parsed selector.
    pub fn status_rule(mut self, selector: StatusSelector, verdict: Verdict) -> Self {
        self.config.status.insert(selector, verdict);
        self
    }

    /// How 4xx responses count (codes and ranges configured with [`Self::status`], and the
    /// defaults for 408 and 429, still win).
    pub fn client_errors(mut self, verdict: Verdict) -> Self {
        self.config.client_errors = Some(verdict);
        self
    }

    /// How 5xx responses count (codes and ranges still win).
    pub fn server_errors(mut self, verdict: Verdict) -> Self {
        self.config.server_errors = Some(verdict);
        self
    }

    fn business(&mut self) -> &mut BusinessConfig {
        self.config.business.get_or_insert_with(Default::default)
    }

    /// Adds a JSON pointer where a business code may be (`/error_code`, `/error/code`).
    pub fn business_pointer(mut self, pointer: &str) -> Self {
        self.business().pointers.push(pointer.to_owned());
        self
    }

    /// Adds business codes that make a response a failure.
    pub fn business_failure_codes<I, S>(mut self, codes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.business()
            .failure_codes
            .extend(codes.into_iter().map(Into::into));
        self
    }

    /// Adds business codes that make a response a success.
    pub fn business_success_codes<I, S>(mut self, codes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.business()
            .success_codes
            .extend(codes.into_iter().map(Into::into));
        self
    }

    /// How a business code found in neither list counts (unset: the status decides).
    pub fn business_other_codes(mut self, verdict: Verdict) -> Self {
        self.business().other_codes = Some(verdict);
        self
    }

    /// The statuses whose bodies are read for business codes (default `2xx`); replaces the
    /// list. A bad selector is reported by [`HttpJudgeBuilder::build`].
    pub fn business_statuses<'a>(mut self, selectors: impl IntoIterator<Item = &'a str>) -> Self {
        let mut parsed = Vec::new();
        for (i, text) in selectors.into_iter().enumerate() {
            match StatusSelector::parse(text) {
                Ok(selector) => parsed.push(selector),
                Err(message) => {
                    self.error.get_or_insert(HttpJudgeError::new(
                        format!("business.statuses[{i}]"),
                        text,
                        message,
                    ));
                }
            }
        }
        self.business().statuses = parsed;
        self
    }

    /// A response slower than `threshold` (strictly) fails, even a 200.
    pub fn slow_threshold(mut self, threshold: Duration) -> Self {
        self.config.slow_threshold = Some(threshold);
        self
    }

    /// A stricter latency threshold for half-open probes.
    pub fn probe_slow_threshold(mut self, threshold: Duration) -> Self {
        self.config.probe_slow_threshold = Some(threshold);
        self
    }

    /// Judges gRPC responses by their `grpc-status` (`true`, with the defaults and any
    /// rule given with [`Self::grpc_code`]) or not (`false`, the default: they are then
    /// judged as any HTTP response, by status).
    ///
    /// ```
    /// use breakerbox_http::{GrpcCode, HttpJudge};
    /// use breakerbox::Verdict;
    ///
    /// let judge = HttpJudge::builder()
    ///     .grpc(true)
    ///     .grpc_code("not_found", Verdict::Failure)
    ///     .grpc_code("12", Verdict::Failure)
    ///     .build()?;
    /// let grpc = judge.grpc().expect("on");
    /// assert_eq!(grpc.verdict(GrpcCode::NotFound), Verdict::Failure);
    /// assert_eq!(grpc.verdict(GrpcCode::Unimplemented), Verdict::Failure);
    /// assert_eq!(grpc.verdict(GrpcCode::Cancelled), Verdict::Ignore);
    ///
    /// let error = HttpJudge::builder().grpc_code("NOPE", Verdict::Failure).build().unwrap_err();
    /// assert_eq!(error.key(), "grpc.codes.\"NOPE\"");
    /// # Ok::<(), breakerbox_http::HttpJudgeError>(())
    /// ```
    pub fn grpc(mut self, on: bool) -> Self {
        match (on, &self.config.grpc) {
            (true, None) => self.config.grpc = Some(GrpcConfig::default()),
            (false, _) => self.config.grpc = None,
            (true, Some(_)) => {}
        }
        self
    }

    /// A rule for a gRPC code, by name in any case (`"UNAVAILABLE"`) or number
    /// (`"14"`); turns gRPC judging on. A bad code is reported by
    /// [`HttpJudgeBuilder::build`], naming `grpc.codes."..."`.
    pub fn grpc_code(mut self, code: &str, verdict: Verdict) -> Self {
        match code.parse::<GrpcCode>() {
            Ok(code) => self = self.grpc_rule(code, verdict),
            Err(error) => {
                self.error.get_or_insert(error);
            }
        }
        self
    }

    /// A rule for a gRPC code; turns gRPC judging on.
    pub fn grpc_rule(mut self, code: GrpcCode, verdict: Verdict) -> Self {
        self.config
            .grpc
            .get_or_insert_with(GrpcConfig::default)
            .codes
            .insert(code, verdict);
        self
    }

    /// Reads `Retry-After` (seconds) on 429 and 503 responses, and gRPC's
    /// `grpc-retry-pushback-ms` on gRPC answers judged failures.
    pub fn honor_retry_after(mut self, honor: bool) -> Self {
        self.config.honor_retry_after = honor;
        self
    }

    /// How many bytes of body are read at most for business codes (default 64 KiB).
    pub fn body_cap(mut self, bytes: usize) -> Self {
        self.config.body_cap = Some(bytes);
        self
    }

    /// The config built so far.
    pub fn to_config(&self) -> HttpJudgeConfig {
        self.config.clone()
    }

    /// Validates and builds; the error names the first offending key and its value.
    pub fn build(self) -> Result<HttpJudge, HttpJudgeError> {
        if let Some(error) = self.error {
            return Err(error);
        }
        HttpJudge::from_config(self.config)
    }
}
