//! Memory for repositories read whole (`getRepo`), resynchronisations and the backfill's
//! alike: one budget shared by every read in flight, so that many large answers at once cost
//! the budget, not their sum. A body is kept in memory while the budget has room for it as it
//! grows; when it has none, the body goes on to a temporary file instead and, once whole,
//! waits for memory to be read back and verified. No read waits for memory while it holds any,
//! so reads cannot hold each other up for ever; one that waits too long is read again later,
//! which is not a verdict on the repository.

use crate::IngestMetrics;
use std::sync::Arc;
use std::time::Duration;
use svc_atproto::{AtprotoError, BodyChunks};
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The budget when none is set: one repository of the largest size read at once.
pub const DEFAULT_READ_MEMORY_MB: usize = 256;
/// The budget is counted in KiB, so that a whole budget fits a semaphore's count.
const UNIT: usize = 1 << 10;
/// What a body is first given room for: most repositories are smaller.
const FIRST_ROOM: usize = 1 << 20;
/// A body in memory is held in pieces of this size.
const PIECE: usize = 256 << 10;
/// What a copy costs while it is verified, per byte of its body: the CAR, and its blocks
/// copied out of it (the CAR is let go once they are).
const VERIFIED_PER_BYTE: usize = 2;
/// The most written to a temporary file at once.
const WRITE_PIECE: usize = 64 << 10;
/// The longest a whole body waits for memory; then it is read again later.
const MEMORY_WAIT: Duration = Duration::from_secs(600);

