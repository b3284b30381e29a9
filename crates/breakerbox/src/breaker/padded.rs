//! A value on cache lines of its own.

/// Keeps `T` off the cache lines of its neighbours (128 bytes: a line and the adjacent line
/// that x86 prefetchers fetch in pairs), so that writes to it do not take from other cores
/// the lines that hot paths only read.
#[repr(align(128))]
pub(crate) struct Padded<T>(pub(crate) T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}
