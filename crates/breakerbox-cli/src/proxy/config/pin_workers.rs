//! `pin_workers`: whether each worker thread runs on a CPU of its own (`true`, or
//! `false`, the default). See [`crate::proxy::pinning`].

use toml::Table;

use super::fields::{boolean, Errors};

/// The top-level `pin_workers`, `false` when absent or after an error (reported).
pub(super) fn pin_workers(root: &Table, errors: &mut Errors) -> bool {
    boolean(root, "pin_workers", "", errors).unwrap_or(false)
}
