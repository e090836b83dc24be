//! Futures boxed in blocks a worker reuses, last freed first. A transaction's future is ≈ 4 KiB:
//! above mimalloc's small sizes, so each `Box::pin` took its generic path (≈ 430 instructions
//! per request, callgrind), and its free list hands out the block freed longest ago, cold in
//! the cache (perf: the allocator's first touch of a block was the hottest instruction of one
//! request per connection). A block given back here is the next one taken, still warm.

use std::alloc::Layout;
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::ptr::NonNull;
use std::task::{Context, Poll};

/// Blocks kept per layout: a busy worker's transactions in flight at once, about; more are
/// freed. At most [`KEEP_BYTES`] of them (a burst's surplus would otherwise stay with every idle
/// connection's memory), halved by [`purge`] as the connection pool is.
const KEEP: usize = 64;

/// Bytes kept per layout at most: all 64 of a transaction's (≈ 4 KiB) blocks, fewer of the
/// larger HTTP/2 stream futures'.
const KEEP_BYTES: usize = 256 << 10;

/// How many blocks of `layout` are kept at most.
fn keep(layout: Layout) -> usize {
    KEEP.min(KEEP_BYTES / layout.size().max(1))
}

/// Free blocks by layout (a few layouts at most: a linear search).
struct Pool(Vec<(Layout, Vec<NonNull<u8>>)>);

impl Drop for Pool {
    fn drop(&mut self) {
        for (layout, blocks) in self.0.drain(..) {
            for b in blocks {
                // SAFETY: every block here was allocated with this layout and is owned by
                // nobody else (given back by a dropped `Pooled`).
                unsafe { std::alloc::dealloc(b.as_ptr(), layout) };
            }
        }
    }
}

thread_local! {
    static POOL: RefCell<Pool> = const { RefCell::new(Pool(Vec::new())) };
}

fn take(layout: Layout) -> Option<NonNull<u8>> {
    POOL.try_with(|p| {
        let mut p = p.borrow_mut();
        p.0.iter_mut().find(|(l, _)| *l == layout)?.1.pop()
    })
    .ok()
    .flatten()
}

/// Keeps `block` for the next [`take`] of `layout`; false when the pool is full or gone (the
/// caller frees it).
fn give(layout: Layout, block: NonNull<u8>) -> bool {
    POOL.try_with(|p| {
        let mut p = p.borrow_mut();
        let i = match p.0.iter().position(|(l, _)| *l == layout) {
            Some(i) => i,
            None => {
                p.0.push((layout, Vec::new()));
                p.0.len() - 1
            }
        };
        let blocks = &mut p.0[i].1;
        if blocks.len() >= keep(layout) {
            return false;
        }
        blocks.push(block);
        true
    })
    .unwrap_or(false)
}

/// Frees half of this worker's kept blocks (the worker calls it with its connection pool's
/// purge): a quiet worker gives back what a burst left.
pub fn purge() {
    let _ = POOL.try_with(|p| {
        let mut p = p.borrow_mut();
        for (layout, blocks) in p.0.iter_mut() {
            let keep = blocks.len() / 2;
            for b in blocks.drain(keep..) {
                // SAFETY: allocated with this layout, owned by the pool alone.
                unsafe { std::alloc::dealloc(b.as_ptr(), *layout) };
            }
        }
    });
}

/// How many blocks this worker keeps, all layouts together.
#[cfg(test)]
fn kept() -> usize {
    POOL.with(|p| p.borrow().0.iter().map(|(_, b)| b.len()).sum())
}

/// A future in a pooled block: pinned there (it never moves), dropped in place, its block kept
/// for the next one of the same layout on this thread.
pub struct Pooled<F> {
    ptr: NonNull<F>,
}

