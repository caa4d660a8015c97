//! Jetstream's events as the live source reads them: text frames, or zstd frames made with
//! Jetstream's dictionary, each one JSON event (parsed as an import line is, `jetstream.rs`)
//! made a source message whose cursor is its `time_us`.

use super::{JetstreamLine, parse_jetstream_line};
use crate::firehose::{Proof, SourceEvent, SourceMessage};

/// The dictionary Jetstream compresses events with (see `data/README.md`).
const JETSTREAM_DICTIONARY: &[u8] = include_bytes!("../../data/jetstream-zstd-dictionary");

/// Decompresses Jetstream events compressed with its dictionary. Made once per connection:
/// loading the dictionary costs more than decompressing an event.
pub(crate) struct JetstreamDecompressor(zstd::bulk::Decompressor<'static>);

impl JetstreamDecompressor {
    pub(crate) fn new() -> Result<JetstreamDecompressor, String> {
        zstd::bulk::Decompressor::with_dictionary(JETSTREAM_DICTIONARY)
            .map(JetstreamDecompressor)
            .map_err(|e| format!("zstd: {e}"))
    }

    /// An event of at most `limit` bytes, decompressed.
    pub(crate) fn decompress(&mut self, frame: &[u8], limit: usize) -> Result<String, String> {
        let bytes = self
            .0
            .decompress(frame, limit)
            .map_err(|e| format!("zstd: {e}"))?;
        String::from_utf8(bytes).map_err(|_| "zstd: the event is not UTF-8".to_string())
    }
}

/// One Jetstream JSON message as a source message (the cursor is its `time_us`).
pub(crate) fn jetstream_message(text: &str) -> Result<SourceMessage, String> {
    Ok(match parse_jetstream_line(text)? {
        JetstreamLine::Commit(commit) => {
            let time = commit.time_us;
            SourceMessage {
                events: vec![SourceEvent::Commit(commit)],
                cursor: time,
                time_us: time,
                proof: Proof::NotNeeded,
            }
        }
        JetstreamLine::Account {
            did,
            status,
            time_us,
        } => SourceMessage {
            events: vec![SourceEvent::Account { did, status }],
            cursor: time_us,
            time_us,
            proof: Proof::NotNeeded,
        },
        JetstreamLine::Other { time_us, .. } => SourceMessage {
            events: Vec::new(),
            cursor: time_us,
            time_us,
            proof: Proof::NotNeeded,
        },
    })
}
