//! Making a statement: bounded before any work, read from the database a few days at a time,
//! added to the shared crate's [`Ledger`] and written out as each day is done, so a statement's
//! memory is a few days' rollups whatever its period (a two-year statement of 10,000 teams
//! holds what five days hold). Blocking: it runs on the compute pool (`GET
//! /api/chargeback/statement`) or a blocking thread (the CLI), reading through the runtime's
//! handle, and stops between days when its [`Interrupt`] fires.

use std::collections::{BTreeMap, BTreeSet};

use shared::{
    FieldError,
    chargeback::{
        self as model, CsvHead, DayFacts, DayStatement, ExactShares, FleetLine, Format, Ledger,
        MAX_DAYS, Period, Rate, Statement, Team, TeamLine, TokensDay, UsageDay, focus::FocusHead,
    },
    common::day::Day,
    common::interrupt::Interrupt,
};
use sqlx::PgPool;
use tokio::runtime::Handle;

use super::db::{self, FrozenRate};
use crate::{
    error::{Error, Result},
    work::Deadline,
};

/// The most team-days one statement reads: every team's rollups on every day of its period
/// (the idle shares need all of them, whoever asks). 2,000,000 is 2,700 teams over two years,
/// or 10,000 teams over 200 days, and reads in under 30 s on two cores (docs/performance.md).
pub const MAX_TEAM_DAYS: i64 = 2_000_000;

/// The most team lines a statement by day writes (teams shown × days): 50 teams over two
/// years are 36,550.
pub const MAX_DAY_LINES: i64 = 400_000;

/// The rollups read at once: days per read × teams stays under this.
const TEAM_DAYS_PER_READ: i64 = 50_000;

/// Where a statement's pieces go, in order: each day's lines (when by day, or for a FOCUS
/// export) with what the day was made from, then the period's.
pub trait Sink {
    /// `exact`: the day's exact shares ([`Ledger::day_exact`]).
    fn day(
        &mut self,
        facts: &DayFacts,
        day: &DayStatement,
        exact: &BTreeMap<String, ExactShares>,
        teams: &[Team],
    ) -> Result<()>;
    fn finish(&mut self, statement: &Statement) -> Result<()>;
}

/// What every day of a statement is priced with.
struct Prices {
    teams: Vec<Team>,
    capacity: BTreeMap<String, i64>,
    live_rates: Vec<Rate>,
    closed: BTreeSet<Day>,
    /// Frozen capacity and rates per closed day of the period.
    frozen: BTreeMap<Day, Vec<FrozenRate>>,
    /// Capacity is priced up to here.
    now_ms: i64,
}

/// Refuses a statement whose reading or writing would be too large, before any work. A FOCUS
/// export writes up to a row per flavor and three more (idle share, fee, credit) per team-day.
pub fn check_size(period: &Period, teams: usize, shown: usize, flavors: usize) -> Result<()> {
    let days = i64::from(period.from.days_until(period.to));
    let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    let read = count(teams).saturating_mul(days);
    let per_team_day = match period.format {
        Format::Focus(_) => count(flavors).saturating_add(3),
        _ => 1,
    };
    let shown = count(shown).saturating_mul(per_team_day);
    let written = shown.saturating_mul(days);
    let too_big = |message: String| {
        Err(Error::Invalid(vec![FieldError {
            path: "to".into(),
            message,
        }]))
    };
    if read > MAX_TEAM_DAYS {
        let most = (MAX_TEAM_DAYS / count(teams).max(1)).clamp(1, i64::from(MAX_DAYS));
        return too_big(format!(
            "{days} days × {teams} teams = {read} team-days: a statement reads at most {MAX_TEAM_DAYS}; with {teams} teams ask for at most {most} days at a time"
        ));
    }
    if writes_days(period) && written > MAX_DAY_LINES {
        let most = (MAX_DAY_LINES / shown.max(1)).max(1);
        let instead = if period.by_day {
            "by day, or leave out by=day"
        } else {
            "as FOCUS rows (a day each)"
        };
        return too_big(format!(
            "{days} days × {shown} lines a day = {written} lines by day: a statement by day writes at most {MAX_DAY_LINES}; ask for at most {most} days {instead}"
        ));
    }
    Ok(())
}

