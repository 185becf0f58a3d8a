//! Freeing what sled replaced, at once.
//!
//! sled drops a replaced page (and the values it holds) through
//! crossbeam's epoch collector: the garbage waits in the writing thread's
//! bag until that bag is full or flushed, and is freed once the epoch has
//! moved on twice. A device writes seldom and from many threads, so a
//! replaced multi-megabyte value (a configuration text, its history
//! entry) could stay resident for many writes: with 100,000 records, six
//! one-record writes left 21 copies of the 7.5 MB text in memory
//! (heaptrack; docs/design-scale.md, "Why RSS creeps").

/// Hands this thread's deferred garbage to the collector and lets the
/// epoch advance, so that what the write just replaced is freed now.
/// Call it on the thread that wrote, right after the write.
pub(crate) fn reclaim() {
    // Each pin-and-flush moves the bag to the global queue and tries to
    // advance the epoch; garbage two epochs old is freed on the third.
    for _ in 0..3 {
        crossbeam_epoch::pin().flush();
    }
}
