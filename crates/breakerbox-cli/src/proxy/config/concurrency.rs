//! `max_in_flight`, `max_pending` and `pending_timeout` of an `[[upstream]]` (see
//! [`crate::proxy::concurrency`]).

use toml::Table;

use super::fields::{duration, join, positive, Errors};
use crate::proxy::concurrency::{ConcurrencyConfig, DEFAULT_PENDING_TIMEOUT};

/// The largest `max_in_flight` or `max_pending` accepted (tokio's semaphore holds at
/// most about 2^61 permits; this is far beyond any connection limit).
const MAX_PLACES: u64 = 1_000_000;

/// The upstream's limits: `None` when `max_in_flight` is not given (no limit). The
/// queue's keys without `max_in_flight` are errors: they would mean nothing.
pub(super) fn concurrency(
    table: &Table,
    path: &str,
    errors: &mut Errors,
) -> Option<ConcurrencyConfig> {
    let bounded = |key: &str, min: i64, errors: &mut Errors| {
        let n = positive(table, key, path, min, errors)?;
        if n > MAX_PLACES {
            errors.push(
                &join(path, key),
                format_args!("invalid value {n}: expected at most {MAX_PLACES}"),
            );
            return None;
        }
        usize::try_from(n).ok()
    };
    let max_in_flight = bounded("max_in_flight", 1, errors);
    let max_pending = bounded("max_pending", 0, errors);
    let pending_timeout = duration(table, "pending_timeout", path, errors);
    if !table.contains_key("max_in_flight") {
        for key in ["max_pending", "pending_timeout"] {
            if table.contains_key(key) {
                errors.push(&join(path, key), "needs max_in_flight");
            }
        }
        return None;
    }
    Some(ConcurrencyConfig {
        max_in_flight: max_in_flight?,
        max_pending: max_pending.unwrap_or(0),
        pending_timeout: pending_timeout.unwrap_or(DEFAULT_PENDING_TIMEOUT),
    })
}
