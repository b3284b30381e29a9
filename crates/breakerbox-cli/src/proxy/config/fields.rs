//! Reading typed values from the config's TOML tables, each error naming its key as the
//! file spells it (`upstream[0].url`, `limits.request_timeout`).

use std::net::SocketAddr;
use std::time::Duration;

use breakerbox_http::parse_duration;
use toml::{Table, Value};

/// Collects errors while reading a file.
#[derive(Default)]
pub(super) struct Errors(pub(super) Vec<String>);

impl Errors {
    pub(super) fn push(&mut self, key: &str, message: impl std::fmt::Display) {
        self.0.push(format!("{key}: {message}"));
    }

    pub(super) fn unknown_keys(&mut self, table: &Table, known: &[&str], path: &str) {
        for key in table.keys() {
            if !known.contains(&key.as_str()) {
                let full = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                self.push(
                    &full,
                    format_args!("unknown key (expected one of: {})", known.join(", ")),
                );
            }
        }
    }
}

pub(super) fn type_name(value: &Value) -> &'static str {
    value.type_str()
}

pub(super) fn string<'a>(
    table: &'a Table,
    key: &str,
    path: &str,
    errors: &mut Errors,
) -> Option<&'a str> {
    match table.get(key)? {
        Value::String(s) => Some(s),
        other => {
            errors.push(
                &join(path, key),
                format_args!("expected a string, found {}", type_name(other)),
            );
            None
        }
    }
}

/// The boolean at `key`: `None` when absent, or when it is not a boolean (reported with
/// what it is, so `"yes"` and `1` get the same clear error at every boolean key).
pub(super) fn boolean(table: &Table, key: &str, path: &str, errors: &mut Errors) -> Option<bool> {
    match table.get(key)? {
        Value::Boolean(b) => Some(*b),
        other => {
            errors.push(
                &join(path, key),
                format_args!(
                    "expected a boolean (true or false), found {} {other}",
                    type_name(other)
                ),
            );
            None
        }
    }
}

pub(super) fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

pub(super) fn address(
    table: &Table,
    key: &str,
    path: &str,
    errors: &mut Errors,
) -> Option<SocketAddr> {
    let text = string(table, key, path, errors)?;
    match text.parse::<SocketAddr>() {
        Ok(addr) => Some(addr),
        Err(_) => {
            errors.push(
                &join(path, key),
                format_args!("invalid value {text:?}: expected IP:PORT like \"127.0.0.1:8080\""),
            );
            None
        }
    }
}

pub(super) fn duration(
    table: &Table,
    key: &str,
    path: &str,
    errors: &mut Errors,
) -> Option<Duration> {
    let text = string(table, key, path, errors)?;
    match parse_duration(text) {
        Some(d) if !d.is_zero() => Some(d),
        _ => {
            errors.push(
                &join(path, key),
                format_args!(
                    "invalid value {text:?}: expected a duration above zero like \"800ms\" or \"30s\""
                ),
            );
            None
        }
    }
}

pub(super) fn positive(
    table: &Table,
    key: &str,
    path: &str,
    min: i64,
    errors: &mut Errors,
) -> Option<u64> {
    match table.get(key)? {
        Value::Integer(n) if *n >= min => Some(*n as u64),
        Value::Integer(n) => {
            errors.push(
                &join(path, key),
                format_args!("invalid value {n}: expected at least {min}"),
            );
            None
        }
        other => {
            errors.push(
                &join(path, key),
                format_args!("expected an integer, found {}", type_name(other)),
            );
            None
        }
    }
}

pub(super) fn sub_table<'a>(
    table: &'a Table,
    key: &str,
    path: &str,
    errors: &mut Errors,
) -> Option<&'a Table> {
    match table.get(key)? {
        Value::Table(t) => Some(t),
        other => {
            errors.push(
                &join(path, key),
                format_args!("expected a table, found {}", type_name(other)),
            );
            None
        }
    }
}

/// Whether `name` is a valid upstream (breaker) name.
pub(super) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}