/// Why a body could not be read into the budget.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BudgetError {
    #[error(transparent)]
    Peer(#[from] AtprotoError),
    #[error("keeping the answer on disk while memory is in use: {0}")]
    Disk(#[from] std::io::Error),
    #[error("waited {} s for {} MiB of memory to verify it; read again later", .0.as_secs(), .1 >> 20)]
    Waited(Duration, usize),
}

/// The memory every repository read shares.
pub(crate) struct ReadBudget {
    permits: Arc<Semaphore>,
    /// The whole budget, in units.
    total: usize,
    metrics: Arc<IngestMetrics>,
}

/// Memory granted to one read, given back when dropped.
pub(crate) struct Held {
    permit: Option<OwnedSemaphorePermit>,
    metrics: Arc<IngestMetrics>,
}

impl Held {
    fn units(&self) -> usize {
        self.permit.as_ref().map_or(0, |p| p.num_permits())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let bytes = self.units() * UNIT;
        self.metrics.read_memory_bytes.dec_by(bytes as i64);
    }
}

impl ReadBudget {
    pub fn new(bytes: usize, metrics: Arc<IngestMetrics>) -> ReadBudget {
        let total = bytes.div_ceil(UNIT).max(1);
        ReadBudget {
            permits: Arc::new(Semaphore::new(total)),
            total,
            metrics,
        }
    }

    /// Nothing yet.
    pub fn none(&self) -> Held {
        Held {
            permit: None,
            metrics: Arc::clone(&self.metrics),
        }
    }

    /// What `bytes` cost, at most the whole budget: a read that needs more than all of it is
    /// given all of it, and runs alone.
    fn units(&self, bytes: usize) -> usize {
        bytes.div_ceil(UNIT).min(self.total)
    }

    /// Makes `held` hold `bytes` if the budget has that much free now; never waits, so that
    /// nothing waits for memory while holding some.
    fn try_grow(&self, held: &mut Held, bytes: usize) -> bool {
        if bytes.div_ceil(UNIT) > self.total {
            return false;
        }
        let more = self.units(bytes).saturating_sub(held.units());
        if more == 0 {
            return true;
        }
        let Ok(permit) = Arc::clone(&self.permits).try_acquire_many_owned(more as u32) else {
            return false;
        };
        self.metrics.read_memory_bytes.inc_by((more * UNIT) as i64);
        match &mut held.permit {
            Some(holding) => holding.merge(permit),
            None => held.permit = Some(permit),
        }
        true
    }

    /// `bytes` (at most the whole budget), waited for with nothing held, at most
    /// [`MEMORY_WAIT`].
    async fn wait_for(&self, bytes: usize) -> Result<Held, BudgetError> {
        let units = self.units(bytes);
        self.metrics.read_memory_waits.inc();
        let waiting = Arc::clone(&self.permits).acquire_many_owned(units as u32);
        let permit = match tokio::time::timeout(MEMORY_WAIT, waiting).await {
            Ok(Ok(permit)) => permit,
            // The semaphore is never closed; a closed one is waited out like a full one.
            Ok(Err(_)) | Err(_) => return Err(BudgetError::Waited(MEMORY_WAIT, bytes)),
        };
        self.metrics.read_memory_bytes.inc_by((units * UNIT) as i64);
        Ok(Held {
            permit: Some(permit),
            metrics: Arc::clone(&self.metrics),
        })
    }
}

/// A body as it was read: in memory, within the budget, or on disk when the budget had no
/// room for it.
pub(crate) enum ReadBody {
    Memory { body: Pieces, held: Held },
    Disk { file: tokio::fs::File, len: usize },
}

/// A body in memory as pieces of [`PIECE`] bytes, each allocated once: a buffer grown by
/// copying would leave each outgrown one with the allocator, resident a while longer.
#[derive(Default)]
pub(crate) struct Pieces {
    pieces: Vec<Vec<u8>>,
    len: usize,
}

impl Pieces {
    fn push(&mut self, mut bytes: &[u8]) {
        self.len += bytes.len();
        while !bytes.is_empty() {
            if self.pieces.last().is_none_or(|last| last.len() == PIECE) {
                self.pieces.push(Vec::with_capacity(PIECE));
            }
            let Some(last) = self.pieces.last_mut() else {
                return;
            };
            let taken = bytes.len().min(PIECE - last.len());
            last.extend_from_slice(&bytes[..taken]);
            bytes = &bytes[taken..];
        }
    }

    /// The room the pieces take.
    fn room(&self) -> usize {
        self.pieces.len() * PIECE
    }

    /// The body in one buffer.
    fn joined(self) -> Vec<u8> {
        let mut body = Vec::with_capacity(self.len);
        for piece in self.pieces {
            body.extend_from_slice(&piece);
        }
        body
    }
}

impl ReadBudget {
    /// Reads `chunks` whole, in memory while the budget has room, else on disk.
    pub async fn read(&self, mut chunks: BodyChunks) -> Result<ReadBody, BudgetError> {
        let mut read = ReadBody::Memory {
            body: Pieces::default(),
            held: self.none(),
        };
        while let Some(chunk) = chunks.next().await? {
            read = match read {
                ReadBody::Memory { mut body, mut held } => {
                    let needed = (body.len + chunk.len()).div_ceil(PIECE) * PIECE;
                    let room = needed.max(held.units() * UNIT * 2).max(FIRST_ROOM);
                    if needed > held.units() * UNIT && !self.try_grow(&mut held, room) {
                        drop(held);
                        let (mut file, len) = spill(&body, &self.metrics).await?;
                        drop(body);
                        write_pieces(&mut file, &chunk).await?;
                        ReadBody::Disk {
                            file,
                            len: len + chunk.len(),
                        }
                    } else {
                        body.push(&chunk);
                        ReadBody::Memory { body, held }
                    }
                }
                ReadBody::Disk { mut file, len } => {
                    write_pieces(&mut file, &chunk).await?;
                    ReadBody::Disk {
                        file,
                        len: len + chunk.len(),
                    }
                }
            };
        }
        Ok(read)
    }

    /// The whole body in memory, with the memory its verification takes held: at once when
    /// the budget has room, else after waiting for it with nothing held (the body on disk).
    pub async fn whole(&self, read: ReadBody) -> Result<(Vec<u8>, Held), BudgetError> {
        let (mut file, len) = match read {
            ReadBody::Memory { body, mut held } => {
                let verified = body.len * VERIFIED_PER_BYTE;
                // Joining holds the pieces and the buffer at once: as much as verifying.
                if self.try_grow(&mut held, verified.max(body.room() + body.len)) {
                    return Ok((body.joined(), held));
                }
                drop(held);
                spill(&body, &self.metrics).await?
            }
            ReadBody::Disk { file, len } => (file, len),
        };
        let held = self.wait_for(len * VERIFIED_PER_BYTE).await?;
        file.flush().await?;
        file.seek(std::io::SeekFrom::Start(0)).await?;
        // Exactly its length: reading to the end would grow a full buffer to probe for more,
        // moving the whole body into one twice its size.
        let mut body = vec![0; len];
        file.read_exact(&mut body).await?;
        Ok((body, held))
    }
}

/// `body` written to a new temporary file (gone when the file is closed), to go on there.
async fn spill(
    body: &Pieces,
    metrics: &IngestMetrics,
) -> Result<(tokio::fs::File, usize), BudgetError> {
    metrics.read_spills.inc();
    let file = tokio::task::spawn_blocking(tempfile::tempfile)
        .await
        .map_err(std::io::Error::other)??;
    let mut file = tokio::fs::File::from_std(file);
    for piece in &body.pieces {
        write_pieces(&mut file, piece).await?;
    }
    Ok((file, body.len))
}

/// Writes `bytes` in pieces: the file keeps a buffer the size of its largest write for as
/// long as it is open, memory the budget does not count.
async fn write_pieces(file: &mut tokio::fs::File, bytes: &[u8]) -> std::io::Result<()> {
    for piece in bytes.chunks(WRITE_PIECE) {
        file.write_all(piece).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_grows_only_into_free_memory_and_gives_it_back() {
        let budget = ReadBudget::new(4 << 20, Arc::new(IngestMetrics::default()));
        let mut first = budget.none();
        assert!(budget.try_grow(&mut first, 3 << 20));
        let mut second = budget.none();
        assert!(!budget.try_grow(&mut second, 2 << 20));
        assert!(budget.try_grow(&mut second, 1 << 20));
        // More than the whole budget is never had by growing.
        assert!(!budget.try_grow(&mut second, 5 << 20));
        drop(first);
        assert!(budget.try_grow(&mut second, 4 << 20));
        assert_eq!(budget.metrics.read_memory_bytes.get(), 4 << 20);
        drop(second);
        assert_eq!(budget.metrics.read_memory_bytes.get(), 0);
    }

    #[test]
    fn pieces_join_into_the_body_in_order() {
        let mut pieces = Pieces::default();
        let body: Vec<u8> = (0..PIECE * 2 + 5).map(|i| (i % 251) as u8).collect();
        for chunk in body.chunks(PIECE / 3 + 7) {
            pieces.push(chunk);
        }
        assert_eq!((pieces.pieces.len(), pieces.room()), (3, PIECE * 3));
        assert_eq!(pieces.joined(), body);
    }

    #[tokio::test]
    async fn a_wait_for_more_than_the_budget_takes_all_of_it() {
        let budget = ReadBudget::new(4 << 20, Arc::new(IngestMetrics::default()));
        let held = budget.wait_for(64 << 20).await.expect("the whole budget");
        assert_eq!(held.units() * UNIT, 4 << 20);
        let mut other = budget.none();
        assert!(!budget.try_grow(&mut other, 1));
    }
}
