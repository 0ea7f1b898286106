//! Field rules that several domains share (accounts, scenarios, quotas): each pushes a
//! [`FieldError`] naming the path it was given.

use crate::error::FieldError;

/// Team names, namespaces, flavors, queues: Kubernetes DNS-1123 labels.
pub fn is_dns_label(value: &str) -> bool {
    let bytes = value.as_bytes();
    !value.is_empty()
        && value.len() <= 63
        && bytes
            .iter()
            .all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && bytes.first() != Some(&b'-')
        && bytes.last() != Some(&b'-')
}

/// `text` made a DNS label: lower-cased, every run of other characters one '-', at most 63
/// long; `None` when nothing is left.
pub fn dns_label_from(text: &str) -> Option<String> {
    let mut label = String::new();
    for c in text.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            label.push(c);
        } else if !label.is_empty() && !label.ends_with('-') {
            label.push('-');
        }
    }
    label.truncate(63);
    let label = label.trim_end_matches('-');
    (!label.is_empty()).then(|| label.to_owned())
}

/// `stem`, or `stem-2`, `stem-3`, … whichever `taken` says is free first.
pub fn free_name(stem: &str, taken: impl Fn(&str) -> bool) -> String {
    if !taken(stem) {
        return stem.to_owned();
    }
    (2..)
        .map(|i| format!("{stem}-{i}"))
        .find(|n| !taken(n))
        .unwrap_or_default()
}

pub const DNS_LABEL_RULE: &str =
    "must be a DNS label: 1-63 lower-case letters, digits or '-', not starting or ending with '-'";

pub fn validate_dns_label(path: &str, value: &str, errors: &mut Vec<FieldError>) {
    if !is_dns_label(value) {
        errors.push(FieldError {
            path: path.to_owned(),
            message: DNS_LABEL_RULE.to_owned(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_labels() {
        for ok in ["ml", "team-a", "a1", &"a".repeat(63)] {
            assert!(is_dns_label(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "A", "a_b", "a.b", &"a".repeat(64)] {
            assert!(!is_dns_label(bad), "{bad}");
        }
    }

    #[test]
    fn names_become_dns_labels() {
        assert_eq!(
            dns_label_from("H100 pool (rack 3)").as_deref(),
            Some("h100-pool-rack-3")
        );
        assert_eq!(dns_label_from("--A__b--").as_deref(), Some("a-b"));
        assert_eq!(dns_label_from("Ü ber").as_deref(), Some("ber"));
        assert_eq!(dns_label_from("ä ö").as_deref(), None);
        let long = dns_label_from(&format!("{}-x", "a".repeat(62))).expect("a label");
        assert_eq!(long, "a".repeat(62));
        assert!(is_dns_label(&long));
    }
}