impl<F> Pooled<F> {
    /// The future `make` gives, made once its block is at hand, so that it can be written there
    /// directly rather than made aside and copied in (4 KiB for a transaction).
    #[inline(always)]
    pub fn new_with(make: impl FnOnce() -> F) -> Self {
        let layout = Layout::new::<F>();
        if layout.size() == 0 {
            let ptr = NonNull::<F>::dangling();
            // SAFETY: a zero-sized write through a dangling, aligned pointer is valid.
            unsafe { ptr.as_ptr().write(make()) };
            return Pooled { ptr };
        }
        let block = take(layout).unwrap_or_else(|| {
            // SAFETY: the layout has a non-zero size.
            let p = unsafe { std::alloc::alloc(layout) };
            NonNull::new(p).unwrap_or_else(|| std::alloc::handle_alloc_error(layout))
        });
        let ptr = block.cast::<F>();
        // SAFETY: the block is ours, sized and aligned for `F`, and holds no value.
        unsafe { ptr.as_ptr().write(make()) };
        Pooled { ptr }
    }
}

impl<F: Future> Future for Pooled<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: the future lives in its block until `drop` drops it in place; it is never
        // moved out, so pinning it there is sound whatever happens to the `Pooled` handle.
        unsafe { Pin::new_unchecked(&mut *self.ptr.as_ptr()) }.poll(cx)
    }
}

impl<F> Drop for Pooled<F> {
    fn drop(&mut self) {
        let layout = Layout::new::<F>();
        // SAFETY: the block holds a live `F` (written in `new_with`), dropped once, here.
        unsafe { std::ptr::drop_in_place(self.ptr.as_ptr()) };
        if layout.size() == 0 {
            return;
        }
        let block = self.ptr.cast::<u8>();
        if !give(layout, block) {
            // SAFETY: allocated with this layout, and its value was dropped above.
            unsafe { std::alloc::dealloc(block.as_ptr(), layout) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn a_block_freed_is_the_next_one_taken_and_values_drop_once() {
        let dropped = Rc::new(std::cell::Cell::new(0));
        struct Probe(Rc<std::cell::Cell<u32>>, [u8; 4000]);
        impl Drop for Probe {
            fn drop(&mut self) {
                self.0.set(self.0.get() + 1);
            }
        }
        let make = |d: &Rc<std::cell::Cell<u32>>| {
            let p = Probe(Rc::clone(d), [7; 4000]);
            async move { p.1[3999] as u32 + p.0.get() }
        };
        let a = Pooled::new_with(|| make(&dropped));
        let first = a.ptr.cast::<u8>();
        drop(a);
        assert_eq!(dropped.get(), 1, "dropped in place, once");
        let mut b = Pooled::new_with(|| make(&dropped));
        assert_eq!(b.ptr.cast::<u8>(), first, "the block just freed is reused");
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert_eq!(Pin::new(&mut b).poll(&mut cx), Poll::Ready(8));
        let c = Pooled::new_with(|| make(&dropped));
        assert_ne!(
            c.ptr.cast::<u8>(),
            first,
            "a block in use is not handed out"
        );
        drop((b, c));
        assert_eq!(dropped.get(), 3);
        assert_eq!(kept(), 2);
        // Kept up to KEEP; a purge frees half.
        let many: Vec<_> = (0..KEEP + 10)
            .map(|_| Pooled::new_with(|| make(&dropped)))
            .collect();
        drop(many);
        assert_eq!(kept(), KEEP);
        purge();
        assert_eq!(kept(), KEEP / 2);
        // Larger blocks: as many as fit in KEEP_BYTES.
        let big = |d: &Rc<std::cell::Cell<u32>>| {
            let p = (Rc::clone(d), [1u8; 16 << 10]);
            async move { p.1[0] as u32 + p.0.get() }
        };
        let many: Vec<_> = (0..KEEP)
            .map(|_| Pooled::new_with(|| big(&dropped)))
            .collect();
        drop(many);
        let size = std::mem::size_of_val(&big(&dropped));
        assert!(size > 16 << 10);
        assert_eq!(kept(), KEEP / 2 + KEEP_BYTES / size);
        // Zero-sized futures take no block.
        let mut z = Pooled::new_with(std::future::pending::<()>);
        assert_eq!(Pin::new(&mut z).poll(&mut cx), Poll::Pending);
    }
}