/// Whether the statement's days are written: by day, or as FOCUS rows (a row's charge period
/// is a day).
fn writes_days(period: &Period) -> bool {
    period.by_day || matches!(period.format, Format::Focus(_))
}

/// Makes the statement of `period` (only the `visible` teams' lines when given), handing its
/// pieces to `sink`, with capacity priced up to `now_ms` (never after: a period that reaches
/// into the future is priced up to now and says so). Blocking: call it off the async runtime.
pub fn make(
    rt: &Handle,
    pool: &PgPool,
    period: &Period,
    visible: Option<&[String]>,
    sink: &mut dyn Sink,
    stop: &dyn Interrupt,
    now_ms: i64,
) -> Result<()> {
    let mut prices = rt.block_on(Prices::read(pool, period))?;
    prices.now_ms = now_ms;
    check_size(
        period,
        prices.teams.len(),
        visible.map_or(prices.teams.len(), <[String]>::len),
        prices.capacity.len(),
    )?;
    let mut ledger = Ledger::new(
        period.from,
        period.to,
        period.idle,
        period.lend_credit_pct,
        prices.teams.clone(),
        visible,
    );
    let closed = |day: Day| prices.is_closed(day);
    for_each_day(
        rt,
        pool,
        &prices,
        period.from,
        period.to,
        &closed,
        &closed,
        stop,
        &mut |facts| {
            let day = ledger.add_day(facts);
            if writes_days(period) {
                sink.day(facts, &day, ledger.day_exact(), &prices.teams)
            } else {
                Ok(())
            }
        },
    )?;
    let mut statement = ledger.finish();
    if day_ms(period.to) > now_ms {
        statement.notes.push(format!(
            "The period reaches past now ({}): capacity is priced up to then, and the rest of the period is billed to nobody yet.",
            shared::common::utc::format_rfc3339(shared::common::utc::floor_minute(now_ms))
        ));
    }
    let mut month = period.from.first_of_month();
    while month < period.to {
        if prices.closed.contains(&month) {
            statement.closed_months.push(month.month_name());
        }
        month = month.next_month();
    }
    for closed_month in prices.adjusted_months(period) {
        statement.adjustments.extend(adjustments(
            rt,
            pool,
            &prices,
            closed_month,
            period,
            visible,
            stop,
        )?);
    }
    sink.finish(&statement)
}

/// The whole statement in memory, for the CLI and tests (bounded like the API's).
pub async fn build(pool: &PgPool, period: &Period) -> Result<Statement> {
    let (rt, pool, period) = (Handle::current(), pool.clone(), *period);
    tokio::task::spawn_blocking(move || {
        whole(&rt, &pool, &period, &shared::common::interrupt::Never)
    })
    .await
    .map_err(|err| Error::Internal(format!("the statement's job failed: {err}")))?
}

/// [`build`] for a request: on the compute pool (refused with `503` when it is full), stopped
/// when the request is dropped, the server stops or `deadline` passes (then `503`).
pub async fn build_on(
    work: &crate::work::Pool,
    pool: &PgPool,
    period: &Period,
    deadline: Deadline,
) -> Result<Statement> {
    let (rt, pool, period) = (Handle::current(), pool.clone(), *period);
    let made = work
        .run(move |stop: &dyn Interrupt| whole(&rt, &pool, &period, &Bounded { stop, deadline }))
        .await?;
    made.map_err(|err| {
        if deadline.passed() {
            Error::Unavailable
        } else {
            err
        }
    })
}

/// A job's interrupt, or its deadline passed.
struct Bounded<'a> {
    stop: &'a dyn Interrupt,
    deadline: Deadline,
}

impl Interrupt for Bounded<'_> {
    fn fired(&self) -> bool {
        self.stop.fired() || self.deadline.passed()
    }
}

/// The whole statement of `period`, in memory, blocking.
fn whole(rt: &Handle, pool: &PgPool, period: &Period, stop: &dyn Interrupt) -> Result<Statement> {
    let mut whole = Whole::default();
    make(
        rt,
        pool,
        period,
        None,
        &mut whole,
        stop,
        crate::clock::now_ms(),
    )?;
    let mut statement = whole
        .statement
        .unwrap_or_else(|| unreachable!("finish was called"));
    statement.days = whole.days;
    Ok(statement)
}

