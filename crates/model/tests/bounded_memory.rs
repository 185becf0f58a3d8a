//! The memory a configuration's check takes where that text has an error
//! on every line: counted by this test's own allocator, it does not grow
//! with the text beyond a small factor (the `toml` crate's tree of a text
//! is 50 times it).

use std::{
    alloc::{GlobalAlloc, Layout, System},
    sync::atomic::{AtomicUsize, Ordering},
};

/// The system's allocator, counting the bytes held and their most since
/// [`reset_peak`].
struct Counting;

static HELD: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: hands every call to the system's allocator unchanged; only
// counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's promises, passed on.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let held = HELD.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(held, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's promises, passed on.
        unsafe { System.dealloc(ptr, layout) };
        HELD.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The bytes held now, which the peak starts from again.
fn reset_peak() -> usize {
    let held = HELD.load(Ordering::Relaxed);
    PEAK.store(held, Ordering::Relaxed);
    held
}

/// One domain, then a key a domain does not take on every line
/// (`scripts/bench-config-errors.sh`, shape `keys`): parsed and listed
/// in a few times the text, not the whole piece's tree.
#[test]
fn a_large_table_with_an_unknown_key_on_every_line_is_checked_in_bounded_memory() {
    let lines = 120_000;
    let mut text = String::from("[[domain]]\nname = \"a.test\"\nnameservers = [\"ns1.a.test\"]\n");
    for i in 0..lines {
        text.push_str(&format!("k{i} = {i}\n"));
    }
    // More than a piece `parse` reads in parts before parsing it whole.
    assert!(text.len() > 1 << 20, "{} bytes", text.len());
    let before = reset_peak();
    let errors = gtm_model::parse(&text).expect_err("unknown keys");
    let peak = PEAK.load(Ordering::Relaxed) - before;
    assert_eq!(errors.total(), lines);
    assert_eq!(errors.listed.len(), gtm_model::ERRORS_LISTED);
    assert!(
        errors.listed[0]
            .to_string()
            .starts_with("line 4: domain a.test: unknown field `k0`, expected one of `name`"),
        "{}",
        errors.listed[0]
    );
    assert!(
        peak < 3 * text.len(),
        "{peak} bytes at most to check a text of {}",
        text.len()
    );
}
