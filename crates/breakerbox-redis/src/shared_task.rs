//! Work on a task of its own that any number of callers can await: a caller whose own
//! timeout runs out does not cancel it, so a later caller finds it done (making a
//! connection, loading a script).

use std::future::Future;

use futures_util::future::{BoxFuture, FutureExt, Shared};
use redis::{ErrorKind, RedisError};

/// The result of work running on its own task, for every caller that awaits a clone.
pub(crate) type SharedTask<T> = Shared<BoxFuture<'static, Result<T, RedisError>>>;

/// Spawns `work` on a task of its own; `lost` says what a task that ended without an
/// answer (it panicked, or the runtime shut down) failed to give.
pub(crate) fn spawn_shared<T, F>(work: F, lost: &'static str) -> SharedTask<T>
where
    T: Clone + Send + Sync + 'static,
    F: Future<Output = Result<T, RedisError>> + Send + 'static,
{
    let task = tokio::spawn(work);
    async move {
        task.await
            .unwrap_or_else(|_| Err(RedisError::from((ErrorKind::Io, lost))))
    }
    .boxed()
    .shared()
}