/// The statement as its [`Writer`] writes it (CSV or FOCUS CSV), in memory, for the CLI and
/// tests (bounded like the API's).
pub async fn written(pool: &PgPool, period: &Period) -> Result<Vec<u8>> {
    let (rt, pool, period) = (Handle::current(), pool.clone(), *period);
    tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        let mut writer = Writer::new(&period, |piece: Vec<u8>| {
            out.extend_from_slice(&piece);
            Ok(())
        });
        make(
            &rt,
            &pool,
            &period,
            None,
            &mut writer,
            &shared::common::interrupt::Never,
            crate::clock::now_ms(),
        )?;
        drop(writer);
        Ok(out)
    })
    .await
    .map_err(|err| Error::Internal(format!("the statement's job failed: {err}")))?
}

#[derive(Default)]
struct Whole {
    days: Vec<DayStatement>,
    statement: Option<Statement>,
}

impl Sink for Whole {
    fn day(
        &mut self,
        _: &DayFacts,
        day: &DayStatement,
        _: &BTreeMap<String, ExactShares>,
        _: &[Team],
    ) -> Result<()> {
        self.days.push(day.clone());
        Ok(())
    }
    fn finish(&mut self, statement: &Statement) -> Result<()> {
        self.statement = Some(statement.clone());
        Ok(())
    }
}

/// A closed month's late changes, charged in the first open month after it: its statement from
/// today's usage against the frozen one, both at the frozen rates and capacity.
fn adjustments(
    rt: &Handle,
    pool: &PgPool,
    prices: &Prices,
    month: Day,
    period: &Period,
    visible: Option<&[String]>,
    stop: &dyn Interrupt,
) -> Result<Vec<model::Adjustment>> {
    let (from, to) = (month, month.next_month());
    let ledger = || {
        Ledger::new(
            from,
            to,
            period.idle,
            period.lend_credit_pct,
            prices.teams.clone(),
            visible,
        )
    };
    let (mut frozen, mut now) = (ledger(), ledger());
    for (frozen_usage, ledger) in [(true, &mut frozen), (false, &mut now)] {
        let add = &mut |facts: &DayFacts| {
            ledger.add_day(facts);
            Ok(())
        };
        for_each_day(
            rt,
            pool,
            prices,
            from,
            to,
            &|_| frozen_usage,
            &|_| true,
            stop,
            add,
        )?;
    }
    Ok(model::adjustments(
        &month.month_name(),
        &frozen.finish(),
        &now.finish(),
    ))
}

/// Hands each day of `[from, to)` to `each`, in order, reading a few days at a time: usage and
/// tokens frozen on days `frozen_usage` says, capacity and rates frozen on days `frozen_prices`
/// says (where the month was closed), live otherwise.
#[allow(clippy::too_many_arguments)]
fn for_each_day(
    rt: &Handle,
    pool: &PgPool,
    prices: &Prices,
    from: Day,
    to: Day,
    frozen_usage: &dyn Fn(Day) -> bool,
    frozen_prices: &dyn Fn(Day) -> bool,
    stop: &dyn Interrupt,
    each: &mut dyn FnMut(&DayFacts) -> Result<()>,
) -> Result<()> {
    let teams = i64::try_from(prices.teams.len()).unwrap_or(i64::MAX).max(1);
    let per_read = i32::try_from((TEAM_DAYS_PER_READ / teams).clamp(1, 31)).unwrap_or(1);
    let mut start = from;
    while start < to {
        if stop.fired() {
            return Err(Error::Unavailable);
        }
        let end = start.plus(per_read).min(to);
        let mut rows = rt.block_on(Rows::read(pool, start, end))?;
        for n in 0..start.days_until(end) {
            let day = start.plus(n);
            each(&rows.day(prices, day, frozen_usage(day), frozen_prices(day)))?;
        }
        start = end;
    }
    Ok(())
}

