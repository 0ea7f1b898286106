//! Money is integer cents; this turns it (and other counts) into text for people.

/// `123456789` cents → `$1,234,567.89`.
pub fn dollars(cents: i64) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    let cents = cents.unsigned_abs();
    format!("{sign}${}.{:02}", group(cents / 100), cents % 100)
}

/// `2000` → `2,000`.
pub fn thousands(n: i64) -> String {
    let sign = if n < 0 { "-" } else { "" };
    format!("{sign}{}", group(n.unsigned_abs()))
}

fn group(n: u64) -> String {
    let whole = n.to_string();
    let mut grouped = String::with_capacity(whole.len() + whole.len() / 3);
    for (i, c) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(c);
    }
    grouped
}

#[cfg(test)]
mod tests {
    #[test]
    fn dollars() {
        for (cents, text) in [
            (0, "$0.00"),
            (5, "$0.05"),
            (123_456_789, "$1,234,567.89"),
            (-100_000, "-$1,000.00"),
            (99_999, "$999.99"),
        ] {
            assert_eq!(super::dollars(cents), text);
        }
        assert_eq!(super::thousands(2_000), "2,000");
        assert_eq!(super::thousands(50), "50");
        assert_eq!(super::thousands(-1_234_567), "-1,234,567");
    }
}
