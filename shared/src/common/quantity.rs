//! Kubernetes resource quantities as the API server and Kueue write them: a JSON number (`8`)
//! or a string in Kubernetes' notation (`"8"`, `"8000m"`, `"1k"`, `"2Ki"`), read exactly in
//! thousandths. Kueue's ClusterQueue webhook rewrites the numbers gpufleet applies as strings
//! on create (seen on a real Kueue v0.17.0, `backend/tests/it/real_cluster.rs`), so two
//! quantities are compared by value, never by their JSON.

use serde_json::Value;

/// The quantity in thousandths of its unit (`"8"` → 8,000; `"500m"` → 500; `"1Ki"` →
/// 1,024,000); None for what is not a quantity or does not fit.
pub fn milli(quantity: &Value) -> Option<i128> {
    if let Some(n) = quantity.as_i64() {
        return i128::from(n).checked_mul(1000);
    }
    let text = quantity.as_str()?;
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let (scale_num, scale_den): (i128, i128) = match suffix {
        "" => (1000, 1),
        "m" => (1, 1),
        "k" => (1_000_000, 1),
        "M" => (1_000_000_000, 1),
        "G" => (1_000_000_000_000, 1),
        "T" => (1_000_000_000_000_000, 1),
        "Ki" => (1_024_000, 1),
        "Mi" => (1_048_576_000, 1),
        "Gi" => (1_073_741_824_000, 1),
        "Ti" => (1_099_511_627_776_000, 1),
        _ => return None,
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits = format!("{whole}{fraction}");
    let value: i128 = digits.parse().ok()?;
    let den = 10i128.checked_pow(u32::try_from(fraction.len()).ok()?)?;
    let scaled = value.checked_mul(scale_num)?;
    (scaled % (den * scale_den) == 0).then(|| scaled / (den * scale_den))
}

/// Whether two values are the same quantity (`0` and `"0"`, `8` and `"8000m"`); values that
/// are not quantities are the same only when equal.
pub fn same(a: &Value, b: &Value) -> bool {
    a == b || matches!((milli(a), milli(b)), (Some(x), Some(y)) if x == y)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Kubernetes' notation (k8s.io/apimachinery `resource.Quantity`): decimal and binary
    /// suffixes, milli-units, a sign, a decimal point.
    #[test]
    fn quantities_are_read_exactly() {
        for (text, thousandths) in [
            (json!(8), 8_000),
            (json!("8"), 8_000),
            (json!("8000m"), 8_000),
            (json!("500m"), 500),
            (json!("1k"), 1_000_000),
            (json!("1.5"), 1_500),
            (json!("2Ki"), 2_048_000),
            (json!("64Gi"), 68_719_476_736_000),
            (json!("-1"), -1_000),
        ] {
            assert_eq!(milli(&text), Some(thousandths), "{text}");
        }
        for text in [
            json!("eight"),
            json!("8 GPUs"),
            json!(null),
            json!("0.0001"),
        ] {
            assert_eq!(milli(&text), None, "{text}");
        }
        assert!(same(&json!(0), &json!("0")));
        assert!(same(&json!(1000), &json!("1k")));
        assert!(!same(&json!(8), &json!("80")));
        assert!(!same(&json!("on"), &json!("off")));
    }
}
