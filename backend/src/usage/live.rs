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
    response::sse::{Event, KeepAlive, Sse},
};
use futures_util::{Stream, StreamExt, stream};
use shared::{
    auth::Role,
    usage::{LiveMinute, LiveTeam},
    utc::{MINUTE_MS, format_rfc3339},
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

/// `GET /api/usage/stream`.
pub async fn stream(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = std::result::Result<Event, Infallible>>>> {
    if !caller.has_any(READERS) && caller.teams.is_empty() {
        return Err(Error::Forbidden(
            "the live view is for finance, approvers, admins and team members",
        ));
    }
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
    let live = stream::unfold(
        (rx, caller, sent_up_to),
        |(mut rx, caller, sent)| async move {
            loop {
                match rx.recv().await {
                    Ok(shared) if shared.0.minute_ms <= sent => continue,
                    Ok(shared) => {
                        let ev = event(&caller, &shared.0, &shared.1);
                        return Some((Ok(ev), (rx, caller, shared.0.minute_ms)));
                    }
                    // too slow for the others, or the server is stopping: end this stream (the
                    // browser reconnects with Last-Event-ID)
                    Err(
                        broadcast::error::RecvError::Lagged(_)
                        | broadcast::error::RecvError::Closed,
                    ) => {
                        return None;
                    }
                }
            }
        },
    );
    Ok(Sse::new(first.chain(live)).keep_alive(
        KeepAlive::new()
            .interval(Duration::from_secs(15))
            .text("heartbeat"),
    ))
}
