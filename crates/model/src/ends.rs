//! How two lists that differ in a few places are alike at their ends:
//! what a write that changed a few items left as it was.

/// How many items `a` and `b` have alike (by `same`) from their start,
/// and then from their end among the rest; the items between differ.
pub fn same_ends<A, B>(a: &[A], b: &[B], same: impl Fn(&A, &B) -> bool) -> (usize, usize) {
    let start = a.iter().zip(b).take_while(|(x, y)| same(x, y)).count();
    let most = a.len().min(b.len()) - start;
    let end = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take(most)
        .take_while(|(x, y)| same(x, y))
        .count();
    (start, end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ends_do_not_overlap() {
        let eq = |a: &u8, b: &u8| a == b;
        assert_eq!(same_ends(b"abcde", b"abXde", eq), (2, 2));
        assert_eq!(same_ends(b"abc", b"abc", eq), (3, 0));
        assert_eq!(same_ends(b"abc", b"abcd", eq), (3, 0));
        assert_eq!(same_ends(b"abc", b"zabc", eq), (0, 3));
        assert_eq!(same_ends(b"aa", b"aaa", eq), (2, 0));
        assert_eq!(same_ends(b"", b"a", eq), (0, 0));
    }
}
