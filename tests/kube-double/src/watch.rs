//! Watches, as the API server serves them (`?watch=true` on a list): every write is a change in
//! the server's log with the resource version it made, and a watch is a stream of JSON lines
//! (`{"type": …, "object": …}`):
//!
//! - from `resourceVersion` R: the changes after R, then each new one as it happens;
//! - without one (or "0"): a synthetic `ADDED` for every object there is, then new changes;
//! - R older than the log keeps (`compact`, or more than [`KEPT`] changes since): one `ERROR`
//!   event holding the `Status` 410 Expired, and the end of the stream — the client lists again;
//! - `allowWatchBookmarks=true`: `BOOKMARK`s (the object's kind with only
//!   `metadata.resourceVersion`) when asked for (`KubeDouble::bookmark`) and before the stream
//!   ends at `timeoutSeconds`;
//! - `KubeDouble::close_watches` ends every open stream, as an API server's restart does.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    body::{Body, Bytes},
    http::{StatusCode, header},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};

use crate::{Key, World};

/// Changes the log keeps; a watch from before the oldest is answered 410 Expired.
pub const KEPT: usize = 10_000;

/// The watch's length when the client names none (the API server's default is 30 to 60 min).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    Added,
    Modified,
    Deleted,
    Bookmark,
}

impl Event {
    fn name(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
            Self::Bookmark => "BOOKMARK",
        }
    }
}

#[derive(Debug, Clone)]
struct Change {
    seq: u64,
    /// The resource version the change made (a bookmark's: the server's at the time).
    version: u64,
    event: Event,
    /// None for a bookmark, which every watch that allows them receives.
    key: Option<Key>,
    object: Value,
}

/// The server's changes, oldest first.
pub struct Log {
    changes: VecDeque<Change>,
    next_seq: u64,
    /// Resource versions up to this one are compacted away.
    compacted: u64,
    /// Watches opened before this many closings end.
    closings: u64,
    wake: tokio::sync::watch::Sender<u64>,
}

impl Default for Log {
    fn default() -> Self {
        Self {
            changes: VecDeque::new(),
            next_seq: 0,
            compacted: 0,
            closings: 0,
            wake: tokio::sync::watch::Sender::new(0),
        }
    }
}

impl Log {
    /// A write of the object at `key` that made resource version `version`.
    pub fn push(&mut self, version: u64, event: Event, key: Key, object: Value) {
        self.append(version, event, Some(key), object);
    }

    /// A bookmark at `version` for every watch that allows them.
    pub fn bookmark(&mut self, version: u64) {
        self.append(version, Event::Bookmark, None, Value::Null);
    }

    fn append(&mut self, version: u64, event: Event, key: Option<Key>, object: Value) {
        self.changes.push_back(Change {
            seq: self.next_seq,
            version,
            event,
            key,
            object,
        });
        self.next_seq += 1;
        while self.changes.len() > KEPT {
            if let Some(dropped) = self.changes.pop_front() {
                self.compacted = self.compacted.max(dropped.version);
            }
        }
        self.wake.send_replace(self.next_seq);
    }

    /// Forgets every change up to `version`, as etcd's compaction does.
    pub fn compact(&mut self, version: u64) {
        self.changes.retain(|c| c.version > version);
        self.compacted = self.compacted.max(version);
    }

    pub fn close_watches(&mut self) {
        self.closings += 1;
        self.wake.send_replace(self.next_seq);
    }

    /// The object of the last change, if it was a write of `key` (a controller's write that
    /// keeps the creation time it carries).
    pub fn last_object_of(&mut self, key: &Key) -> Option<&mut Value> {
        self.changes
            .back_mut()
            .filter(|c| c.key.as_ref() == Some(key))
            .map(|c| &mut c.object)
    }
}

/// What a watch follows: one kind, in one namespace or all.
pub struct Watch {
    pub group: String,
    pub plural: String,
    pub namespace: Option<String>,
    pub kind: String,
    pub api_version: String,
    pub bookmarks: bool,
    pub timeout: Option<Duration>,
}

impl Watch {
    fn wants(&self, change: &Change) -> bool {
        match &change.key {
            None => self.bookmarks,
            Some((group, plural, namespace, _)) => {
                *group == self.group
                    && *plural == self.plural
                    && self.namespace.as_ref().is_none_or(|n| n == namespace)
            }
        }
    }

