//! The Chargeback page: a statement for any run of UTC days (teams' cost by allocation and by
//! measured use, idle shares, the fleet, notes, adjustments of closed months), its CSV, closing
//! and reopening months; a team's day drilled down to every minute row and its sources; and the
//! state of the usage ingest it rests on (each source's watermark and lag, errors, open gaps,
//! unattributed namespaces, demo data or not); and each inference service's latency beside
//! how its GPUs are shared and its co-tenants' load (noisy neighbours).

use gloo_net::http::Method;
use leptos::{prelude::*, task::spawn_local};
use shared::{
    ApiError,
    accounts::Role,
    chargeback::{
        CloseMonth, ClosedMonth, Drill, DrillDay, Hours, IdleShare, ModelLine, Reopen, Statement,
        TeamLine, budget::NewBudget,
    },
    common::day::Day,
    common::label::{ALLOCATED, BUSY, GLOSSARY, IDLE, UNOBSERVED},
    common::money::{dollars, parse_dollars},
    usage::{
        UsageHealth,
        neighbours::{LatencyFigures, format_ms},
    },
};

use shared::usage::LiveMinute;
use wasm_bindgen::{JsCast, JsValue, closure::Closure};
use web_sys::{EventSource, MessageEvent};

use super::quota::today;
use crate::{
    api,
    auth::use_me,
    ui::{Chart, ErrorBox},
};
use gpufleet_web::{figure::Figure, js};

