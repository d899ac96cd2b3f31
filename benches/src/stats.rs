//! The median the benchmarks report over their repeats: the upper middle of the sorted
//! values (a measured value, never an average of two). `embed`'s report averages the
//! middle two of an even count instead (`embed/report.rs`).

/// The upper middle of `values` once sorted; `None` for none.
pub fn median<T: Copy + PartialOrd>(mut values: Vec<T>) -> Option<T> {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    values.get(values.len() / 2).copied()
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn the_median_is_the_upper_middle_value() {
        assert_eq!(median::<u64>(Vec::new()), None);
        assert_eq!(median(vec![3]), Some(3));
        assert_eq!(median(vec![9, 1, 5]), Some(5));
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), Some(3.0));
    }
}
