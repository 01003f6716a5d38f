//! Futures built in their box.

use std::pin::Pin;

/// `make()`'s future, built in a box allocated first. `Box::pin(future)`
/// and `FutureExt::boxed` build it on the stack and then copy it into the
/// box, once per request: for a call's futures (an operation's is about
/// 13 KB, a direct call's answer a few KB) that copy is measurable
/// (docs/DECISIONS.md #110).
pub(crate) fn in_place<F: Future>(make: impl FnOnce() -> F) -> Pin<Box<F>> {
    Box::into_pin(Box::write(Box::new_uninit(), make()))
}
