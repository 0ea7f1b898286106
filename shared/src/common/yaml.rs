//! Block-style YAML from JSON values: what the Kueue, KEDA and GitOps files are written with.

use serde_json::Value;

/// Block-style YAML for a JSON value (maps and lists indented by two spaces; strings quoted
/// whenever plain YAML could read them as something else).
pub fn to_yaml(value: &Value) -> String {
    let mut out = String::new();
    write_yaml(value, 0, &mut out);
    out
}

fn write_yaml(value: &Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                out.push_str(&format!("{pad}{}:", scalar_key(k)));
                write_child(v, indent, out);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for item in items {
                out.push_str(&format!("{pad}-"));
                match item {
                    Value::Object(m) if !m.is_empty() => {
                        // The first key on the dash's line, the rest aligned under it.
                        let mut first = true;
                        for (k, v) in m {
                            if first {
                                out.push_str(&format!(" {}:", scalar_key(k)));
                                first = false;
                            } else {
                                out.push_str(&format!("{pad}  {}:", scalar_key(k)));
                            }
                            write_child(v, indent + 2, out);
                        }
                    }
                    other => write_child(other, indent, out),
                }
            }
        }
        other => out.push_str(&format!("{pad}{}\n", scalar(other))),
    }
}

fn write_child(v: &Value, indent: usize, out: &mut String) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            out.push('\n');
            write_yaml(v, indent + 2, out);
        }
        Value::Array(a) if !a.is_empty() => {
            out.push('\n');
            write_yaml(v, indent + 2, out);
        }
        other => out.push_str(&format!(" {}\n", scalar(other))),
    }
}

fn scalar_key(k: &str) -> String {
    if k.chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
        && !k.is_empty()
    {
        k.to_owned()
    } else {
        quote(k)
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => quote(s),
        Value::Array(_) => "[]".to_owned(),
        Value::Object(_) => "{}".to_owned(),
    }
}

/// Double-quoted YAML string (JSON escaping is valid YAML).
fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn yaml_rendering() {
        let v = json!({"a": 1, "b": {"c": "x y", "d": []}, "e": [{"f": true, "g": [1, 2]}, "h"], "i": {}});
        assert_eq!(
            to_yaml(&v),
            "a: 1\nb:\n  c: \"x y\"\n  d: []\ne:\n  - f: true\n    g:\n      - 1\n      - 2\n  - \"h\"\ni: {}\n"
        );
    }
}
