//! The live view (`GET /api/usage/stream`, Server-Sent Events): each newly ingested minute,
//! per team, to any number of viewers.
//!
//! Invariants: one task reads the database per tick, only while someone listens, and hands
//! the minute to every subscriber through a broadcast channel (serialised once); a subscriber
//! that falls behind the channel is dropped rather than slowing the others (its browser
//! reconnects and resumes); a reconnect with `Last-Event-ID` first gets the minutes it missed
//! (at most an hour); a comment line every 15 s keeps proxies from closing an idle stream.

use std::{convert::Infallible, sync::Arc, time::Duration};

use axum::{
    Extension,
    extract::State,
    http::HeaderMap,
    response::sse::{Event, Sse},
};
use futures_util::{Stream, StreamExt, stream};
use shared::{
    accounts::Role,
    common::utc::{MINUTE_MS, format_rfc3339},
    usage::{LiveMinute, LiveTeam},
};
use sqlx::PgPool;
use tokio::sync::broadcast;

use crate::{
    access::Caller,
    app::AppState,
    error::{Error, Result},
};

const READERS: &[Role] = &[Role::Finance, Role::Approver, Role::Admin];
/// Minutes buffered per subscriber before it counts as too slow.
const BUFFER: usize = 64;
/// At most this many missed minutes are sent on a resume.
const RESUME_MINUTES: i64 = 60;

/// A minute and its JSON, made once for every subscriber.
pub type Shared = Arc<(LiveMinute, String)>;

pub struct Live {
    tx: broadcast::Sender<Shared>,
    pub every: Duration,
    /// How often a stream re-checks its viewer and sends a heartbeat.
    pub check_every: Duration,
    /// How long a stream lives before the browser must reconnect.
    pub lifetime: Duration,
    /// Streams one user may hold, and the server in all.
    pub per_user: usize,
    pub in_all: usize,
    /// Open streams per user.
    open: std::sync::Mutex<std::collections::HashMap<i64, usize>>,
}

impl Live {
    pub fn new(every: Duration) -> Self {
        Self::with_buffer(every, BUFFER)
    }

    /// With room for `buffer` minutes per subscriber before it is dropped as too slow.
    pub fn with_buffer(every: Duration, buffer: usize) -> Self {
        Self {
            tx: broadcast::channel(buffer.max(1)).0,
            every,
            check_every: Duration::from_secs(15),
            lifetime: Duration::from_secs(3600),
            per_user: 8,
            in_all: 2_000,
            open: std::sync::Mutex::default(),
        }
    }

    pub fn subscribers(&self) -> usize {
        self.tx.receiver_count()
    }
}

impl Default for Live {
    fn default() -> Self {
        Self::new(Duration::from_secs(5))
    }
}

/// Every `every`, while someone listens: the latest minute with DCGM data, sent when new.
pub fn spawn(pool: PgPool, live: Arc<Live>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut last = i64::MIN;
        loop {
            tokio::time::sleep(live.every).await;
            if live.subscribers() == 0 {
                continue;
            }
            match latest(&pool).await {
                Ok(Some(minute)) if minute.minute_ms > last => {
                    last = minute.minute_ms;
                    let json = serde_json::to_string(&minute).unwrap_or_default();
                    // no receiver left is not an error: the next tick checks again
                    let _ = live.tx.send(Arc::new((minute, json)));
                }
                Ok(_) => {}
                Err(err) => tracing::warn!(%err, "live view: cannot read the latest minute"),
            }
        }
    })
}

async fn latest(pool: &PgPool) -> sqlx::Result<Option<LiveMinute>> {
    let newest = sqlx::query_scalar!(
        r#"select (extract(epoch from max(minute)) * 1000)::bigint as "ms"
           from usage_minutes where observed_gpu_microseconds is not null"#
    )
    .fetch_one(pool)
    .await?;
    match newest {
        Some(ms) => Ok(minutes(pool, ms - 1, ms).await?.pop()),
        None => Ok(None),
    }
}

/// The minutes after `after_ms` up to and including `until_ms`, oldest first.
async fn minutes(pool: &PgPool, after_ms: i64, until_ms: i64) -> sqlx::Result<Vec<LiveMinute>> {
    let capacity = sqlx::query_scalar!(
        r#"select coalesce(sum(nodes::bigint * gpus_per_node), 0)::bigint as "gpus!" from node_pools"#
    )
    .fetch_one(pool)
    .await?;
    let rows = sqlx::query!(
        r#"select (extract(epoch from m.minute) * 1000)::bigint as "ms!", t.name as team,
                  sum(m.allocated_gpu_microseconds)::bigint as allocated,
                  coalesce(sum(m.busy_gpu_microseconds), 0)::bigint as "busy!",
                  coalesce(sum(m.observed_gpu_microseconds), 0)::bigint as "observed!"
           from usage_minutes m join teams t on t.id = m.team_id
           where m.minute > 'epoch'::timestamptz + $1::bigint * interval '1 millisecond'
             and m.minute <= 'epoch'::timestamptz + $2::bigint * interval '1 millisecond'
           group by 1, 2 order by 1, 2"#,
        after_ms,
        until_ms
    )
    .fetch_all(pool)
    .await?;
    let mut out: Vec<LiveMinute> = Vec::new();
    for r in rows {
        if out.last().is_none_or(|m| m.minute_ms != r.ms) {
            out.push(LiveMinute {
                minute: format_rfc3339(r.ms),
                minute_ms: r.ms,
                capacity_gpus: capacity,
                teams: Vec::new(),
            });
        }
        if let Some(minute) = out.last_mut() {
            minute.teams.push(LiveTeam {
                team: r.team,
                allocated_gpu_microseconds: r.allocated,
                busy_gpu_microseconds: r.busy,
                observed_gpu_microseconds: r.observed,
            });
        }
    }
    Ok(out)
}

