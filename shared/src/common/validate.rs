//! Field rules that several domains share (accounts, scenarios, quotas, windows of days): each pushes a
//! [`FieldError`] naming the path it was given.

use crate::common::{day::Day, error::FieldError};

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

/// `text` made a DNS label: ASCII letters lower-cased, every run of other characters one '-', at most 63
/// long; `None` when nothing is left.
pub fn dns_label_from(text: &str) -> Option<String> {
    let mut label = String::new();
    for c in text.chars().map(|c| c.to_ascii_lowercase()) {
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

/// Names people read in YAML, CSV and the audit log hold only what shows: no control
/// characters, no line or paragraph separators, no bidirectional overrides or isolates (which
/// make text read in another order than it is stored, CVE-2021-42574's "Trojan Source"), no
/// zero-width or invisible characters (joiners, the soft hyphen, invisible operators, Hangul
/// fillers that pass for spaces, tag characters that spell hidden text).
pub fn validate_visible(path: &str, text: &str, errors: &mut Vec<FieldError>) {
    find_hidden(path, text, |_| false, errors);
}

/// [`validate_visible`] for texts of several lines (a justification): line breaks and tabs
/// are allowed, nothing else that does not show.
pub fn validate_visible_lines(path: &str, text: &str, errors: &mut Vec<FieldError>) {
    find_hidden(path, text, |c| matches!(c, '\n' | '\r' | '\t'), errors);
}

/// The one rule of what does not show, less what `allowed` lets through.
fn find_hidden(
    path: &str,
    text: &str,
    allowed: impl Fn(char) -> bool,
    errors: &mut Vec<FieldError>,
) {
    let hidden = |c: char| {
        c.is_control()
            || matches!(c, '\u{2028}' | '\u{2029}')
            || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
            || matches!(
                c,
                '\u{200B}'..='\u{200F}' | '\u{061C}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}'
            )
            || matches!(
                c,
                '\u{00AD}'
                    | '\u{034F}'
                    | '\u{115F}'
                    | '\u{1160}'
                    | '\u{180E}'
                    | '\u{3164}'
                    | '\u{FFA0}'
            )
            || matches!(c, '\u{E0000}'..='\u{E007F}')
    };
    if let Some(c) = text.chars().find(|&c| hidden(c) && !allowed(c)) {
        errors.push(FieldError {
            path: path.to_owned(),
            message: format!(
                "holds U+{:04X}, a character that does not show or reorders the text; type it again without it",
                u32::from(c)
            ),
        });
    }
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

#[cfg(test)]
mod visible_tests {
    use super::validate_visible;

    #[test]
    fn hidden_and_reordering_characters_are_refused() {
        let check = |text: &str| {
            let mut errors = Vec::new();
            validate_visible("name", text, &mut errors);
            errors.first().map(|e| e.message.clone())
        };
        assert_eq!(check("CC-1001 Forschung & Entwicklung"), None);
        assert_eq!(check("Zoë Müller-李"), None);
        for (text, code) in [
            ("CC\u{202E}1001", "U+202E"),
            ("a\u{2067}b", "U+2067"),
            ("zero\u{200B}width", "U+200B"),
            ("bom\u{FEFF}", "U+FEFF"),
            ("line\nbreak", "U+000A"),
            // what the third hardening round still found accepted
            ("para\u{2028}graph", "U+2028"),
            ("tag\u{E0041}", "U+E0041"),
            ("filler\u{3164}", "U+3164"),
            ("bell\u{7}", "U+0007"),
            ("soft\u{AD}hyphen", "U+00AD"),
        ] {
            let message = check(text).unwrap_or_default();
            assert!(message.contains(code), "{text:?}: {message}");
        }
        // several lines: breaks and tabs are text, the rest is not
        let lines = |text: &str| {
            let mut errors = Vec::new();
            super::validate_visible_lines("justification", text, &mut errors);
            errors.first().map(|e| e.message.clone())
        };
        assert_eq!(lines("Why:\n\t- a model\r\n- its data"), None);
        assert!(
            lines("hidden\u{202E}txet")
                .unwrap_or_default()
                .contains("U+202E")
        );
        assert!(lines("bell\u{7}").unwrap_or_default().contains("U+0007"));
    }
}

/// A required day on `path`, written `YYYY-MM-DD` (UTC).
pub fn required_day(path: &str, text: Option<&str>, errors: &mut Vec<FieldError>) -> Option<Day> {
    let (parsed, message) = match text {
        None | Some("") => (None, "required: a date written YYYY-MM-DD (UTC)".to_owned()),
        Some(t) => (
            Day::parse(t),
            format!("{t:?} is not a date written YYYY-MM-DD"),
        ),
    };
    if parsed.is_none() {
        errors.push(FieldError {
            path: path.to_owned(),
            message,
        });
    }
    parsed
}

/// The days `from` to `to`, both included, as a window of at most `max_days` (`what` names
/// it in the error, on `to`): the day after `to`.
pub fn day_window(
    from: Day,
    to: Day,
    max_days: i32,
    what: &str,
    errors: &mut Vec<FieldError>,
) -> Option<Day> {
    let days = from.days_until(to) + 1;
    let message = if days < 1 {
        format!("{to} is before {from}")
    } else if days > max_days {
        format!("{days} days: {what} covers at most {max_days}")
    } else {
        return Some(to.plus(1));
    };
    errors.push(FieldError {
        path: "to".to_owned(),
        message,
    });
    None
}
