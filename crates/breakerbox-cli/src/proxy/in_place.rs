//! Boxing a large value where it will live. `Box::new(make())` builds the value on the
//! stack, then allocates, then copies it: for a future, the copy is the whole state
//! machine (kilobytes for a request's), although an unstarted future holds only its
//! arguments. Allocating first lets the compiler build the value straight into the
//! allocation, writing only the bytes it sets.

use std::future::Future;
use std::pin::Pin;

/// `make()`'s value in a box, built in place where the compiler can.
#[inline(always)]
pub fn boxed<T>(make: impl FnOnce() -> T) -> Box<T> {
    Box::write(Box::new_uninit(), make())
}

/// `make()`'s future, boxed in place and pinned.
#[inline(always)]
pub fn pinned<F: Future>(make: impl FnOnce() -> F) -> Pin<Box<F>> {
    Box::into_pin(boxed(make))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boxes_and_pins_the_value_made() {
        assert_eq!(*boxed(|| [7u8; 4096]), [7u8; 4096]);
        let future = pinned(|| async { 42 });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        assert_eq!(runtime.block_on(future), 42);
    }
}