/// What `caller` may see of a minute: every team for finance, approvers and admins; their own
/// teams for a requester. `None` when nothing changes (the shared JSON can go as it is).
fn visible(caller: &Caller, minute: &LiveMinute) -> Option<LiveMinute> {
    if caller.has_any(READERS) {
        return None;
    }
    let mut mine = minute.clone();
    mine.teams.retain(|t| caller.teams.contains(&t.team));
    Some(mine)
}

fn event(caller: &Caller, minute: &LiveMinute, json: &str) -> Event {
    let data = match visible(caller, minute) {
        Some(mine) => serde_json::to_string(&mine).unwrap_or_default(),
        None => json.to_owned(),
    };
    Event::default()
        .event("minute")
        .id(minute.minute_ms.to_string())
        .data(data)
}

/// `GET /api/usage/stream`: the minutes the viewer has not seen, then each new one. Every
/// [`Live::check_every`] the stream re-reads its viewer (and sends a heartbeat): it ends when
/// their session has ended or they were disabled, follows their teams as they are now, and
/// ends with no team left; it ends after [`Live::lifetime`] in any case (the browser
/// reconnects with `Last-Event-ID`, losing nothing). Each user holds at most
/// [`Live::per_user`] streams and the server [`Live::in_all`].
pub async fn stream(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = std::result::Result<Event, Infallible>>>> {
    if !may_watch(&caller) {
        return Err(Error::Forbidden(
            "the live view is for finance, approvers, admins and team members",
        ));
    }
    let seat = Seat::take(&state.live, caller.user_id)?;
    let rx = state.live.tx.subscribe();
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i64>().ok());
    // what the viewer has not seen: the minutes since its last event, else the latest hour
    let newest = latest(&state.pool).await?.map(|m| m.minute_ms);
    let backlog = match newest {
        Some(newest) => {
            let since = resume
                .unwrap_or(i64::MIN)
                .max(newest - RESUME_MINUTES * MINUTE_MS);
            minutes(&state.pool, since, newest).await?
        }
        None => Vec::new(),
    };
    let sent_up_to = backlog.last().map_or(i64::MIN, |m| m.minute_ms);
    let first = {
        let caller = caller.clone();
        stream::iter(backlog.into_iter().map(move |m| {
            let json = serde_json::to_string(&m).unwrap_or_default();
            Ok(event(&caller, &m, &json))
        }))
    };
    let now = tokio::time::Instant::now();
    let watch = Watch {
        end: now + state.live.lifetime,
        next_check: now + state.live.check_every,
        state,
        rx,
        caller,
        sent: sent_up_to,
        _seat: seat,
    };
    Ok(Sse::new(
        first.chain(stream::unfold(watch, Watch::next)).fuse(),
    ))
}

fn may_watch(caller: &Caller) -> bool {
    caller.has_any(READERS) || !caller.teams.is_empty()
}

/// One open stream after its backlog.
struct Watch {
    state: AppState,
    rx: broadcast::Receiver<Shared>,
    caller: Caller,
    /// The last minute sent.
    sent: i64,
    next_check: tokio::time::Instant,
    end: tokio::time::Instant,
    _seat: Seat,
}

impl Watch {
    /// The next event, or `None` to end the stream.
    async fn next(mut self) -> Option<(std::result::Result<Event, Infallible>, Watch)> {
        loop {
            tokio::select! {
                got = self.rx.recv() => match got {
                    Ok(shared) if shared.0.minute_ms <= self.sent => continue,
                    Ok(shared) => {
                        let ev = event(&self.caller, &shared.0, &shared.1);
                        self.sent = shared.0.minute_ms;
                        return Some((Ok(ev), self));
                    }
                    // too slow for the others, or the server is stopping: end this stream (the
                    // browser reconnects with Last-Event-ID)
                    Err(broadcast::error::RecvError::Lagged(_) | broadcast::error::RecvError::Closed) => {
                        return None;
                    }
                },
                () = tokio::time::sleep_until(self.next_check) => {
                    if tokio::time::Instant::now() >= self.end {
                        return None;
                    }
                    match crate::auth::recheck(&self.state, &self.caller).await {
                        Ok(Some(now)) if may_watch(&now) => self.caller = now,
                        Ok(_) => return None,
                        Err(err) => {
                            tracing::warn!(%err, "live view: cannot re-check the viewer; ending the stream");
                            return None;
                        }
                    }
                    self.next_check += self.state.live.check_every;
                    return Some((Ok(Event::default().comment("heartbeat")), self));
                }
            }
        }
    }
}

/// A stream's place in the caps; given back when the stream ends.
struct Seat {
    live: Arc<Live>,
    user: i64,
}

impl Seat {
    fn take(live: &Arc<Live>, user: i64) -> Result<Seat> {
        let mut open = live
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let total: usize = open.values().sum();
        if total >= live.in_all {
            return Err(Error::server_full(
                "the console has as many live views open as it serves; try again shortly",
                30,
            ));
        }
        let mine = open.entry(user).or_default();
        if *mine >= live.per_user {
            return Err(Error::caller_limit(
                "you have as many live views open as one user may; close one (another tab or window)",
                30,
            ));
        }
        *mine += 1;
        Ok(Seat {
            live: Arc::clone(live),
            user,
        })
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        let mut open = self
            .live
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = open.get_mut(&self.user) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.user);
            }
        }
    }
}
