//! Work spread over the cores: a long text's windows, stretches or rule scans
//! in contiguous parts, each part on a helper thread when one is free. The
//! callers combine the parts' results in order, so an answer never depends on
//! how many parts there were or where each ran.

use std::sync::atomic::{AtomicUsize, Ordering};

/// The cores a long text's work is spread over (at most 4), found once.
pub(crate) fn worker_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| {
        std::thread::available_parallelism()
            .map(std::num::NonZeroUsize::get)
            .unwrap_or(1)
            .min(4)
    })
}

/// `f` of each of up to [`worker_threads`] contiguous parts of `items`, in the
/// parts' order; the first part runs on this thread. Fewer than `min` items are
/// one part, run here: below that, starting a thread costs more than it saves.
pub(crate) fn in_parts<'a, T: Sync, R: Send>(
    items: &'a [T],
    min: usize,
    f: impl Fn(&'a [T]) -> R + Sync,
) -> Vec<R> {
    in_parts_over(items, min, worker_threads(), f)
}

/// Helper threads running parts for [`in_parts`] now, across the process.
static HELPERS: AtomicUsize = AtomicUsize::new(0);

/// A helper thread's place in [`HELPERS`], given back when it ends (or when its
/// thread could not be started).
struct Helper;

impl Helper {
    /// A place, if fewer than [`worker_threads`] helpers run: many inspections at
    /// once (a gateway under load) must not start threads without bound, and
    /// with every core busy a helper gains nothing.
    fn take() -> Option<Helper> {
        HELPERS
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < worker_threads()).then_some(n + 1)
            })
            .ok()
            .map(|_| Helper)
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        HELPERS.fetch_sub(1, Ordering::AcqRel);
    }
}

/// [`in_parts`] over `threads` parts. A part no helper thread can take (none
/// free, or the system refuses a thread) runs on this thread: the parts' results
/// do not depend on where they ran.
pub(crate) fn in_parts_over<'a, T: Sync, R: Send>(
    items: &'a [T],
    min: usize,
    threads: usize,
    f: impl Fn(&'a [T]) -> R + Sync,
) -> Vec<R> {
    if items.len() < min.max(1) || threads < 2 {
        return vec![f(items)];
    }
    let per = items.len().div_ceil(threads);
    let mut parts = items.chunks(per);
    let first = parts.next().unwrap_or_default();
    let f = &f;
    std::thread::scope(|s| {
        let others: Vec<_> = parts
            .map(|part| {
                let spawned = Helper::take().and_then(|helper| {
                    std::thread::Builder::new()
                        .spawn_scoped(s, move || {
                            let _helper = helper;
                            f(part)
                        })
                        .ok()
                });
                (part, spawned)
            })
            .collect();
        let mut out = vec![f(first)];
        out.extend(others.into_iter().map(|(part, spawned)| match spawned {
            Some(h) => h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)),
            None => f(part),
        }));
        out
    })
}
