//! An order-preserving parallel map on scoped threads, for the per-object work on large inputs
//! (parsing, validation, typing, policy compilation). Threads live for one call: no pool to manage,
//! and per-thread caches (see `validate`) are simply rebuilt by each.

use std::num::NonZeroUsize;
use std::sync::Mutex;

/// Most items a thread takes at a time: enough that the shared queue is rarely locked.
const MAX_BLOCK: usize = 32;
/// Fewest blocks per thread, so that threads finish together when items differ in cost (a file of
/// Gateways and routes, then thousands of policies; pieces of YAML files of any size).
const BLOCKS_PER_THREAD: usize = 8;

/// `f` of every item, on up to `available_parallelism()` threads (the caller's included); the
/// results are in item order, so output and messages are those of a sequential map. Items passed
/// by value are also dropped on those threads.
pub fn map<T: Send, R: Send>(
    items: impl IntoIterator<Item = T>,
    f: impl Fn(T) -> R + Sync,
) -> Vec<R> {
    let items: Vec<T> = items.into_iter().collect();
    let threads = std::thread::available_parallelism()
        .map_or(1, NonZeroUsize::get)
        .min(items.len());
    if threads <= 1 {
        return items.into_iter().map(f).collect();
    }
    let block = (items.len() / (threads * BLOCKS_PER_THREAD)).clamp(1, MAX_BLOCK);
    let queue = Mutex::new(blocks(items, block).into_iter().enumerate());
    let work = || {
        let mut done = Vec::new();
        loop {
            let Some((i, items)) = queue.lock().unwrap_or_else(|e| e.into_inner()).next() else {
                return done;
            };
            done.push((i, items.into_iter().map(&f).collect::<Vec<R>>()));
        }
    };
    let mut done = std::thread::scope(|s| {
        let helpers: Vec<_> = (1..threads).map(|_| s.spawn(work)).collect();
        let mut done = work();
        for h in helpers {
            done.extend(
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            );
        }
        done
    });
    done.sort_unstable_by_key(|(i, _)| *i);
    done.into_iter().flat_map(|(_, results)| results).collect()
}

/// `items` in runs of `size`.
fn blocks<T>(items: Vec<T>, size: usize) -> Vec<Vec<T>> {
    let mut items = items.into_iter().peekable();
    let mut out = Vec::new();
    while items.peek().is_some() {
        out.push(items.by_ref().take(size).collect());
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn keeps_item_order() {
        let items: Vec<usize> = (0..1000).collect();
        assert_eq!(
            super::map(&items, |i| i * 2),
            items.iter().map(|i| i * 2).collect::<Vec<_>>()
        );
        assert_eq!(
            super::map(items.clone(), |i| i + 1),
            (1..1001).collect::<Vec<_>>()
        );
        assert_eq!(super::map(Vec::<usize>::new(), |i| i), Vec::<usize>::new());
    }
}
