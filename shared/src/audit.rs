//! The audit log as the API shows it: who did what, when, to which object, with the object
//! before and after; its filters and its CSV form.
//!
//! Invariants: entries are never changed or removed (the database refuses); a page holds at
//! most [`MAX_PER_PAGE`] entries; the CSV quotes every field that needs it (RFC 4180).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{common::day::Day, common::error::FieldError};

pub const MAX_PER_PAGE: u32 = 200;
pub const DEFAULT_PER_PAGE: u32 = 50;

/// What an entry is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    QuotaRequest,
    Flavor,
    TeamQueue,
    Inventory,
    /// Kueue objects applied again or taken from another field manager.
    ClusterObject,
    /// A chargeback month closed or reopened.
    ChargebackMonth,
    /// A team's monthly budget set or removed.
    Budget,
}

impl Kind {
    pub const ALL: [Kind; 7] = [
        Kind::QuotaRequest,
        Kind::Flavor,
        Kind::TeamQueue,
        Kind::Inventory,
        Kind::ClusterObject,
        Kind::ChargebackMonth,
        Kind::Budget,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::QuotaRequest => "quota_request",
            Kind::Flavor => "flavor",
            Kind::TeamQueue => "team_queue",
            Kind::Inventory => "inventory",
            Kind::ClusterObject => "cluster_object",
            Kind::ChargebackMonth => "chargeback_month",
            Kind::Budget => "budget",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub id: i64,
    /// RFC 3339, UTC.
    pub at: String,
    /// A username, or `gpufleet` for what the console did itself.
    pub actor: String,
    pub kind: Kind,
    pub action: String,
    pub subject: String,
    pub team: Option<String>,
    pub before: Option<Value>,
    pub after: Option<Value>,
}

/// `GET /api/quota/audit`: one page, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Page {
    pub entries: Vec<Entry>,
    /// Entries matching the filters, on every page.
    pub total: i64,
    pub page: u32,
    pub per_page: u32,
}

/// The audit's filters, as query parameters (all optional; days are UTC and inclusive).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Query {
    pub team: Option<String>,
    pub actor: Option<String>,
    pub kind: Option<String>,
    pub from: Option<String>,
    pub to: Option<String>,
    pub page: Option<u32>,
    pub per_page: Option<u32>,
}

/// [`Query`] checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    pub team: Option<String>,
    pub actor: Option<String>,
    pub kind: Option<Kind>,
    pub from: Option<Day>,
    pub to: Option<Day>,
    pub page: u32,
    pub per_page: u32,
}

impl Query {
    pub fn filter(&self) -> Result<Filter, Vec<FieldError>> {
        let mut errors = Vec::new();
        let mut bad = |path: &str, message: String| {
            errors.push(FieldError {
                path: path.into(),
                message,
            })
        };
        let kind = self
            .kind
            .as_deref()
            .filter(|k| !k.is_empty())
            .and_then(|k| {
                let kind = Kind::parse(k);
                if kind.is_none() {
                    let known: Vec<&str> = Kind::ALL.iter().map(|k| k.as_str()).collect();
                    bad("kind", format!("one of {}", known.join(", ")));
                }
                kind
            });
        let mut day = |path: &str, text: &Option<String>| {
            text.as_deref().filter(|t| !t.is_empty()).and_then(|t| {
                let day = Day::parse(t);
                if day.is_none() {
                    bad(path, format!("{t:?} is not a date written YYYY-MM-DD"));
                }
                day
            })
        };
        let (from, to) = (day("from", &self.from), day("to", &self.to));
        let page = self.page.unwrap_or(1);
        let per_page = self.per_page.unwrap_or(DEFAULT_PER_PAGE);
        if page == 0 {
            bad("page", "pages count from 1".into());
        }
        if per_page == 0 || per_page > MAX_PER_PAGE {
            bad("per_page", format!("1-{MAX_PER_PAGE}"));
        }
        if let (Some(f), Some(t)) = (from, to)
            && t < f
        {
            bad("to", format!("{t} is before {f}"));
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        let text = |t: &Option<String>| t.clone().filter(|t| !t.trim().is_empty());
        Ok(Filter {
            team: text(&self.team),
            actor: text(&self.actor),
            kind,
            from,
            to,
            page,
            per_page,
        })
    }
}

pub const CSV_HEADER: &str = "id,at_utc,actor,kind,action,subject,team,before_json,after_json\r\n";

/// Entries as CSV rows (RFC 4180: CRLF, fields with a comma, quote or line break quoted).
pub fn csv_rows(entries: &[Entry]) -> String {
    let mut out = String::new();
    for e in entries {
        let json = |v: &Option<Value>| v.as_ref().map(Value::to_string).unwrap_or_default();
        let fields = [
            e.id.to_string(),
            e.at.clone(),
            e.actor.clone(),
            e.kind.as_str().to_owned(),
            e.action.clone(),
            e.subject.clone(),
            e.team.clone().unwrap_or_default(),
            json(&e.before),
            json(&e.after),
        ];
        let quoted: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
        out.push_str(&quoted.join(","));
        out.push_str("\r\n");
    }
    out
}

fn csv_field(field: &str) -> String {
    // A leading = + - @ would run as a formula in a spreadsheet: quote and prefix it.
    let formula = field.starts_with(['=', '+', '-', '@']);
    if formula {
        format!("\"'{}\"", field.replace('"', "\"\""))
    } else if field.contains([',', '"', '\r', '\n']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_what_needs_it_and_defuses_formulas() {
        let entry = Entry {
            id: 7,
            at: "2026-12-01T17:40:00Z".into(),
            actor: "alex".into(),
            kind: Kind::QuotaRequest,
            action: "approve".into(),
            subject: "quota request 3".into(),
            team: Some("research".into()),
            before: None,
            after: Some(serde_json::json!({"comment": "ok, \"go\""})),
        };
        assert_eq!(
            csv_rows(std::slice::from_ref(&entry)),
            "7,2026-12-01T17:40:00Z,alex,quota_request,approve,quota request 3,research,,\"{\"\"comment\"\":\"\"ok, \\\"\"go\\\"\"\"\"}\"\r\n"
        );
        assert_eq!(csv_field("=cmd()"), "\"'=cmd()\"");
        assert_eq!(csv_field("plain"), "plain");
    }

    #[test]
    fn filters_are_checked_by_name() {
        let q = Query {
            kind: Some("quota".into()),
            from: Some("2026-12-05".into()),
            to: Some("2026-12-01".into()),
            page: Some(0),
            per_page: Some(500),
            ..Query::default()
        };
        let paths: Vec<String> = q
            .filter()
            .expect_err("bad")
            .into_iter()
            .map(|e| e.path)
            .collect();
        assert_eq!(paths, ["kind", "page", "per_page", "to"]);
        let ok = Query {
            team: Some(" ".into()),
            kind: Some("flavor".into()),
            ..Query::default()
        }
        .filter()
        .expect("good");
        assert_eq!(
            (ok.team, ok.kind, ok.page, ok.per_page),
            (None, Some(Kind::Flavor), 1, 50)
        );
    }
}
