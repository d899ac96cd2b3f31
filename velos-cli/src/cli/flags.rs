//! The numeric flags' ranges, shared by the subcommands: clap checks each as it parses
//! (exit 2, naming the flag as typed, its value and the range) before anything is
//! allocated; and the `--out` directories, checked before a run.

use std::path::Path;

/// The longest virtual time a flag may name: an hour (a run that long takes days of wall
/// time; a larger figure is a typo, not a request).
pub const MAX_DURATION_NS: u64 = 3_600_000_000_000;

/// Parses `500us`, `2ms`, `1s`, `300ns` or a plain number of nanoseconds (at most
/// [`MAX_DURATION_NS`]).
pub fn parse_duration(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (digits, unit) = s.split_at(
        s.find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(s.len()),
    );
    let scale = match unit {
        "" | "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        other => return Err(format!("unknown time unit {other:?} (ns, us, ms, s)")),
    };
    let n: f64 = digits
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (e.g. 500us, 2ms)"))?;
    if !n.is_finite() || n < 0.0 {
        return Err(format!("{s:?} is not a duration"));
    }
    let ns = (n * scale).round();
    if ns > MAX_DURATION_NS as f64 {
        return Err(format!(
            "{s:?} is longer than the longest run, {} s of virtual time",
            MAX_DURATION_NS / 1_000_000_000
        ));
    }
    Ok(ns as u64)
}

/// Worker threads a `--jobs` flag may ask for.
pub const MAX_JOBS: u64 = 256;

/// The most wall time one flag may ask for: 10 minutes.
pub const MAX_WALL_NS: u64 = 600_000_000_000;

/// A whole number from `lo` to `hi` (a negative or larger one is refused with the range;
/// `unit`, if any, follows the numbers in the message: `" bytes"`).
pub fn number<T: TryFrom<u64>>(
    lo: u64,
    hi: u64,
    unit: &'static str,
) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static {
    move |s: &str| {
        let out_of_range = || format!("{s} is not in {lo}..={hi}{unit}");
        let t = s.trim();
        if t.starts_with('-') && t[1..].chars().all(|c| c.is_ascii_digit()) && t.len() > 1 {
            return Err(out_of_range());
        }
        let n: u64 = match t.parse() {
            Ok(n) => n,
            Err(_) if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit()) => {
                return Err(out_of_range());
            }
            Err(_) => return Err(format!("{s:?} is not a whole number ({lo}..={hi}{unit})")),
        };
        if !(lo..=hi).contains(&n) {
            return Err(out_of_range());
        }
        T::try_from(n).map_err(|_| out_of_range())
    }
}

/// A time (`500us`, `2ms`, `1s`, or nanoseconds) from `lo` to `hi` ns, in ns.
pub fn duration(
    lo: u64,
    hi: u64,
) -> impl Fn(&str) -> Result<u64, String> + Clone + Send + Sync + 'static {
    move |s: &str| {
        let ns = parse_duration(s)?;
        if !(lo..=hi).contains(&ns) {
            return Err(format!("{s} is not in {}..={}", human(lo), human(hi)));
        }
        Ok(ns)
    }
}

/// `ns` as the largest unit that shows it whole: `20us`, `10min` as `600s`.
pub fn human(ns: u64) -> String {
    for (unit, scale) in [("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)] {
        if ns >= scale && ns % scale == 0 {
            return format!("{}{unit}", ns / scale);
        }
    }
    format!("{ns}ns")
}

/// Checks, before a run, that its files can be written into `dir`: it is (or is made) a
/// directory, and a file can be created in it.
pub fn writable_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let probe = dir.join(".velos-out-probe");
    std::fs::write(&probe, b"")?;
    std::fs::remove_file(&probe)
}

/// `--out DIR` refused before the run, for the subcommand `name`'s message.
pub fn check_out(name: &str, out: Option<&Path>) -> Result<(), String> {
    match out {
        Some(dir) => writable_dir(dir).map_err(|e| {
            format!(
                "{name}: --out {}: {e} (a writable directory)",
                dir.display()
            )
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_outside_the_range_are_refused_with_it() {
        let p = number::<u16>(1, 64, "");
        assert_eq!(p("3"), Ok(3));
        assert_eq!(p(" 64"), Ok(64));
        for bad in ["0", "65", "-3", "99999999999999999999999"] {
            let e = p(bad).expect_err(bad);
            assert!(e.contains("1..=64") && e.contains(bad.trim()), "{e}");
        }
        assert!(p("x").expect_err("x").contains("not a whole number"));
        assert!(p("").is_err());
        let bytes = number::<usize>(10, 65_536, " bytes");
        assert!(bytes("9").expect_err("9").ends_with("10..=65536 bytes"));
        // A range wider than the type: its top is refused, not wrapped.
        assert!(number::<u8>(0, 1_000, "")("300").is_err());
    }

    #[test]
    fn durations_outside_the_range_are_refused_with_it() {
        let d = duration(1, 20_000);
        assert_eq!(d("10us"), Ok(10_000));
        assert_eq!(d("30us"), Err("30us is not in 1ns..=20us".into()));
        assert!(d("0").is_err());
        assert!(d("-1us").is_err());
        assert_eq!(human(MAX_WALL_NS), "600s");
    }

    #[test]
    fn an_unwritable_out_is_refused() {
        let file = tempfile::NamedTempFile::new().expect("a file");
        let e = check_out("bench x", Some(file.path())).expect_err("a file is no directory");
        assert!(e.starts_with("bench x: --out "), "{e}");
        let dir = tempfile::tempdir().expect("a directory");
        assert_eq!(check_out("bench x", Some(&dir.path().join("new"))), Ok(()));
        assert_eq!(check_out("bench x", None), Ok(()));
    }
}
