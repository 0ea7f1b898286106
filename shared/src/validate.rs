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
}