impl Prices {
    async fn read(pool: &PgPool, period: &Period) -> Result<Prices> {
        let mut conn = pool.acquire().await?;
        let mut frozen: BTreeMap<Day, Vec<FrozenRate>> = BTreeMap::new();
        // the period's frozen rates and those of closed months it adjusts (before it)
        let since = period.from.plus(-MAX_DAYS).first_of_month();
        for rate in db::frozen_rates(&mut *conn, since, period.to).await? {
            frozen.entry(rate.day).or_default().push(rate);
        }
        Ok(Prices {
            teams: db::teams(&mut *conn).await?,
            capacity: db::capacity(&mut *conn).await?,
            live_rates: db::rates(&mut *conn).await?,
            closed: db::closed_months(&mut *conn)
                .await?
                .into_iter()
                .map(|(month, _, _)| month)
                .collect(),
            frozen,
            now_ms: i64::MAX,
        })
    }

    fn is_closed(&self, day: Day) -> bool {
        self.closed.contains(&day.first_of_month())
    }

    /// Closed months whose late changes this period carries: those whose first open month
    /// after them starts in it.
    fn adjusted_months(&self, period: &Period) -> Vec<Day> {
        self.closed
            .iter()
            .copied()
            .filter(|&closed| {
                let mut next = closed.next_month();
                while self.closed.contains(&next) {
                    next = next.next_month();
                }
                next >= period.from && next < period.to
            })
            .collect()
    }
}

/// The rollups of a few days, live and frozen.
struct Rows {
    live_usage: BTreeMap<Day, Vec<UsageDay>>,
    live_tokens: BTreeMap<Day, Vec<TokensDay>>,
    frozen_usage: BTreeMap<Day, Vec<UsageDay>>,
    frozen_tokens: BTreeMap<Day, Vec<TokensDay>>,
}

impl Rows {
    async fn read(pool: &PgPool, from: Day, to: Day) -> Result<Rows> {
        let mut conn = pool.acquire().await?;
        Ok(Rows {
            live_usage: by_day(db::usage_days(&mut *conn, from, to).await?, |u| u.day),
            live_tokens: by_day(db::token_days(&mut *conn, from, to).await?, |t| t.day),
            frozen_usage: by_day(db::frozen_usage(&mut *conn, from, to).await?, |u| u.day),
            frozen_tokens: by_day(db::frozen_tokens(&mut *conn, from, to).await?, |t| t.day),
        })
    }

    /// One day's facts. A day is priced at exactly its rate: the frozen one where its month
    /// was closed, else the live rate in force that day.
    fn day(
        &mut self,
        prices: &Prices,
        day: Day,
        frozen_usage: bool,
        frozen_prices: bool,
    ) -> DayFacts {
        let (usage, tokens) = if frozen_usage {
            (&mut self.frozen_usage, &mut self.frozen_tokens)
        } else {
            (&mut self.live_usage, &mut self.live_tokens)
        };
        let usage = usage.remove(&day).unwrap_or_default();
        let tokens = tokens.remove(&day).unwrap_or_default();
        let frozen = prices.frozen.get(&day).filter(|_| frozen_prices);
        let (capacity, rates) = match frozen {
            Some(frozen) => (
                frozen.iter().map(|r| (r.flavor.clone(), r.gpus)).collect(),
                frozen
                    .iter()
                    .filter_map(|r| r.cents_per_gpu_hour.map(|c| (r.flavor.clone(), c)))
                    .collect(),
            ),
            None => {
                let flavors: BTreeSet<&String> = prices
                    .capacity
                    .keys()
                    .chain(usage.iter().map(|u| &u.flavor))
                    .collect();
                let rates = flavors
                    .into_iter()
                    .filter_map(|f| {
                        model::rate_on(&prices.live_rates, f, day).map(|c| (f.clone(), c))
                    })
                    .collect();
                (prices.capacity.clone(), rates)
            }
        };
        let elapsed_ms =
            (prices.now_ms.saturating_sub(day_ms(day))).clamp(0, shared::common::utc::DAY_MS);
        DayFacts {
            day,
            capacity,
            priced_us: elapsed_ms * 1_000,
            rates,
            usage,
            tokens,
        }
    }
}

fn by_day<T>(rows: Vec<T>, day: impl Fn(&T) -> Day) -> BTreeMap<Day, Vec<T>> {
    let mut days: BTreeMap<Day, Vec<T>> = BTreeMap::new();
    for row in rows {
        days.entry(day(&row)).or_default().push(row);
    }
    days
}

