//! Money is integer cents; this turns it (and other counts) into text for people.

/// `123456789` cents → `$1,234,567.89`.
pub fn dollars(cents: i64) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    let cents = cents.unsigned_abs();
    format!("{sign}${}.{:02}", group(cents / 100), cents % 100)
}

/// `7_854_662_397` cents → `$78,546,624`: to the whole dollar (half up), for sums where cents
/// would be false precision (a year's value of a fleet).
pub fn whole_dollars(cents: i64) -> String {
    let sign = if cents < 0 { "-" } else { "" };
    format!(
        "{sign}${}",
        group(cents.unsigned_abs().saturating_add(50) / 100)
    )
}

/// A dollar amount as typed (`12`, `12.5`, `$1,234.56`) → cents, exactly (no floats): at
/// most two decimals, not negative.
pub fn parse_dollars(text: &str) -> Result<i64, &'static str> {
    const RULE: &str = "an amount in dollars, like 4.25 (at most two decimals)";
    let text: String = text
        .trim()
        .trim_start_matches('$')
        .chars()
        .filter(|c| *c != ',')
        .collect();
    let (whole, fraction) = text.split_once('.').unwrap_or((&text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty()) || !digits(whole) || !digits(fraction) {
        return Err(RULE);
    }
    if fraction.len() > 2 {
        return Err(RULE);
    }
    let whole: i64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| RULE)?
    };
    let fraction: i64 = format!("{fraction:0<2}").parse().map_err(|_| RULE)?;
    whole
        .checked_mul(100)
        .and_then(|c| c.checked_add(fraction))
        .ok_or(RULE)
}

/// Cents as a person types dollars: `425` → `4.25`, `400` → `4`.
pub fn dollars_plain(cents: i64) -> String {
    if cents % 100 == 0 {
        (cents / 100).to_string()
    } else {
        format!("{}.{:02}", cents / 100, (cents % 100).abs())
    }
}

/// A count of hundredths as a decimal with two places: `1234` → `12.34`, `-5` → `-0.05`
/// (hours, percents, rates and FOCUS's amounts, all kept as whole hundredths).
pub fn hundredths(n: i128) -> String {
    let sign = if n < 0 { "-" } else { "" };
    let abs = n.unsigned_abs();
    format!("{sign}{}.{:02}", abs / 100, abs % 100)
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
        for (n, text) in [(0, "0.00"), (1234, "12.34"), (-5, "-0.05"), (-100, "-1.00")] {
            assert_eq!(super::hundredths(n), text);
        }
        assert_eq!(super::whole_dollars(7_854_662_397), "$78,546,624");
        assert_eq!(super::whole_dollars(149), "$1");
        assert_eq!(super::whole_dollars(150), "$2");
        assert_eq!(super::whole_dollars(-3_350_000_049), "-$33,500,000");
        assert_eq!(super::thousands(2_000), "2,000");
        assert_eq!(super::thousands(50), "50");
        assert_eq!(super::thousands(-1_234_567), "-1,234,567");
    }

    #[test]
    fn dollars_as_typed_become_exact_cents() {
        for (text, cents) in [
            ("4", 400),
            ("4.2", 420),
            ("4.25", 425),
            (" $1,234.56 ", 123_456),
            (".5", 50),
            ("0.07", 7),
            ("200000", 20_000_000),
        ] {
            assert_eq!(super::parse_dollars(text), Ok(cents), "{text}");
            assert_eq!(
                super::parse_dollars(&super::dollars_plain(cents)),
                Ok(cents)
            );
        }
        for bad in [
            "",
            ".",
            "4.255",
            "-4",
            "4,2.5x",
            "1e3",
            "99999999999999999999",
        ] {
            assert!(super::parse_dollars(bad).is_err(), "{bad}");
        }
        assert_eq!(super::dollars_plain(425), "4.25");
        assert_eq!(super::dollars_plain(400), "4");
    }
}
