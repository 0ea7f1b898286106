//! The Chargeback page. Statements are not built yet; what they will rest on is: the usage
//! ingest from Prometheus, whose state (each source's watermark and lag, errors, open gaps,
//! unattributed namespaces, demo data or not) this page shows.

use leptos::prelude::*;
use shared::usage::UsageHealth;

use crate::{api, ui::ErrorBox};

#[component]
pub fn Chargeback() -> impl IntoView {
    let health = LocalResource::new(api::health);
    view! {
        <section>
            <h1>"Chargeback"</h1>
            <p class="notyet">
                "Not built yet: statements (cost by allocation and by measured use, idle sharing, "
                "closed months). Their source, the GPUs' measured use, is ingested as shown below."
            </p>
            <h2>"Usage ingest"</h2>
            {move || health.get().map(|result| match result {
                Ok(h) => match h.usage {
                    Some(usage) => ingest(usage).into_any(),
                    None => view! { <p class="error">"The database does not answer."</p> }.into_any(),
                },
                Err(error) => view! { <ErrorBox error/> }.into_any(),
            })}
        </section>
    }
}

fn lag(seconds: Option<i64>) -> String {
    match seconds {
        None => "—".to_owned(),
        Some(s) if s < 3600 => format!("{} min", s / 60),
        Some(s) => format!("{} h {} min", s / 3600, s % 3600 / 60),
    }
}

fn ingest(usage: UsageHealth) -> impl IntoView {
    let Some(url) = usage.prometheus.clone() else {
        return view! {
            <p data-test="usage-ingest">
                "Usage ingest is off: no Prometheus is configured (GPUFLEET_PROMETHEUS_URL)."
            </p>
        }
        .into_any();
    };
    let rows: Vec<_> = usage
        .sources
        .iter()
        .map(|s| {
            let said = s
                .last_error
                .clone()
                .map(|e| view! { <span class="error">{e}</span> }.into_any())
                .or_else(|| {
                    s.note
                        .clone()
                        .map(|n| view! { <span class="warning">{n}</span> }.into_any())
                });
            view! {
                <tr>
                    <td>{s.source.clone()}</td>
                    <td>{s.watermark.clone().unwrap_or_else(|| "not yet".to_owned())}</td>
                    <td>{lag(s.lag_seconds)}</td>
                    <td>{s.last_success_at.clone().unwrap_or_else(|| "never".to_owned())}</td>
                    <td>{said}</td>
                </tr>
            }
        })
        .collect();
    let gaps: Vec<_> = usage
        .open_gaps
        .iter()
        .map(|g| {
            view! {
                <li>{format!("{} {} → {} ({} attempts): {}", g.source, g.from, g.to, g.attempts, g.error)}</li>
            }
        })
        .collect();
    view! {
        {usage.demo.then(|| view! {
            <p class="demo" data-test="demo-data">
                "Demo data: these metrics come from gpufleet's demo exporter, not from your GPUs."
            </p>
        })}
        <p data-test="usage-ingest">{format!("Reading {url} every minute; minutes are stored once they are two minutes old.")}</p>
        <table class="usage-sources">
            <thead><tr><th>"Source"</th><th>"Ingested up to (UTC)"</th><th>"Lag"</th><th>"Last success"</th><th>"Error or note"</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
        {if gaps.is_empty() {
            view! { <p>"No open gaps."</p> }.into_any()
        } else {
            view! { <p>"Windows not ingested yet, retried:"</p><ul data-test="usage-gaps">{gaps}</ul> }.into_any()
        }}
        {(!usage.unattributed.is_empty()).then(|| view! {
            <p data-test="unattributed">
                {format!("Used in the last 7 days by namespaces no team owns (charged to no one until a team claims them): {}", usage.unattributed.join(", "))}
            </p>
        })}
    }
    .into_any()
}
