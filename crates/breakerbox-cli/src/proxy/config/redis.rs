//! `[redis_options]`: the shared breakers' options, read by the Redis engine's own file
//! format.

use toml::Table;

use super::fields::Errors;

/// `[redis_options]`, read by the Redis engine's own file format (errors name
/// `redis_options.KEY`).
pub(super) fn redis_options(
    root: &Table,
    errors: &mut Errors,
) -> Option<breakerbox_redis::RedisOptions> {
    let value = root.get("redis_options")?;
    if !value.is_table() {
        errors.push("redis_options", "expected a table ([redis_options])");
        return None;
    }
    match value.clone().try_into::<breakerbox_redis::RedisOptions>() {
        Ok(options) => Some(options),
        Err(e) => {
            let message = e.message().to_string();
            match message.split_once(": ") {
                Some((key, rest)) if !key.contains(' ') => {
                    errors.push(&format!("redis_options.{key}"), rest)
                }
                _ => errors.push("redis_options", message),
            }
            None
        }
    }
}