    fn line(&self, event: Event, object: &Value, version: u64) -> String {
        let object = match event {
            Event::Bookmark => json!({"kind": self.kind, "apiVersion": self.api_version,
                "metadata": {"resourceVersion": version.to_string()}}),
            _ => object.clone(),
        };
        format!("{}\n", json!({"type": event.name(), "object": object}))
    }
}

/// The answer to a watch from `from` (the request's `resourceVersion`); `current` gives each
/// object there is now, as a GET shows it, for a watch that starts without a version.
pub fn start(
    world: &Arc<Mutex<World>>,
    locked: &World,
    watch: Watch,
    from: Option<u64>,
    current: impl FnOnce() -> Vec<Value>,
) -> Response {
    let log = &locked.log;
    let mut first = String::new();
    let mut cursor = log.next_seq;
    let mut done = false;
    match from.filter(|v| *v > 0) {
        None => {
            for object in &current() {
                first.push_str(&watch.line(Event::Added, object, 0));
            }
        }
        Some(from) if from < log.compacted => {
            let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "reason": "Expired", "code": 410,
                "message": format!("too old resource version: {from} ({})", log.compacted + 1)});
            first = format!("{}\n", json!({"type": "ERROR", "object": status}));
            done = true;
        }
        Some(from) => {
            cursor = log
                .changes
                .iter()
                .find(|c| c.version > from && c.key.is_some())
                .map_or(log.next_seq, |c| c.seq);
        }
    }
    let stream = Stream {
        world: world.clone(),
        wake: log.wake.subscribe(),
        cursor,
        closings: log.closings,
        deadline: tokio::time::Instant::now() + watch.timeout.unwrap_or(DEFAULT_TIMEOUT),
        watch,
        done,
    };
    let body = futures_util::stream::unfold(
        (stream, Some(first).filter(|f| !f.is_empty())),
        |(mut stream, first)| async move {
            let lines = match first {
                Some(first) => first,
                None => stream.next().await?,
            };
            Some((
                Ok::<_, std::convert::Infallible>(Bytes::from(lines)),
                (stream, None),
            ))
        },
    );
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(body),
    )
        .into_response()
}

struct Stream {
    world: Arc<Mutex<World>>,
    wake: tokio::sync::watch::Receiver<u64>,
    cursor: u64,
    closings: u64,
    deadline: tokio::time::Instant,
    watch: Watch,
    done: bool,
}

impl Stream {
    /// The lines of the changes since the last, waiting for one; None when the stream ends.
    async fn next(&mut self) -> Option<String> {
        while !self.done {
            let (lines, version) = {
                let world = self.world.lock().unwrap_or_else(|e| e.into_inner());
                if world.log.closings > self.closings {
                    return None;
                }
                let lines: String = world
                    .log
                    .changes
                    .iter()
                    .filter(|c| c.seq >= self.cursor && self.watch.wants(c))
                    .map(|c| self.watch.line(c.event, &c.object, c.version))
                    .collect();
                self.cursor = world.log.next_seq;
                (lines, world.resource_version)
            };
            if !lines.is_empty() {
                return Some(lines);
            }
            tokio::select! {
                changed = self.wake.changed() => if changed.is_err() { return None },
                () = tokio::time::sleep_until(self.deadline) => {
                    self.done = true;
                    if self.watch.bookmarks {
                        return Some(self.watch.line(Event::Bookmark, &Value::Null, version));
                    }
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> Key {
        let text = |s: &str| s.to_owned();
        (
            text("kueue.x-k8s.io"),
            text("workloads"),
            text("ns"),
            text(name),
        )
    }

    #[test]
    fn the_log_keeps_a_bounded_window_and_says_from_where() {
        let mut log = Log::default();
        for version in 1..=(KEPT as u64 + 2) {
            log.push(version, Event::Added, key("w"), Value::Null);
        }
        // Two changes more than it keeps: versions 1 and 2 went, so a watch from 1 is 410.
        assert_eq!((log.changes.len(), log.compacted), (KEPT, 2));
        log.bookmark(KEPT as u64 + 2);
        log.compact(KEPT as u64);
        let left: Vec<(u64, Event)> = log.changes.iter().map(|c| (c.version, c.event)).collect();
        assert_eq!(
            left,
            [
                (KEPT as u64 + 1, Event::Added),
                (KEPT as u64 + 2, Event::Added),
                (KEPT as u64 + 2, Event::Bookmark)
            ]
        );
        assert_eq!(log.compacted, KEPT as u64);
    }
}
