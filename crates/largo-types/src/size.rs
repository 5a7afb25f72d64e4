//! Byte sizes on the command line: `16G`, `512M`, `1T`, `4096K`, `123`.

/// A malformed size argument.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid size '{input}': {reason}")]
pub struct SizeError {
    pub input: String,
    pub reason: &'static str,
}

const SUFFIXES: [(char, u32); 6] = [('K', 10), ('M', 20), ('G', 30), ('T', 40), ('P', 50), ('E', 60)];

/// Parses a byte count with an optional binary suffix K, M, G, T, P or E
/// (case-insensitive, optionally followed by `B` or `iB`): `16G` is 16 GiB.
pub fn parse_size(input: &str) -> Result<u64, SizeError> {
    let err = |reason| SizeError {
        input: input.to_string(),
        reason,
    };
    let s = input.trim();
    let s = s.strip_suffix("iB").or_else(|| s.strip_suffix("ib")).unwrap_or(s);
    let digits_end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, suffix) = s.split_at(digits_end);
    if digits.is_empty() {
        return Err(err("expected a number with an optional K, M, G or T suffix"));
    }
    let number: u64 = digits.parse().map_err(|_| err("number too large"))?;
    let suffix = suffix.strip_suffix(['B', 'b']).unwrap_or(suffix);
    let shift = match suffix.len() {
        0 => 0,
        1 => {
            let c = suffix.chars().next().unwrap_or(' ').to_ascii_uppercase();
            SUFFIXES
                .iter()
                .find(|(s, _)| *s == c)
                .map(|(_, shift)| *shift)
                .ok_or_else(|| err("unknown suffix: use K, M, G, T, P or E"))?
        }
        _ => return Err(err("unknown suffix: use K, M, G, T, P or E")),
    };
    number
        .checked_mul(1u64 << shift)
        .ok_or_else(|| err("size overflows 64 bits"))
}

/// Formats a byte count with the largest binary suffix that divides it
/// exactly (`format_size(2 << 20)` is `2M`).
pub fn format_size(bytes: u64) -> String {
    for (suffix, shift) in SUFFIXES.iter().rev() {
        if bytes >= (1u64 << shift) && bytes.is_multiple_of(1u64 << shift) {
            return format!("{}{}", bytes >> shift, suffix);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_suffixes() {
        let cases = [
            ("123", 123),
            ("4K", 4096),
            ("4k", 4096),
            ("512M", 512 << 20),
            ("16G", 16 << 30),
            ("16GiB", 16 << 30),
            ("16GB", 16 << 30),
            ("1T", 1 << 40),
        ];
        for (input, want) in cases {
            assert_eq!(parse_size(input), Ok(want), "{input}");
        }
    }

    #[test]
    fn rejects_bad_input() {
        for input in ["", "G", "12X", "1.5G", "-1G", "99999999999999999999", "16E", "1GG"] {
            assert!(parse_size(input).is_err(), "{input} should be rejected");
        }
    }

    #[test]
    fn formats_exact_multiples() {
        assert_eq!(format_size(2 << 20), "2M");
        assert_eq!(format_size(1 << 30), "1G");
        assert_eq!(format_size(3 << 29), "1536M");
        assert_eq!(format_size(1000), "1000");
    }

    proptest::proptest! {
        /// What the size fuzz target checks, on every test run: any text
        /// gives a size or an error, and a size prints to text that
        /// parses back to it.
        #[test]
        fn any_text_parses_or_is_refused(text in "\\PC{0,12}|[0-9]{1,22}[KkMmGgTtPp]?i?[Bb]?") {
            if let Ok(bytes) = parse_size(&text) {
                proptest::prop_assert_eq!(parse_size(&format_size(bytes)).ok(), Some(bytes));
            }
        }
    }
}
