//! The catalog's activity by minute, for the explorer's charts: how many changes entered the
//! change stream, and how far each source had read (the time of the newest event it stored).
//! Written in each commit's own transaction, so it is as durable as the changes and every
//! process on the catalog reads the same; kept for a day and an hour.

use crate::stream::StreamEntry;
use svc_syntax::{UnixMicros, UnixMillis};

/// How long minutes are kept: the charts show a day.
pub const ACTIVITY_KEEP_MS: i64 = 25 * 3_600_000;

const MINUTE_MS: i64 = 60_000;

/// What one commit adds to its minute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ActivityWrite<'a> {
    /// Unix minutes.
    pub minute: i64,
    /// Changes numbered into the stream.
    pub changes: i64,
    /// Sources whose cursor moved, with the time of their newest event.
    pub sources: Vec<(&'a str, i64)>,
}

impl<'a> ActivityWrite<'a> {
    /// What a commit at `at` with these stream entries and cursors adds; `None` when nothing.
    pub fn of(
        at: UnixMillis,
        stream: &[StreamEntry],
        cursors: &[&'a crate::CursorPosition],
    ) -> Option<ActivityWrite<'a>> {
        let changes = stream.iter().filter(|entry| !entry.uri.is_empty()).count() as i64;
        let sources: Vec<(&str, i64)> = cursors
            .iter()
            .filter_map(|cursor| Some((cursor.source.as_str(), cursor.event_time?.0)))
            .collect();
        (changes > 0 || !sources.is_empty()).then_some(ActivityWrite {
            minute: at.0.div_euclid(MINUTE_MS),
            changes,
            sources,
        })
    }
}

/// The activity of the minutes since a time, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Activity {
    /// Minutes with changes: (unix minute, changes).
    pub changes: Vec<(i64, u64)>,
    /// Each source's newest event time at the end of each minute its cursor moved in, by
    /// source then minute.
    pub sources: Vec<SourceMinute>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceMinute {
    pub source: String,
    /// Unix minutes.
    pub minute: i64,
    pub newest_event: UnixMicros,
}

impl Activity {
    /// Minutes as the engines store them: the change rows and the source rows.
    pub(crate) fn of_rows(changes: Vec<(i64, i64)>, sources: Vec<(String, i64, i64)>) -> Activity {
        Activity {
            changes: changes
                .into_iter()
                .map(|(minute, n)| (minute, n.max(0) as u64))
                .collect(),
            sources: sources
                .into_iter()
                .map(|(source, minute, event)| SourceMinute {
                    source,
                    minute,
                    newest_event: UnixMicros(event),
                })
                .collect(),
        }
    }
}

/// The first minute kept at `now`.
pub(crate) fn kept_from(now: UnixMillis) -> i64 {
    (now.0 - ACTIVITY_KEEP_MS).div_euclid(MINUTE_MS)
}

pub(crate) mod sql {
    pub const ADD_CHANGES: &str = "INSERT INTO activity_minutes (minute, changes) VALUES ($1, $2) \
         ON CONFLICT (minute) DO UPDATE SET changes = activity_minutes.changes + excluded.changes";
    pub const MOVE_SOURCE: &str = "INSERT INTO source_minutes (source, minute, event_us) \
         VALUES ($1, $2, $3) ON CONFLICT (source, minute) DO UPDATE SET event_us = \
         CASE WHEN excluded.event_us > source_minutes.event_us THEN excluded.event_us \
         ELSE source_minutes.event_us END";
    pub const CHANGES_SINCE: &str =
        "SELECT minute, changes FROM activity_minutes WHERE minute >= $1 ORDER BY minute";
    /// Each source's rows since a minute, and its last row before it (where it stood then).
    pub const SOURCES_SINCE: &str = "SELECT source, minute, event_us FROM source_minutes s \
         WHERE minute >= (SELECT coalesce(max(minute), $1) FROM source_minutes b \
           WHERE b.source = s.source AND b.minute <= $1) \
         ORDER BY source, minute";
    pub const TRIM_CHANGES: &str = "DELETE FROM activity_minutes WHERE minute < $1";
    /// Keeps each source's newest row, however old: where it stands.
    pub const TRIM_SOURCES: &str = "DELETE FROM source_minutes WHERE minute < $1 \
         AND minute < (SELECT max(minute) FROM source_minutes b WHERE b.source = source_minutes.source)";
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CursorPosition;

    #[test]
    fn a_commit_adds_its_named_changes_and_the_sources_that_moved_to_its_minute() {
        let moved = CursorPosition {
            source: "firehose".into(),
            endpoint: "wss://x".into(),
            cursor: "9".into(),
            event_time: Some(UnixMicros(5_000_000)),
        };
        let still = CursorPosition {
            event_time: None,
            ..moved.clone()
        };
        let named = StreamEntry {
            uri: "at://did:plc:a/dev.svc.bounty/1".into(),
            ..StreamEntry::gap()
        };
        let write = ActivityWrite::of(
            UnixMillis(3 * MINUTE_MS + 5),
            &[named, StreamEntry::gap()],
            &[&moved, &still],
        )
        .expect("something to add");
        assert_eq!(write.minute, 3);
        assert_eq!(write.changes, 1);
        assert_eq!(write.sources, vec![("firehose", 5_000_000)]);
        assert_eq!(
            ActivityWrite::of(UnixMillis(0), &[StreamEntry::gap()], &[&still]),
            None
        );
    }
}
