//! A long list kept in chunks behind `Arc`s, so that a version of it made
//! by a small change shares every chunk the change did not touch with the
//! version before: building it, and dropping the one before, cost the
//! touched chunks, not the list.

use std::ops::Range;
use std::sync::Arc;

/// Items a chunk holds at most (fewer after removals).
pub const CHUNK: usize = 1024;

#[derive(Debug)]
pub struct Chunked<T> {
    chunks: Vec<Arc<[T]>>,
    /// The index after the last item of each chunk (sums of their lengths).
    ends: Vec<usize>,
}

impl<T> Default for Chunked<T> {
    fn default() -> Self {
        Self {
            chunks: Vec::new(),
            ends: Vec::new(),
        }
    }
}

impl<T> Clone for Chunked<T> {
    /// A copy sharing every chunk: a pointer per chunk.
    fn clone(&self) -> Self {
        Self {
            chunks: self.chunks.clone(),
            ends: self.ends.clone(),
        }
    }
}

impl<T: Clone> Chunked<T> {
    /// `items` cut into chunks of [`CHUNK`].
    pub fn from_vec(items: Vec<T>) -> Self {
        let mut list = Self::default();
        list.push_cut(&items);
        list
    }

    /// This list with `range` (clamped to it) replaced by `with`: the
    /// chunks wholly before and after `range` are shared, the ones it
    /// touches are copied with the change. An insertion at the end
    /// extends the last chunk (while it has room), so appends one at a
    /// time do not leave a chunk per item.
    pub fn splice(&self, range: Range<usize>, with: &[T]) -> Self {
        let len = self.len();
        let end = range.end.min(len);
        let start = range.start.min(end);
        // The chunks the change touches: from the one holding `start` (or
        // the last, for an insertion at the end) to the one holding the
        // last removed item.
        let first = self
            .chunk_of(start)
            .unwrap_or(self.chunks.len().saturating_sub(1));
        let last = if end > start {
            self.chunk_of(end - 1).unwrap_or(first)
        } else {
            first
        };
        let mut out = Self::default();
        for chunk in self.chunks.get(..first).unwrap_or_default() {
            out.push_chunk(chunk.clone());
        }
        let touched = self.chunks.get(first..=last).unwrap_or_default();
        let from = self.start_of(first);
        let mut items: Vec<T> = Vec::new();
        for (i, item) in touched.iter().flat_map(|c| c.iter()).enumerate() {
            if from + i == start {
                items.extend_from_slice(with);
            }
            if !(start..end).contains(&(from + i)) {
                items.push(item.clone());
            }
        }
        if touched.is_empty() || start == len {
            items.extend_from_slice(with);
        }
        out.push_cut(&items);
        for chunk in self.chunks.get(last + 1..).unwrap_or_default() {
            out.push_chunk(chunk.clone());
        }
        out
    }

    fn push_cut(&mut self, items: &[T]) {
        for chunk in items.chunks(CHUNK) {
            self.push_chunk(Arc::from(chunk));
        }
    }
}

impl<T> Chunked<T> {
    pub fn len(&self) -> usize {
        self.ends.last().copied().unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, i: usize) -> Option<&T> {
        let p = self.chunk_of(i)?;
        self.chunks.get(p)?.get(i - self.start_of(p))
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &T> + Clone + '_ {
        self.chunks.iter().flat_map(|c| c.iter())
    }

    /// How many items this list and `other` have alike (by `same`) from
    /// their start, and then from their end among the rest, as
    /// [`gtm_model::ends::same_ends`] says for two slices; chunks both share
    /// are taken whole, unread.
    pub fn same_ends(&self, other: &Self, same: impl Fn(&T, &T) -> bool) -> (usize, usize) {
        let front_shared = shared(self.chunks.iter(), other.chunks.iter());
        let start = front_shared
            + self
                .iter()
                .skip(front_shared)
                .zip(other.iter().skip(front_shared))
                .take_while(|(x, y)| same(x, y))
                .count();
        let most = self.len().min(other.len()) - start;
        let back_shared = shared(self.chunks.iter().rev(), other.chunks.iter().rev()).min(most);
        let end = back_shared
            + self
                .iter()
                .rev()
                .skip(back_shared)
                .zip(other.iter().rev().skip(back_shared))
                .take(most - back_shared)
                .take_while(|(x, y)| same(x, y))
                .count();
        (start, end)
    }

    fn push_chunk(&mut self, chunk: Arc<[T]>) {
        if chunk.is_empty() {
            return;
        }
        self.ends.push(self.len() + chunk.len());
        self.chunks.push(chunk);
    }

    /// The chunk holding item `i`.
    fn chunk_of(&self, i: usize) -> Option<usize> {
        let p = self.ends.partition_point(|&end| end <= i);
        (p < self.chunks.len()).then_some(p)
    }

    fn start_of(&self, chunk: usize) -> usize {
        chunk
            .checked_sub(1)
            .and_then(|p| self.ends.get(p))
            .copied()
            .unwrap_or(0)
    }
}

/// How many items the chunks `a` and `b` share (the same allocations) from
/// their first.
fn shared<'a, T: 'a>(
    a: impl Iterator<Item = &'a Arc<[T]>>,
    b: impl Iterator<Item = &'a Arc<[T]>>,
) -> usize {
    a.zip(b)
        .take_while(|(x, y)| Arc::ptr_eq(x, y))
        .map(|(x, _)| x.len())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(n: usize) -> Chunked<usize> {
        Chunked::from_vec((0..n).collect())
    }

    fn items(p: &Chunked<usize>) -> Vec<usize> {
        p.iter().copied().collect()
    }

    /// Random splices give what the same splice of a `Vec` gives, share
    /// the chunks they do not touch, and keep chunks within [`CHUNK`].
    #[test]
    fn a_splice_is_a_vec_splice_sharing_the_untouched_chunks() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n.max(1) as u64) as usize
        };
        let mut p = list(5 * CHUNK + 17);
        let mut v = items(&p);
        let mut fresh = 100_000;
        for _ in 0..300 {
            let len = v.len();
            let start = next(len + 1);
            let end = (start + next(3)).min(len);
            let with: Vec<usize> = (0..next(3)).map(|k| fresh + k).collect();
            fresh += 10;
            let q = p.splice(start..end, &with);
            v.splice(start..end, with.iter().copied());
            assert_eq!(items(&q), v);
            assert_eq!(q.len(), v.len());
            for i in [0, start, v.len().saturating_sub(1), v.len()] {
                assert_eq!(q.get(i), v.get(i));
            }
            let kept = q
                .chunks
                .iter()
                .filter(|a| p.chunks.iter().any(|b| Arc::ptr_eq(a, b)))
                .count();
            assert!(
                kept + 3 >= p.chunks.len(),
                "a splice copies at most 3 chunks"
            );
            assert!(q.chunks.iter().all(|x| !x.is_empty() && x.len() <= CHUNK));
            let (s, e) = q.same_ends(&p, |a, b| a == b);
            let whole = gtm_model::ends::same_ends(&v, &items(&p), |a, b| a == b);
            assert_eq!((s, e), whole);
            p = q;
        }
    }

    #[test]
    fn appends_one_at_a_time_fill_the_last_chunk() {
        let mut p = list(10);
        for i in 0..CHUNK {
            p = p.splice(p.len()..p.len(), &[i]);
        }
        assert_eq!(p.len(), CHUNK + 10);
        assert_eq!(p.chunks.len(), 2);
        let empty = Chunked::<usize>::default().splice(0..0, &[7]);
        assert_eq!(items(&empty), [7]);
        assert_eq!(p.get(CHUNK + 10), None);
    }
}
