//! Money is integer cents; this turns it into text for people.

/// `123456789` cents → `$1,234,567.89`.
pub fn dollars(cents: i64) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    let cents = cents.unsigned_abs();
    let whole = (cents / 100).to_string();
    let mut grouped = String::with_capacity(whole.len() + whole.len() / 3);
    for (i, c) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(c);
    }
    format!("{sign}${grouped}.{:02}", cents % 100)
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
    }
}