#[component]
pub fn Chargeback() -> impl IntoView {
    let health = LocalResource::new(api::health);
    view! {
        <section>
            <h1>"Chargeback"</h1>
            <Statements/>
            <Budgets/>
            <LiveUse/>
            <Neighbours/>
            <h2>"Usage ingest"</h2>
            {move || health.get().map(|result| match result {
                Ok(h) => {
                    let html = h.usage.as_ref().map_or_else(
                        || r#"<p class="error">The database does not answer.</p>"#.to_owned(),
                        ingest_html,
                    );
                    view! { <div inner_html=html></div> }.into_any()
                }
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

/// The usage ingest's state, as one HTML node.
fn ingest_html(usage: &UsageHealth) -> String {
    let Some(url) = &usage.prometheus else {
        return r#"<p data-test="usage-ingest">Usage ingest is off: no Prometheus is configured (GPUFLEET_PROMETHEUS_URL).</p>"#.to_owned();
    };
    let rows: String = usage
        .sources
        .iter()
        .map(|s| {
            let said = match (&s.last_error, &s.note) {
                (Some(e), _) => format!(r#"<span class="error">{}</span>"#, js::escape(e)),
                (None, Some(n)) => format!(r#"<span class="warning">{}</span>"#, js::escape(n)),
                (None, None) => String::new(),
            };
            format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{said}</td></tr>",
                js::escape(&s.source),
                js::escape(s.watermark.as_deref().unwrap_or("not yet")),
                lag(s.lag_seconds),
                js::escape(s.last_success_at.as_deref().unwrap_or("never")),
            )
        })
        .collect();
    let gaps: String = usage
        .open_gaps
        .iter()
        .map(|g| {
            js::escape(&format!(
                "{} {} → {} ({} attempts): {}",
                g.source, g.from, g.to, g.attempts, g.error
            ))
        })
        .map(|g| format!("<li>{g}</li>"))
        .collect();
    let demo = if usage.demo {
        r#"<p class="demo" data-test="demo-data">Demo data: these metrics come from gpufleet's demo exporter, not from your GPUs.</p>"#
    } else {
        ""
    };
    let gaps = if gaps.is_empty() {
        "<p>No open gaps.</p>".to_owned()
    } else {
        format!(
            r#"<p>Windows not ingested yet, retried:</p><ul data-test="usage-gaps">{gaps}</ul>"#
        )
    };
    let unattributed = if usage.unattributed.is_empty() {
        String::new()
    } else {
        format!(
            r#"<p data-test="unattributed">Used in the last 7 days by namespaces no team owns (charged to no one until a team claims them): {}</p>"#,
            js::escape(&usage.unattributed.join(", "))
        )
    };
    format!(
        r#"{demo}<p data-test="usage-ingest">Reading {} every minute; minutes are stored once they are two minutes old.</p><table class="usage-sources"><thead><tr><th>Source</th><th>Ingested up to (UTC)</th><th>Lag</th><th>Last success</th><th>Error or note</th></tr></thead><tbody>{rows}</tbody></table>{gaps}{unattributed}"#,
        js::escape(url)
    )
}

/// The statement's path; `format` `json`, `csv` or `focus` (FinOps FOCUS CSV).
fn statement_path(
    from: &str,
    to: &str,
    idle: IdleShare,
    lend_credit: &str,
    format: &str,
) -> String {
    format!(
        "/api/chargeback/statement?from={from}&to={to}&idle={}&lend_credit={}&format={format}",
        idle.name(),
        js_sys::encode_uri_component(lend_credit),
    )
}

/// The period picker, the statement's tables, its CSV, and closing or reopening its month.
#[component]
fn Statements() -> impl IntoView {
    let me = use_me();
    let has = move |role: Role| me.with(|m| m.as_ref().is_some_and(|m| m.roles.contains(&role)));
    // finance, approvers and admins read every team and the closed months; a team member
    // reads their teams' lines (the statement says which months are closed)
    let reader =
        Signal::derive(move || has(Role::Finance) || has(Role::Approver) || has(Role::Admin));
    // the month to date: what finance asks first (last month is one click away)
    let now = today();
    let period = Period {
        from: RwSignal::new(now.first_of_month().to_string()),
        to: RwSignal::new(now.to_string()),
        idle: RwSignal::new(IdleShare::Allocation),
        lend_credit: RwSignal::new("0".to_owned()),
        shown: RwSignal::new(None),
        failure: RwSignal::new(None),
        months: RwSignal::new(Vec::new()),
        reader,
        asked: StoredValue::new(0),
    };
    period.load();
    view! {
        <PeriodForm period reader/>
        {move || period.failure.get().map(|error| view! { <ErrorBox error/> })}
        {move || period.shown.get().map(statement_view)}
        <MonthState period reader/>
    }
}

/// The statement asked for: its period and how idle time and lending are charged, and what
/// the server answered (the statement, or why not, and the closed months).
#[derive(Clone, Copy)]
struct Period {
    from: RwSignal<String>,
    to: RwSignal<String>,
    idle: RwSignal<IdleShare>,
    lend_credit: RwSignal<String>,
    shown: RwSignal<Option<Statement>>,
    failure: RwSignal<Option<ApiError>>,
    months: RwSignal<Vec<ClosedMonth>>,
    /// Whether the closed months are the caller's to read (finance, approvers, admins): a team
    /// member is never sent to ask for them.
    reader: Signal<bool>,
    /// Statements asked for so far: only the last one asked for is shown, so an earlier
    /// answer arriving late neither replaces it nor redraws the page under the reader's hands.
    asked: StoredValue<u64>,
}

impl Period {
    /// The statement's path in `format` (`json`, `csv` or `focus`).
    fn path(self, format: &str) -> String {
        statement_path(
            &self.from.get(),
            &self.to.get(),
            self.idle.get(),
            &self.lend_credit.get(),
            format,
        )
    }

    /// The unobserved GPU-hours and their cost in the statement shown, when it is `month`'s
    /// (`YYYY-MM`) whole and has any.
    fn unobserved(self, month: &str) -> Option<(Hours, i64)> {
        self.shown.with_untracked(|s| {
            let s = s.as_ref()?;
            let whole = s.from.month_name() == month
                && s.from == s.from.first_of_month()
                && s.to_inclusive.plus(1) == s.from.next_month();
            let f = s
                .fleet
                .as_ref()
                .filter(|f| whole && f.unobserved_gpu_hours.0 > 0)?;
            Some((f.unobserved_gpu_hours, f.unobserved_cost_cents))
        })
    }

    /// Asks for the statement and the closed months again.
    fn load(self) {
        let path = untrack(|| self.path("json"));
        let mine = self.asked.get_value() + 1;
        self.asked.set_value(mine);
        spawn_local(async move {
            let answer = api::get::<Statement>(&path).await;
            if self.asked.get_value() != mine {
                return; // asked again since: that answer is shown
            }
            match answer {
                Ok(statement) => {
                    self.failure.set(None);
                    self.shown.set(Some(statement));
                }
                Err(err) => self.failure.set(Some(err)),
            }
            if !self.reader.get_untracked() {
                return;
            }
            if let Ok(list) = api::get::<Vec<ClosedMonth>>("/api/chargeback/months").await {
                self.months.set(list);
            }
        });
    }

    /// The month the period is, when it is exactly one whole month.
    fn whole_month(self) -> Option<String> {
        let (f, t) = (Day::parse(&self.from.get())?, Day::parse(&self.to.get())?);
        (f == f.first_of_month() && t == f.next_month().plus(-1)).then(|| f.month_name())
    }
}

/// The period, and for readers of every team how idle time is shared and lenders credited;
/// the statement's CSV and FOCUS CSV for the same.
#[component]
fn PeriodForm(period: Period, reader: Signal<bool>) -> impl IntoView {
    let Period {
        from,
        to,
        idle,
        lend_credit,
        ..
    } = period;
    let now = today();
    view! {
        <form class="period" data-test="statement-form" on:submit=move |ev| { ev.prevent_default(); period.load(); }>
            <label>"From (UTC) " <input type="text" placeholder="YYYY-MM-DD" name="from" prop:value=move || from.get()
                on:change=move |ev| from.set(event_target_value(&ev))/></label>
            <label>" to " <input type="text" placeholder="YYYY-MM-DD" name="to" prop:value=move || to.get()
                on:change=move |ev| to.set(event_target_value(&ev))/></label>
            // a team member's statement is their teams' lines, idle shared by allocation, no
            // lending credit: the other choices are finance's
            {move || if reader.get() { Some(view! {
            <label>" idle shared " <select name="idle" on:change=move |ev| {
                    if let Some(choice) = IdleShare::parse(&event_target_value(&ev)) { idle.set(choice) }
                }>
                {IdleShare::ALL.into_iter().map(|choice| view! {
                    <option value=choice.name() selected=move || idle.get() == choice>{idle_label(choice)}</option>
                }).collect_view()}
            </select></label>
            <label>" lenders credited " <input type="number" name="lend_credit" min="0" max="100" step="1"
                style="width: 4rem" prop:value=move || lend_credit.get()
                on:change=move |ev| lend_credit.set(event_target_value(&ev))/>
                " % of the rate per GPU-hour lent"</label>
            }) } else { None }}
            " " <button type="submit" data-test="show-statement">"Show"</button>
            " " <button type="button" data-test="month-to-date" on:click=move |_| {
                    from.set(now.first_of_month().to_string());
                    to.set(now.to_string());
                    period.load();
                }>"Month to date"</button>
            " " <button type="button" data-test="last-month" on:click=move |_| {
                    let month = now.first_of_month().plus(-1).first_of_month();
                    from.set(month.to_string());
                    to.set(month.next_month().plus(-1).to_string());
                    period.load();
                }>"Last month"</button>
            " " <a data-test="statement-csv" download="" href=move || period.path("csv")>"Download CSV"</a>
            " " <a data-test="statement-focus" download="" title="FinOps FOCUS 1.2: each team's charge per flavor and day"
                href=move || period.path("focus")>"FOCUS CSV"</a>
        </form>
    }
}

/// For a period of one whole month: whether it is closed, with closing (finance, admins) or
/// reopening (admins, with a reason); what closing or reopening answered is shown by the
/// buttons, not at the page's top, out of sight.
#[component]
fn MonthState(period: Period, reader: Signal<bool>) -> impl IntoView {
    let me = use_me();
    let has = move |role: Role| me.with(|m| m.as_ref().is_some_and(|m| m.roles.contains(&role)));
    let reason = RwSignal::new(String::new());
    // the month being confirmed
    let confirming = RwSignal::new(None::<String>);
    let month_failure = RwSignal::new(None::<ApiError>);
    let act = move |path: String, body: MonthMove| {
        spawn_local(async move {
            let result: Result<Vec<ClosedMonth>, ApiError> = match body {
                MonthMove::Close(b) => api::send(Method::POST, &path, Some(&b)).await,
                MonthMove::Reopen(b) => api::send(Method::POST, &path, Some(&b)).await,
            };
            confirming.set(None);
            match result {
                Ok(list) => {
                    month_failure.set(None);
                    period.months.set(list);
                    period.load();
                }
                Err(err) => month_failure.set(Some(err)),
            }
        });
    };
    view! {
        {move || period.whole_month().filter(|_| reader.get()).map(|month| {
            let closed = period.months.with(|m| m.iter().find(|c| c.month == month).cloned());
            match closed {
                Some(c) => view! {
                    <p data-test="month-state">{format!("{} is closed ({} by {}): its figures are frozen.",
                        c.month, c.closed_at, c.closed_by.clone().unwrap_or_else(|| "the command line".to_owned()))}</p>
                    {has(Role::Admin).then(|| view! {
                        <p><label>"Why reopen it " <input type="text" name="reason"
                            prop:value=move || reason.get() on:input=move |ev| reason.set(event_target_value(&ev))/></label>
                        " " <button type="button" data-test="reopen-month" on:click=move |_| act(
                            format!("/api/chargeback/months/{}/reopen", c.month),
                            MonthMove::Reopen(Reopen { reason: reason.get_untracked() }))>"Reopen"</button></p>
                    })}
                }.into_any(),
                None => view! {
                    <p data-test="month-state">{format!("{month} is open: its figures follow the usage ingest.")}
                    {(has(Role::Finance) || has(Role::Admin)).then(|| {
                        let month = month.clone();
                        view! { " " <button type="button" data-test="close-month"
                            on:click=move |_| confirming.set(Some(month.clone()))>"Close the month"</button> }
                    })}</p>
                    {move || confirming.get().map(|month| {
                        let unobserved = period.unobserved(&month);
                        let (warning, yes) = match unobserved {
                            Some((hours, cents)) => (
                                format!("{} GPU-hours of its capacity ({}) had no DCGM sample (before the first sample, after the last, in a gap, or GPUs that never reported): closing freezes them on the platform line, billed to no team. ",
                                    hours.to_hundredths(), dollars(cents)),
                                format!("Yes, close {month} with {} unobserved GPU-hours", hours.to_hundredths()),
                            ),
                            None => (String::new(), format!("Yes, close {month}")),
                        };
                        let body = CloseMonth { accept_unobserved_gpu_hours: unobserved.map(|(hours, _)| hours) };
                        view! {
                            <p data-test="confirm-close">{format!(
                                "Close {month}? Its figures are frozen as they are now; usage ingested later shows as adjustments in the next open month, and only an admin can reopen it. {warning}"
                            )}
                            <button type="button" data-test="confirm-close-yes" on:click=move |_| act(
                                format!("/api/chargeback/months/{month}/close"), MonthMove::Close(body.clone()))>{yes}</button>
                            " " <button type="button" on:click=move |_| confirming.set(None)>"Cancel"</button></p>
                        }
                    })}
                }.into_any(),
            }
        })}
        <div data-test="month-error">{move || month_failure.get().map(|error| view! { <ErrorBox error/> })}</div>
    }
}

/// What a month's buttons send.
enum MonthMove {
    Close(CloseMonth),
    Reopen(Reopen),
}

fn idle_label(choice: IdleShare) -> &'static str {
    match choice {
        IdleShare::Allocation => "by allocation",
        IdleShare::Use => "by use",
        IdleShare::Even => "evenly",
        IdleShare::Separate => "not: a platform line",
    }
}

/// What the idle pool holds and how this statement shares it, and the lending credit, in words.
fn idle_pool_words(idle: IdleShare, lend_credit_pct: u8) -> String {
    let shared = match idle {
        IdleShare::Allocation => {
            "shared among the teams in proportion to their allocated GPU-hours"
        }
        IdleShare::Use => "shared among the teams in proportion to their busy GPU-hours",
        IdleShare::Even => {
            "shared equally among the teams with an allocation in the period (a team without one pays no share)"
        }
        IdleShare::Separate => "not shared: it stays on the platform line",
    };
    let lending = match lend_credit_pct {
        0 => "No lending credit (0%).".to_owned(),
        pct => format!(
            "Lenders are credited {pct}% of the rate for each GPU-hour others borrowed of their unused quota; the borrowers pay it as a lending fee."
        ),
    };
    format!(
        "The idle pool, the capacity cost not charged by use (the teams' own idle, the unallocated capacity and the use of namespaces no team owns), is {shared}. {lending}"
    )
}

/// One team's line of the statement: what it is charged, and on what basis.
fn team_row(t: &TeamLine) -> impl IntoView + use<> {
    view! {
        <tr data-team=t.team.clone()>
            <td>{t.team.clone()}</td><td>{t.cost_centre.clone()}</td>
            <td class="num charge">{dollars(t.charge_cents)}</td>
            <td class="num">{dollars(t.cost_by_allocation_cents)}</td>
            <td class="num">{dollars(t.cost_by_use_cents)}</td>
            <td class="num">{dollars(t.idle_cost_cents)}</td>
            <td class="num">{dollars(t.idle_share_cents)}</td>
            <td class="num">{dollars(t.lending_fee_cents - t.lending_credit_cents)}</td>
        </tr>
    }
}

/// One team's GPU-hours: what its charge is made of.
fn hours_row(t: &TeamLine) -> impl IntoView + use<> {
    view! {
        <tr data-team=t.team.clone()>
            <td>{t.team.clone()}</td>
            <td class="num">{t.allocated_gpu_hours.to_hundredths()}</td>
            <td class="num">{t.busy_gpu_hours.to_hundredths()}</td>
            <td class="num">{t.utilisation_pct.clone().map(|u| format!("{u}%")).unwrap_or_default()}</td>
            <td class="num">{t.idle_gpu_hours.to_hundredths()}</td>
            <td class="num">{t.unobserved_allocated_gpu_hours.to_hundredths()}</td>
            <td class="num">{t.borrowed_gpu_hours.to_hundredths()}</td>
            <td class="num">{t.lent_gpu_hours.to_hundredths()}</td>
        </tr>
    }
}

/// One served model's cost per million tokens, by use and by allocation.
fn model_row(m: &ModelLine) -> impl IntoView + use<> {
    let per_million = |c: Option<i64>| c.map(dollars).unwrap_or_else(|| "—".to_owned());
    view! {
        <tr data-model=m.model.clone()>
            <td>{m.team.clone()}</td><td>{m.model.clone()}</td>
            <td class="num" title=m.shared_by.words()>{format!("{:.1}%", m.share_of_team_ppm as f64 / 10_000.0)}</td>
            <td class="num">{m.prompt_tokens}</td><td class="num">{m.generation_tokens}</td>
            <td class="num">{per_million(m.input_cents_per_million_by_use)}</td>
            <td class="num">{per_million(m.output_cents_per_million_by_use)}</td>
            <td class="num">{per_million(m.input_cents_per_million_by_allocation)}</td>
            <td class="num">{per_million(m.output_cents_per_million_by_allocation)}</td>
        </tr>
    }
}

fn statement_view(s: Statement) -> impl IntoView {
    let rows: Vec<_> = s.teams.iter().map(team_row).collect();
    let hours: Vec<_> = s.teams.iter().map(hours_row).collect();
    let fleet = s.fleet.clone().map(|f| {
        view! {
            <p data-test="fleet-line">{format!(
                "Fleet: {} GPU-hours of capacity costing {}; {} allocated, {} busy; {} unallocated ({}); {} unobserved, with no DCGM sample ({}, on the platform line, not shared as idle). Idle pool {}; platform line {}.",
                f.capacity_gpu_hours.to_hundredths(), dollars(f.capacity_cost_cents),
                f.allocated_gpu_hours.to_hundredths(), f.busy_gpu_hours.to_hundredths(),
                f.unallocated_gpu_hours.to_hundredths(), dollars(f.unallocated_cost_cents),
                f.unobserved_gpu_hours.to_hundredths(), dollars(f.unobserved_cost_cents),
                dollars(f.idle_pool_cents), dollars(f.platform_cents)
            )}</p>
        }
    });
    let unattributed = (!s.unattributed.is_empty()).then(|| {
        let named: Vec<String> = s
            .unattributed
            .iter()
            .map(|u| format!("{} ({} GPU-hours allocated, {} busy)", u.namespace,
                u.allocated_gpu_hours.to_hundredths(), u.busy_gpu_hours.to_hundredths()))
            .collect();
        view! { <p data-test="unattributed">{format!("Namespaces using GPUs without a team (in the idle pool): {}.", named.join("; "))}</p> }
    });
    let adjustments: Vec<_> = s
        .adjustments
        .iter()
        .map(|a| view! { <li>{format!("{} (closed): {} {} GPU-hours allocated, {} by allocation, {} by use",
            a.month, a.team, a.allocated_gpu_hours.to_hundredths(), dollars(a.cost_by_allocation_cents), dollars(a.cost_by_use_cents))}</li> })
        .collect();
    // How each charge is made, in words, with the team's own numbers.
    let how: Vec<_> = s
        .teams
        .iter()
        .map(|t| view! { <li>{format!("{}: {} by use + {} idle share + {} lending fee − {} lending credit = {}",
            t.team, dollars(t.cost_by_use_cents), dollars(t.idle_share_cents), dollars(t.lending_fee_cents),
            dollars(t.lending_credit_cents), dollars(t.charge_cents))}</li> })
        .collect();
    let notes: Vec<_> = s
        .notes
        .iter()
        .map(|n| view! { <li>{n.clone()}</li> })
        .collect();
    let models: Vec<_> = s.models.iter().map(model_row).collect();
    view! {
        // Two tables of eight columns, money and then the hours it is made of: the whole
        // statement in sight on a 1366-pixel laptop, where one of fifteen scrolled sideways.
        <div class="wide" tabindex="0" role="region" aria-label="The statement per team">
        <table class="statement" data-test="statement">
            <thead><tr><th>"Team"</th><th>"Cost centre"</th><th>"Charge"</th><th>"By allocation"</th>
                <th>"By use"</th><th title="allocated and not busy, at the rate">"Own idle"</th><th title="its part of the idle pool">"Idle share"</th>
                <th title="paid for borrowing less credited for lending">"Lending, net"</th></tr></thead>
            <tbody>{rows}</tbody>
        </table>
        </div>
        <div class="wide" tabindex="0" role="region" aria-label="GPU-hours per team">
        <table class="statement" data-test="statement-hours">
            <thead><tr><th>"Team"</th><th title=ALLOCATED.1>"Allocated GPU-h"</th><th title=BUSY.1>"Busy GPU-h"</th><th>"Utilisation"</th>
                <th title=IDLE.1>"Idle GPU-h"</th><th title=UNOBSERVED.1>"Unobserved GPU-h"</th><th>"Borrowed GPU-h"</th><th>"Lent GPU-h"</th></tr></thead>
            <tbody>{hours}</tbody>
        </table>
        </div>
        <details data-test="glossary"><summary>"What the words mean"</summary>
            <dl>{GLOSSARY.iter().map(|(word, what)| view! { <dt>{*word}</dt><dd>{*what}</dd> }).collect_view()}</dl>
        </details>
        <ul data-test="how-charged">{how}</ul>
        <p data-test="idle-pool">{idle_pool_words(s.idle, s.lend_credit_pct)}</p>
        {fleet}
        {unattributed}
        {(!models.is_empty()).then(|| view! {
            <table class="statement" data-test="models">
                <caption>"Per million tokens, input and output, by use and by allocation"</caption>
                <thead><tr><th>"Team"</th><th>"Model"</th><th title="the part of the team's cost the model carries">"Of the team's cost"</th><th>"Input tokens"</th><th>"Output tokens"</th>
                    <th>"Input, by use"</th><th>"Output, by use"</th><th>"Input, by allocation"</th><th>"Output, by allocation"</th></tr></thead>
                <tbody>{models}</tbody>
            </table>
            <p class="muted" data-test="models-how">"Each model carries the part of its team's cost (by use, and by allocation) that is its share of the serving time of the team's models: the seconds its requests spent in prefill and in decode, from vLLM (its tokens where no time is reported). Within a model, input tokens carry its prefill time and output tokens its decode time. A team that also trains or fine-tunes carries that cost in its models too: read these figures for teams that only serve."</p>
        })}
        {(!s.closed_months.is_empty()).then(|| view! { <p>{format!("Closed, figures frozen: {}", s.closed_months.join(", "))}</p> })}
        {(!adjustments.is_empty()).then(|| view! { <p>"Adjustments of closed months (late data):"</p><ul data-test="adjustments">{adjustments}</ul> })}
        <ul class="notes" data-test="statement-notes">{notes}</ul>
        <DrillDown teams=s.teams.iter().map(|t| t.team.clone()).collect() day=s.from/>
    }
}

/// One team's day as the statement reads it, per flavor, with its cost at the day's rate, and
/// every minute row behind it with the sources that wrote it (`/api/chargeback/drill`): where a
/// figure comes from.
#[component]
fn DrillDown(teams: Vec<String>, day: Day) -> impl IntoView {
    let team = RwSignal::new(teams.first().cloned().unwrap_or_default());
    let day = RwSignal::new(day.to_string());
    let shown = RwSignal::new(None::<Drill>);
    let failure = RwSignal::new(None::<ApiError>);
    let load = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let path = format!(
            "/api/chargeback/drill?team={}&day={}",
            js_sys::encode_uri_component(&team.get_untracked()),
            js_sys::encode_uri_component(&day.get_untracked())
        );
        spawn_local(async move {
            match api::get::<Drill>(&path).await {
                Ok(drill) => {
                    failure.set(None);
                    shown.set(Some(drill));
                }
                Err(err) => failure.set(Some(err)),
            }
        });
    };
    view! {
        <h3>"Where a team's day comes from"</h3>
        <form class="period" data-test="drill-form" on:submit=load>
            <label>"Team " <select name="team" on:change=move |ev| team.set(event_target_value(&ev))>
                {teams.into_iter().map(|t| view! { <option value=t.clone()>{t.clone()}</option> }).collect_view()}
            </select></label>
            <label>" day (UTC) " <input type="text" placeholder="YYYY-MM-DD" name="day" prop:value=move || day.get()
                on:change=move |ev| day.set(event_target_value(&ev))/></label>
            " " <button type="submit" data-test="show-drill">"Show the day"</button>
        </form>
        {move || failure.get().map(|error| view! { <ErrorBox error/> })}
        {move || shown.get().map(|drill| view! { <DrillView drill/> })}
    }
}

/// A `Drill`: the summary, the day per flavor (hours to the hundredth, dollars at the day's
/// rate), every minute row (GPU-seconds exactly), the notes.
#[component]
fn DrillView(drill: Drill) -> impl IntoView {
    let busy: i128 = drill
        .minutes
        .iter()
        .map(|m| i128::from(m.busy_gpu_microseconds.unwrap_or(0)))
        .sum();
    let closed = if drill.closed {
        "; the month is closed, so the statement reads the frozen figures"
    } else {
        ""
    };
    let count = drill.minutes.len();
    let day_rows = |rows: Vec<DrillDay>, read: &'static str| {
        rows.into_iter()
            .map(|r| {
                let money = |cents: Option<i64>| cents.map_or("—".to_owned(), dollars);
                view! {
                    <tr>
                        <td>{r.flavor}</td><td>{read}</td>
                        <td class="num">{r.cents_per_gpu_hour.map_or("no rate".to_owned(), dollars)}</td>
                        <td class="num">{r.allocated_gpu_hours.map_or("unknown".to_owned(), Hours::to_hundredths)}</td>
                        <td class="num">{money(r.allocated_cents)}</td>
                        <td class="num">{r.busy_gpu_hours.to_hundredths()}</td>
                        <td class="num">{money(r.busy_cents)}</td>
                        <td class="num">{r.observed_gpu_hours.to_hundredths()}</td>
                    </tr>
                }
            })
            .collect_view()
    };
    let minute_rows = drill
        .minutes
        .into_iter()
        .map(|m| {
            view! {
                <tr>
                    <td>{m.minute}</td><td>{m.flavor}</td>
                    <td class="num">{gpu_seconds(m.allocated_gpu_microseconds)}</td>
                    <td class="num">{gpu_seconds(m.busy_gpu_microseconds)}</td>
                    <td class="num">{gpu_seconds(m.observed_gpu_microseconds)}</td>
                    <td class="num">{m.fb_used_mib.map_or("—".to_owned(), |v| v.to_string())}</td>
                    <td>{m.sources.join(", ")}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <p data-test="drill-summary">
            {format!("{} (namespace {}) on {}: {count} minute rows, {} busy GPU-hours in them{closed}.",
                drill.team, drill.namespace, drill.day, Hours(busy).to_hundredths())}
        </p>
        <table class="statement" data-test="drill-day">
            <thead><tr><th>"Flavor"</th><th>"Read"</th><th>"Rate per GPU-h"</th><th>"Allocated GPU-h"</th>
                <th>"By allocation"</th><th>"Busy GPU-h"</th><th>"Busy at the rate"</th><th>"Observed GPU-h"</th></tr></thead>
            <tbody>{day_rows(drill.rollups, "day rollup")}{day_rows(drill.frozen, "frozen at close")}</tbody>
        </table>
        <details><summary>{format!("Every minute row ({count})")}</summary>
            <table class="statement" data-test="drill-minutes">
                <thead><tr><th>"Minute (UTC)"</th><th>"Flavor"</th><th>"Allocated GPU-s"</th><th>"Busy GPU-s"</th>
                    <th>"Observed GPU-s"</th><th>"Framebuffer MiB"</th><th>"Sources"</th></tr></thead>
                <tbody>{minute_rows}</tbody>
            </table>
        </details>
        <ul class="notes">{drill.notes.into_iter().map(|n| view! { <li>{n}</li> }).collect_view()}</ul>
    }
}

/// GPU-microseconds as GPU-seconds, exactly.
fn gpu_seconds(us: Option<i64>) -> String {
    us.map_or("—".to_owned(), |us| {
        let (sign, abs) = (if us < 0 { "-" } else { "" }, us.unsigned_abs());
        format!("{sign}{}.{:06}", abs / 1_000_000, abs % 1_000_000)
    })
}

/// The last minutes kept on the live chart.
const LIVE_MINUTES: usize = 180;

/// Busy against allocated GPUs per team, and the fleet's busy GPUs against its capacity, minute
/// by minute as the usage ingest stores them (`/api/usage/stream`), the chart extending as
/// each minute arrives.
#[component]
fn LiveUse() -> impl IntoView {
    let minutes = RwSignal::new(Vec::<LiveMinute>::new());
    let source = EventSource::new("/api/usage/stream").ok();
    let handler = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
        let Some(text) = event.data().as_string() else {
            return;
        };
        if let Ok(minute) = serde_json::from_str::<LiveMinute>(&text) {
            minutes.update(|all| {
                if all
                    .last()
                    .is_none_or(|last| last.minute_ms < minute.minute_ms)
                {
                    all.push(minute);
                    if all.len() > LIVE_MINUTES {
                        all.remove(0);
                    }
                }
            });
        }
    });
    if let Some(source) = &source {
        let _ = source.add_event_listener_with_callback("minute", handler.as_ref().unchecked_ref());
    }
    // closed (and the handler freed) when the page goes
    let held = StoredValue::new_local(Some((source, handler)));
    on_cleanup(move || {
        if let Some((Some(source), _handler)) = held.try_update_value(|h| h.take()).flatten() {
            source.close();
        }
    });
    let latest = move || {
        minutes.with(|all| {
            all.last().map(|m| {
                let busy: i64 = m.teams.iter().map(|t| t.busy_gpu_microseconds).sum();
                format!(
                    "{} minutes shown; latest {}: {:.1} of {} GPUs busy in teams",
                    all.len(),
                    m.minute,
                    busy as f64 / 60_000_000.0,
                    m.capacity_gpus
                )
            })
        })
    };
    view! {
        <h2>"Live utilisation"</h2>
        <p data-test="live-latest">{move || latest().unwrap_or_else(|| "Waiting for the first ingested minute…".to_owned())}</p>
        <Chart id="live-chart" plot=Box::new(move || minutes.with(|all| (!all.is_empty()).then(|| live_plot(all))))/>
    }
}

fn live_plot(all: &[LiveMinute]) -> String {
    let x: Vec<String> = all.iter().map(|m| m.minute.clone()).collect();
    let mut teams: Vec<&str> = all
        .iter()
        .flat_map(|m| m.teams.iter().map(|t| t.team.as_str()))
        .collect();
    teams.sort_unstable();
    teams.dedup();
    let mut figure = Figure::new();
    for team in teams {
        let y: Vec<Option<f64>> = all
            .iter()
            .map(|m| {
                let t = m.teams.iter().find(|t| t.team == team)?;
                let allocated = t.allocated_gpu_microseconds.filter(|a| *a > 0)?;
                Some(100.0 * t.busy_gpu_microseconds as f64 / allocated as f64)
            })
            .collect();
        figure = figure.lines(&format!("{team}: busy / allocated %"), &x, &y);
    }
    let fleet: Vec<Option<f64>> = all
        .iter()
        .map(|m| {
            let busy: i64 = m.teams.iter().map(|t| t.busy_gpu_microseconds).sum();
            Some(100.0 * busy as f64 / (m.capacity_gpus.max(1) as f64 * 60_000_000.0))
        })
        .collect();
    figure
        .lines("fleet: busy / capacity %", &x, &fleet)
        .to_json("Utilisation, minute by minute (UTC)", 320, None)
}

/// Each inference service's p95/p99 time to first token and queue time beside how its GPUs
/// are shared, with the quieter and busier halves of its minutes by co-tenants' load, flagged
/// when latency degrades while a neighbour's load rises (`/api/chargeback/neighbours`).
#[component]
fn Neighbours() -> impl IntoView {
    let day = today().to_string();
    let from = RwSignal::new(day.clone());
    let to = RwSignal::new(day);
    let shown = RwSignal::new(String::new());
    let failure = RwSignal::new(None::<ApiError>);
    let load = move || {
        let path = format!(
            "/api/chargeback/neighbours?from={}&to={}",
            from.get_untracked(),
            to.get_untracked()
        );
        spawn_local(async move { show_html(&path, neighbours_html, shown, failure).await });
    };
    load();
    view! {
        <h2 id="neighbours">"Noisy neighbours"</h2>
        <form class="period" data-test="neighbours-form" on:submit=move |ev| { ev.prevent_default(); load(); }>
            <label>"From (UTC) " <input type="text" placeholder="YYYY-MM-DD" name="from" prop:value=move || from.get()
                on:change=move |ev| from.set(event_target_value(&ev))/></label>
            <label>" to " <input type="text" placeholder="YYYY-MM-DD" name="to" prop:value=move || to.get()
                on:change=move |ev| to.set(event_target_value(&ev))/></label>
            " " <button type="submit" data-test="show-neighbours">"Show"</button>
        </form>
        {move || failure.get().map(|error| view! { <ErrorBox error/> })}
        <div inner_html=move || shown.get()/>
    }
}

/// The month's budgets with their burn, forecast, alerts and holds; finance and admins set
/// them, approvers and admins confirm, dismiss and release holds.
#[component]
fn Budgets() -> impl IntoView {
    let me = use_me();
    let has = move |roles: [Role; 2]| {
        me.with_untracked(|m| {
            m.as_ref()
                .is_some_and(|m| m.roles.iter().any(|r| roles.contains(r)))
        })
    };
    let can_set = has([Role::Finance, Role::Admin]);
    let html: fn(&JsValue) -> String = if has([Role::Approver, Role::Admin]) {
        |b| budgets_html(b, true)
    } else {
        |b| budgets_html(b, false)
    };
    let month = RwSignal::new(today().month_name());
    let shown = RwSignal::new(String::new());
    let failure = RwSignal::new(None::<ApiError>);
    let load = move || {
        let path = format!("/api/chargeback/budgets?month={}", month.get_untracked());
        spawn_local(async move { show_html(&path, html, shown, failure).await });
    };
    load();
    // a hold's buttons are in the HTML: one listener reads which was clicked
    let decide = move |ev: leptos::ev::MouseEvent| {
        let (Some(id), Some(action)) = (js::data_of(&ev, "hold"), js::data_of(&ev, "act")) else {
            return;
        };
        let path = format!("/api/chargeback/holds/{id}/{action}");
        spawn_local(async move {
            match api::send_no_content::<()>(Method::POST, &path, None).await {
                Ok(()) => load(),
                Err(err) => failure.set(Some(err)),
            }
        });
    };
    // the teams a budget can be set for (finance and admins read them all)
    let teams = LocalResource::new(move || async move {
        if can_set {
            api::get::<Vec<shared::accounts::Team>>("/api/teams")
                .await
                .unwrap_or_default()
        } else {
            Vec::new()
        }
    });
    let (team, amount, unit, basis) = (
        RwSignal::new(String::new()),
        RwSignal::new(String::new()),
        RwSignal::new("cents".to_owned()),
        RwSignal::new("allocation".to_owned()),
    );
    let save = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let [team, month, amount, unit, basis] =
            [team, month, amount, unit, basis].map(|s| s.get_untracked());
        let (path, new) = budget_put(&team, &month, (&amount, &unit, basis));
        spawn_local(async move {
            match api::send_no_content(Method::PUT, &path, Some(&new)).await {
                Ok(()) => load(),
                Err(err) => failure.set(Some(err)),
            }
        });
    };
    let field = |value: RwSignal<String>| move |ev| value.set(event_target_value(&ev));
    view! {
        <h2 id="budgets">"Budgets"</h2>
        <form class="period" data-test="budgets-form" on:submit=move |ev| { ev.prevent_default(); load(); }>
            <label>"Month (UTC, YYYY-MM) " <input name="month" prop:value=move || month.get() on:change=field(month)/></label>
            " " <button type="submit" data-test="show-budgets">"Show"</button>
        </form>
        {move || failure.get().map(|error| view! { <ErrorBox error/> })}
        <div inner_html=move || shown.get() on:click=decide/>
        {can_set.then(|| view! {
            <form class="period" data-test="set-budget" on:submit=save>
                <label>"Team " <select name="team" required on:change=field(team)>
                    <option value="">"(pick a team)"</option>
                    {move || teams.get().unwrap_or_default().into_iter()
                        .map(|t| view! { <option value=t.name.clone()>{t.name.clone()}</option> })
                        .collect_view()}
                </select></label>
                <label>" limit " <input name="amount" on:change=field(amount)/></label>
                <label>" in " <select name="unit" on:change=field(unit)>
                    <option value="cents">"dollars"</option><option value="gpu_hours">"GPU-hours"</option>
                </select></label>
                <label>" by " <select name="basis" on:change=field(basis)>
                    <option value="allocation">"allocation"</option><option value="use">"use (the charge)"</option>
                </select></label>
                " " <button type="submit">"Set budget"</button>
            </form>
        })}
    }
}

/// The request the form says: where to PUT it (`team`'s budget of `month`), and the budget,
/// `amount` in dollars (`unit` "cents") or GPU-hours, on `basis`. A bad amount goes as an
/// impossible one, so the API names the field.
fn budget_put(
    team: &str,
    month: &str,
    (amount, unit, basis): (&str, &str, String),
) -> (String, NewBudget) {
    let path = format!(
        "/api/chargeback/budgets/{}/{month}",
        js_sys::encode_uri_component(team)
    );
    let mut new = NewBudget {
        basis: Some(basis),
        ..NewBudget::default()
    };
    if unit == "cents" {
        new.limit_cents = Some(parse_dollars(amount).unwrap_or(-1));
    } else {
        new.limit_gpu_hours = Some(amount.trim().parse().unwrap_or(-1));
    }
    (path, new)
}

/// A `Budgets` answer as HTML: each team's limit, burn and forecast on both bases, the alerts
/// raised, and the holds (with their buttons for those who `decide` them).
fn budgets_html(b: &JsValue, decide: bool) -> String {
    let money = |v: &JsValue, key: &str| dollars(whole(v, key).unwrap_or(0));
    let rows: String = js::each(b, "lines")
        .iter()
        .map(|l| {
            let budget = js::at(&l, "budget");
            let limit = js::at(&budget, "limit");
            let basis = js::text(&budget, "basis");
            let spent_key = if basis == "use" { "charge_cents" } else { "cost_by_allocation_cents" };
            let over_cents = whole(&limit, "cents").map(|cents| whole(&l, spent_key).unwrap_or(0) - cents);
            let limit = match whole(&limit, "cents") {
                Some(cents) => dollars(cents),
                None => format!("{} GPU-hours", js::text(&limit, "gpu_hours")),
            };
            let (spent, forecast) = (js::text(&l, "spent_pct"), js::text(&l, "forecast_pct"));
            format!(
                "<tr data-team=\"{}\"><td>{0}</td><td class=\"num\">{limit}</td><td>{basis}</td><td class=\"num\">{spent}% → {forecast}%<br>{}{}</td><td class=\"num\">{} → {}</td><td class=\"num\">{} → {}</td></tr>",
                js::text(&l, "team"),
                burn_bar(&spent, &forecast),
                overspend_words(&spent, &forecast, over_cents),
                money(&l, "cost_by_allocation_cents"),
                money(&l, "forecast_cost_by_allocation_cents"),
                money(&l, "charge_cents"),
                money(&l, "forecast_charge_cents"),
            )
        })
        .collect();
    let alerts: String = js::each(b, "alerts")
        .iter()
        .map(|a| {
            let sent = match js::at(&a, "delivered_at").as_string() {
                Some(at) => format!("sent {}", js::escape(&at)),
                None => match js::text(&a, "last_error") {
                    error if error.is_empty() => "not sent".to_owned(),
                    error => format!("not sent: {error}"),
                },
            };
            format!("<li>{} ({sent})</li>", js::text(&a, "text"))
        })
        .collect();
    let mut holds: String = js::each(b, "holds")
        .iter()
        .map(|h| hold_html(&h, decide))
        .collect();
    if holds.is_empty() {
        holds = "<li>None proposed or in force: a team whose month burns its whole budget gets one proposed, for an approver to confirm.</li>".to_owned();
    }
    format!(
        "<table class=\"statement\" data-test=\"budgets\"><thead><tr><th>Team</th><th>Limit</th><th>Basis</th><th>Used → forecast at month end</th><th>By allocation</th><th>Charged</th></tr></thead><tbody>{rows}</tbody></table><ul data-test=\"budget-alerts\">{alerts}</ul><h3>Holds</h3><ul data-test=\"holds\">{holds}</ul>"
    )
}

/// "86.00" (percent) → 8,600 hundredths of a percent.
fn pct_hundredths(pct: &str) -> i64 {
    pct.replace('.', "").parse::<i64>().unwrap_or(0).max(0)
}

/// A team's month as a bar on a fixed scale, so an overspend never looks small: the limit's
/// mark at two thirds of the width, 150% of the limit at its end; used (dark), past the limit
/// in red, forecast to the month's end (pale), and an arrow at the end for more than the scale
/// holds. The figures are beside it in words.
fn burn_bar(spent_pct: &str, forecast_pct: &str) -> String {
    const END: i64 = 15_000;
    let (spent, forecast) = (pct_hundredths(spent_pct), pct_hundredths(forecast_pct));
    let x = |v: i64| v.min(END) * 200 / END;
    let over = if spent > 10_000 {
        format!(
            "<rect x=\"{}\" width=\"{}\" height=\"10\" fill=\"#c0392b\"/>",
            x(10_000),
            x(spent) - x(10_000)
        )
    } else {
        String::new()
    };
    let beyond = if spent.max(forecast) > END {
        "<polygon points=\"194,0 200,5 194,10\" fill=\"#7b241c\"/>"
    } else {
        ""
    };
    format!(
        "<svg class=\"burn\" viewBox=\"0 0 200 10\" width=\"200\" height=\"10\" aria-hidden=\"true\"><rect width=\"{}\" height=\"10\" fill=\"#b8d4ec\"/><rect width=\"{}\" height=\"10\" fill=\"#2a6fb0\"/>{over}<rect x=\"{}\" width=\"2\" height=\"10\" fill=\"#000\"/>{beyond}</svg>",
        x(forecast),
        x(spent.min(10_000)),
        x(10_000) - 1
    )
}

/// Past the limit, by how much (and by how many dollars for a budget in money); forecast past
/// it, by how much at the month's end.
fn overspend_words(spent_pct: &str, forecast_pct: &str, over_cents: Option<i64>) -> String {
    let hundredths = |h: i64| shared::common::money::hundredths(i128::from(h));
    let (spent, forecast) = (pct_hundredths(spent_pct), pct_hundredths(forecast_pct));
    if spent > 10_000 {
        let money = over_cents.map_or(String::new(), |c| format!(", {}", dollars(c)));
        format!(
            "<br><strong class=\"over\" data-test=\"overspent\">Over its budget by {}%{money}</strong>",
            hundredths(spent - 10_000)
        )
    } else if forecast > 10_000 {
        format!(
            "<br><span class=\"over\">Forecast over by {}% at the month's end</span>",
            hundredths(forecast - 10_000)
        )
    } else {
        String::new()
    }
}

/// One hold: where it stands, why, and (for those who decide) what may be done to it.
fn hold_html(h: &JsValue, decide: bool) -> String {
    let by = |who: &str, at: &str| format!("by {} at {}", js::text(h, who), js::text(h, at));
    let id = js::text(h, "id");
    let button = |act: &str, label: &str| {
        if decide {
            format!(
                " <button type=\"button\" data-hold=\"{id}\" data-act=\"{act}\">{label}</button>"
            )
        } else {
            String::new()
        }
    };
    let team = js::text(h, "team");
    let (state, buttons) = match js::text(h, "state").as_str() {
        "proposed" => (
            "Hold proposed".to_owned(),
            button("confirm", &format!("Hold {team}'s ClusterQueue"))
                + &button("dismiss", "Dismiss"),
        ),
        "held" => (
            format!("Held {}", by("decided_by", "decided_at")),
            button("release", &format!("Release {team}'s ClusterQueue")),
        ),
        "released" => (
            format!("Released {}", by("released_by", "released_at")),
            String::new(),
        ),
        _ => (
            format!("Dismissed {}", by("decided_by", "decided_at")),
            String::new(),
        ),
    };
    format!(
        "<li data-team=\"{team}\"><b>{state}</b> ({}): {}{buttons}</li>",
        js::text(h, "month"),
        js::text(h, "reason")
    )
}

/// `GET path` parsed by the browser and written as HTML by `html` into `shown`, or its error
/// into `failure`.
async fn show_html(
    path: &str,
    html: fn(&JsValue) -> String,
    shown: RwSignal<String>,
    failure: RwSignal<Option<ApiError>>,
) {
    match api::get_js(path).await {
        Ok(value) => {
            failure.set(None);
            shown.set(html(&value));
        }
        Err(err) => failure.set(Some(err)),
    }
}

fn sharing_label(name: &str) -> &str {
    match name {
        "whole_gpu" => "whole GPUs",
        "mig" => "MIG",
        "time_slicing" => "time-slicing",
        "mps" => "MPS",
        "hami_fractions" => "HAMi fractions",
        "shared" => "shared (how: not said)",
        other => other,
    }
}

/// `value[key]` as a whole number, when it is one.
fn whole(value: &JsValue, key: &str) -> Option<i64> {
    js::number(value, key).map(|n| n as i64)
}

/// A service's [`LatencyFigures`] as the answer holds them.
fn figures(value: &JsValue) -> LatencyFigures {
    let n = |key| whole(value, key).unwrap_or(0);
    LatencyFigures {
        minutes: n("minutes"),
        requests: n("requests"),
        ttft_p95_microseconds: whole(value, "ttft_p95_microseconds"),
        ttft_p99_microseconds: whole(value, "ttft_p99_microseconds"),
        queue_p95_microseconds: whole(value, "queue_p95_microseconds"),
        queue_p99_microseconds: whole(value, "queue_p99_microseconds"),
        neighbour_busy_gpu_microseconds: n("neighbour_busy_gpu_microseconds"),
        neighbour_observed_gpu_microseconds: n("neighbour_observed_gpu_microseconds"),
    }
}

/// One `ServiceLatency` as a table row.
fn service_row(s: &JsValue) -> String {
    let sharing: Vec<String> = js::each(s, "sharing")
        .iter()
        .filter_map(|x| x.as_string())
        .map(|x| sharing_label(&x).to_owned())
        .collect();
    let [overall, quiet, busy] = ["overall", "quiet", "busy"].map(|k| figures(&js::at(s, k)));
    let pair = |p95, p99| format!("{} / {}", format_ms(p95), format_ms(p99));
    let halves =
        |what: fn(&LatencyFigures) -> String| format!("{} → {}", what(&quiet), what(&busy));
    let flagged = js::at(s, "flagged").as_bool() == Some(true);
    let team = js::text(s, "team");
    format!(
        "<tr data-service=\"{}/{}\"{}><td>{}<br/><small>{}</small></td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td data-test=\"verdict\">{}{}</td></tr>",
        js::text(s, "namespace"),
        js::text(s, "model"),
        if flagged { " class=\"flagged\"" } else { "" },
        js::text(s, "model"),
        js::text(s, "namespace"),
        if team.is_empty() {
            "—".to_owned()
        } else {
            team
        },
        js::escape(&sharing.join(", ")),
        js::text(s, "max_neighbours"),
        overall.requests,
        pair(overall.ttft_p95_microseconds, overall.ttft_p99_microseconds),
        pair(
            overall.queue_p95_microseconds,
            overall.queue_p99_microseconds
        ),
        halves(|f| format!("{}%", f.neighbour_load_pct())),
        halves(|f| format_ms(f.ttft_p95_microseconds)),
        halves(|f| format_ms(f.queue_p95_microseconds)),
        if flagged { "⚠ noisy neighbour: " } else { "" },
        js::text(s, "verdict"),
    )
}

/// A `NeighbourReport` as HTML.
fn neighbours_html(r: &JsValue) -> String {
    let services = js::each(r, "services");
    let rows: String = services.iter().map(|s| service_row(&s)).collect();
    let flagged = services
        .iter()
        .filter(|s| js::at(s, "flagged").as_bool() == Some(true))
        .count();
    let n = services.length();
    let table = if n == 0 {
        "<p data-test=\"neighbours-summary\">No vLLM latency was ingested in this period (vllm:time_to_first_token_seconds and vllm:request_queue_time_seconds).</p>".to_owned()
    } else {
        format!(
            "<p data-test=\"neighbours-summary\">{n} inference service{} from {} to {}; {flagged} flagged.</p><div class=\"wide\" tabindex=\"0\" role=\"region\" aria-label=\"Latency beside co-tenancy per service\"><table class=\"statement\" data-test=\"neighbours\"><thead><tr><th>Service</th><th>Team</th><th>GPUs shared by</th><th>Co-tenants</th><th>Requests</th><th>First token p95 / p99</th><th>Queue p95 / p99</th><th title=\"co-tenants' busy over observed time, the quieter half of the minutes → the busier\">Co-tenants' load</th><th>First token p95, quieter → busier</th><th>Queue p95, quieter → busier</th><th>Verdict</th></tr></thead><tbody>{rows}</tbody></table></div>",
            if n == 1 { "" } else { "s" },
            js::text(r, "from"),
            js::text(r, "to_inclusive"),
        )
    };
    format!("{table}<p class=\"notes\">{}</p>", js::text(r, "rule"))
}
