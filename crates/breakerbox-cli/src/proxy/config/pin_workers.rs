//! `pin_workers`: whether each worker thread runs on a CPU of its own (`true`, or
//! `false`, the default). See [`crate::proxy::pinning`].

use toml::{Table, Value};

use super::fields::Errors;

/// The top-level `pin_workers`, `false` when absent or after an error (reported).
pub(super) fn pin_workers(root: &Table, errors: &mut Errors) -> bool {
    match root.get("pin_workers") {
        None => false,
        Some(Value::Boolean(pin)) => *pin,
        Some(other) => {
            errors.push(
                "pin_workers",
                format_args!("invalid value {other}: expected true or false"),
            );
            false
        }
    }
}
