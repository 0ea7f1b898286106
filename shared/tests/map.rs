//! The domain map of `docs/architecture.md`, held: every module of the shared crate imports
//! only from its own domain or from the rows above it, and no two modules of one domain import
//! each other round in a cycle. Read from the sources (test code left out), so a new import up
//! the map fails here with the file that made it.
#![allow(clippy::disallowed_methods)] // reads the crate's own sources

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

/// The rows of the map, lowest first: a domain may use the rows above its own, never its own
/// row's other domains or anything below.
const MAP: &[&[&str]] = &[
    &["common"],
    &["fleet", "accounts", "audit", "kueue"],
    &["packing"],
    &["quota"],
    &["cluster"],
    &["usage"],
    &["chargeback"],
    &["planning"],
    &["health", "inventory"],
];

fn row(domain: &str) -> usize {
    MAP.iter()
        .position(|r| r.contains(&domain))
        .unwrap_or_else(|| {
            panic!(
                "domain `{domain}` is not on the map (shared/tests/map.rs, docs/architecture.md)"
            )
        })
}

/// One source file: its domain, the module of that domain it belongs to (`None` for the
/// domain's own root file) and its text without comments and test code.
struct Source {
    file: String,
    domain: String,
    module: Option<String>,
    code: String,
}

fn sources() -> Vec<Source> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    files
        .into_iter()
        .filter(|f| {
            f.file_name()
                .is_some_and(|n| n != "tests.rs" && n != "lib.rs")
        })
        .map(|f| {
            let rel = f.strip_prefix(&src).expect("under src");
            let parts: Vec<String> = rel
                .iter()
                .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
                .collect();
            let text = std::fs::read_to_string(&f).expect("source");
            Source {
                file: rel.display().to_string(),
                domain: parts[0].clone(),
                module: parts.get(1).cloned(),
                code: without_tests(&without_literals(&without_comments(&text))),
            }
        })
        .collect()
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            walk(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn without_comments(text: &str) -> String {
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Blanks what string and character literals hold, so that braces in them do not count.
fn without_literals(code: &str) -> String {
    let chars: Vec<char> = code.chars().collect();
    let mut out = String::with_capacity(code.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == 'r'
            && matches!(chars.get(i + 1), Some('"' | '#'))
            && (i == 0 || !chars[i - 1].is_alphanumeric())
        {
            // r"…" or r#"…"#
            let hashes = chars[i + 1..].iter().take_while(|c| **c == '#').count();
            if chars.get(i + 1 + hashes) == Some(&'"') {
                let close: String = std::iter::once('"')
                    .chain(std::iter::repeat_n('#', hashes))
                    .collect();
                let body_start = i + 2 + hashes;
                let rest: String = chars[body_start..].iter().collect();
                let len = rest
                    .find(&close)
                    .map_or(rest.chars().count(), |b| rest[..b].chars().count());
                out.push_str("\"\"");
                i = body_start + len + close.chars().count();
                continue;
            }
        }
        if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            out.push_str("\"\"");
            i += 1;
            continue;
        }
        if c == '\'' {
            if chars.get(i + 1) == Some(&'\\') {
                let end = chars[i + 2..]
                    .iter()
                    .position(|c| *c == '\'')
                    .map_or(chars.len(), |p| i + 2 + p);
                out.push_str("' '");
                i = end + 1;
                continue;
            }
            if chars.get(i + 2) == Some(&'\'') {
                out.push_str("' '");
                i += 3;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    out
}

/// Drops each `#[cfg(test)]` item: a `mod tests;` line or a braced item.
fn without_tests(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let item = &rest[at + "#[cfg(test)]".len()..];
        let end = item.find([';', '{']).expect("an item after #[cfg(test)]");
        rest = if item.as_bytes()[end] == b';' {
            &item[end + 1..]
        } else {
            &item[matching_brace(item, end) + 1..]
        };
    }
    out.push_str(rest);
    out
}

fn matching_brace(text: &str, open: usize) -> usize {
    let mut depth = 0;
    for (i, c) in text[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return open + i;
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced braces")
}

/// Every path a `prefix::` tree names, expanded: `crate::{a::{b, c}, d}` → a::b, a::c, d.
fn paths_after(code: &str, prefix: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find(prefix) {
        let start = from + at;
        let before = code[..start].chars().next_back();
        from = start + prefix.len();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        tree(&code[from..], Vec::new(), &mut out);
    }
    out
}

fn tree(text: &str, head: Vec<String>, out: &mut Vec<Vec<String>>) {
    let mut path = head;
    let mut rest = text;
    loop {
        if let Some(group) = rest.strip_prefix('{') {
            let close = matching_brace(rest, 0);
            for item in split_top(&group[..close - 1]) {
                tree(item.trim(), path.clone(), out);
            }
            return;
        }
        let ident: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if ident.is_empty() {
            break;
        }
        rest = &rest[ident.len()..];
        path.push(ident);
        match rest.strip_prefix("::") {
            Some(next) => rest = next,
            None => break,
        }
    }
    if !path.is_empty() {
        out.push(path);
    }
}

fn split_top(text: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts.into_iter().filter(|p| !p.trim().is_empty()).collect()
}

#[test]
fn every_import_points_up_the_map() {
    let mut wrong = Vec::new();
    for s in sources() {
        let own = row(&s.domain);
        for path in paths_after(&s.code, "crate::") {
            let target = &path[0];
            if *target == s.domain
                || matches!(target.as_str(), "ApiError" | "ErrorCode" | "FieldError")
            {
                continue;
            }
            if row(target) >= own {
                wrong.push(format!(
                    "{} ({}) uses crate::{}",
                    s.file,
                    s.domain,
                    path.join("::")
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports down or across the map:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn no_two_modules_of_a_domain_import_each_other_round() {
    // Edges between one domain's modules: crate::domain::m and, from domain/x.rs, super::m.
    let sources = sources();
    let modules: BTreeSet<(String, String)> = sources
        .iter()
        .filter_map(|s| s.module.clone().map(|m| (s.domain.clone(), m)))
        .collect();
    let mut edges: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for s in &sources {
        let Some(from) = &s.module else { continue };
        let nested = s.file.matches('/').count() > 1;
        let mut targets: Vec<String> = paths_after(&s.code, "crate::")
            .into_iter()
            .filter(|p| p[0] == s.domain && p.len() > 1)
            .map(|p| p[1].clone())
            .collect();
        if !nested {
            targets.extend(
                paths_after(&s.code, "super::")
                    .into_iter()
                    .map(|p| p[0].clone()),
            );
        }
        for to in targets {
            if to != *from && modules.contains(&(s.domain.clone(), to.clone())) {
                edges
                    .entry((s.domain.clone(), from.clone()))
                    .or_default()
                    .insert(to);
            }
        }
    }
    for (domain, module) in &modules {
        let mut seen = BTreeSet::new();
        let mut stack: Vec<Vec<String>> = vec![vec![module.clone()]];
        while let Some(trail) = stack.pop() {
            let last = trail.last().expect("a trail").clone();
            for next in edges.get(&(domain.clone(), last)).into_iter().flatten() {
                assert!(
                    next != module,
                    "a cycle in {domain}: {} → {next}",
                    trail.join(" → ")
                );
                if seen.insert(next.clone()) {
                    let mut longer = trail.clone();
                    longer.push(next.clone());
                    stack.push(longer);
                }
            }
        }
    }
}

#[test]
fn the_reader_expands_use_trees() {
    let code = "use crate::{a::{b, c::D}, e};\nlet x = crate::f::g(1); use xcrate::h;";
    let got: Vec<String> = paths_after(code, "crate::")
        .iter()
        .map(|p| p.join("::"))
        .collect();
    assert_eq!(got, ["a::b", "a::c::D", "e", "f::g"]);
    assert_eq!(
        without_tests("fn a() {}\n#[cfg(test)]\nmod tests { fn b() { crate::x(); } }\nfn c() {}"),
        "fn a() {}\n\nfn c() {}"
    );
}