/// Writes a statement as JSON, CSV or FOCUS CSV in pieces of about [`PIECE_BYTES`], handing
/// each to `send` (a response body's channel): the days first, then the period's lines, so
/// nothing but the piece being written is held. The JSON is the [`Statement`] object with
/// `days` first; the CSV is [`model::csv`]'s; the FOCUS CSV is [`model::focus`]'s rows, day by
/// day.
pub struct Writer<F: FnMut(Vec<u8>) -> Result<()>> {
    format: Written,
    buf: Vec<u8>,
    wrote_days: bool,
    send: F,
}

enum Written {
    Json,
    Csv(CsvHead),
    Focus(FocusHead),
}

/// About how much a [`Writer`] gathers before it sends.
pub const PIECE_BYTES: usize = 64 * 1024;

impl<F: FnMut(Vec<u8>) -> Result<()>> Writer<F> {
    pub fn new(period: &Period, send: F) -> Self {
        let (format, head) = match period.format {
            Format::Json => (Written::Json, String::new()),
            Format::Csv => (
                Written::Csv(CsvHead {
                    from: period.from,
                    to_inclusive: period.to.plus(-1),
                    idle: period.idle,
                    lend_credit_pct: period.lend_credit_pct,
                }),
                format!("{}\r\n", model::CSV_HEADER),
            ),
            Format::Focus(basis) => (
                Written::Focus(FocusHead::new(period.from, period.to, basis, period.idle)),
                model::focus::header(),
            ),
        };
        Writer {
            format,
            buf: head.into_bytes(),
            wrote_days: false,
            send,
        }
    }

    fn csv_block(
        &mut self,
        head: CsvHead,
        day: Option<Day>,
        teams: &[TeamLine],
        fleet: Option<&FleetLine>,
    ) {
        let mut rows = String::new();
        head.block(&mut rows, day, teams, fleet);
        self.buf.extend_from_slice(rows.as_bytes());
    }

    fn flush(&mut self, at_least: usize) -> Result<()> {
        if self.buf.len() >= at_least {
            (self.send)(std::mem::take(&mut self.buf))?;
        }
        Ok(())
    }
}

impl<F: FnMut(Vec<u8>) -> Result<()>> Sink for Writer<F> {
    fn day(
        &mut self,
        facts: &DayFacts,
        day: &DayStatement,
        exact: &BTreeMap<String, ExactShares>,
        teams: &[Team],
    ) -> Result<()> {
        match &mut self.format {
            Written::Csv(head) => {
                let head = *head;
                self.csv_block(head, Some(day.day), &day.teams, day.fleet.as_ref());
            }
            Written::Focus(head) => {
                let mut rows = String::new();
                head.day_rows(&mut rows, facts, day, exact, teams);
                self.buf.extend_from_slice(rows.as_bytes());
            }
            Written::Json => {
                self.buf.extend_from_slice(if self.wrote_days {
                    b","
                } else {
                    b"{\"days\":["
                });
                self.buf.extend_from_slice(&json(day)?);
            }
        }
        self.wrote_days = true;
        self.flush(PIECE_BYTES)
    }

    fn finish(&mut self, statement: &Statement) -> Result<()> {
        match &self.format {
            Written::Csv(head) => {
                let head = *head;
                self.csv_block(head, None, &statement.teams, statement.fleet.as_ref());
            }
            // a FOCUS row's charge period is a day: the period adds no rows
            Written::Focus(_) => {}
            Written::Json => {
                // `statement` has no days: its object, opened after the days already written
                let whole = json(statement)?;
                let rest = if self.wrote_days {
                    self.buf.extend_from_slice(b"],");
                    &whole[1..]
                } else {
                    &whole[..]
                };
                self.buf.extend_from_slice(rest);
            }
        }
        self.flush(1)
    }
}

fn json(value: &impl serde::Serialize) -> Result<Vec<u8>> {
    serde_json::to_vec(value)
        .map_err(|err| Error::Internal(format!("cannot write the statement: {err}")))
}

fn day_ms(day: Day) -> i64 {
    i64::from(day.days_since_epoch()) * shared::common::utc::DAY_MS
}
