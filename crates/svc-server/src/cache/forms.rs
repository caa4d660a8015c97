//! The forms one cached answer takes: as it goes out, LZ4-compressed while kept (with its
//! expanded form kept too when it is asked for often), and gzip once a client takes it.

use super::ALLOCATION_SLACK;
use crate::ApiError;
use axum::body::Bytes;
use std::io::Write;
use std::sync::{Arc, OnceLock};

/// One encoded answer, in the forms asked for so far.
pub(crate) struct Answer {
    pub(super) body: Body,
    /// For an LZ4 body asked for often: the answer expanded, kept.
    pub(super) expanded: OnceLock<Bytes>,
    gzip: OnceLock<Option<Bytes>>,
}

pub(super) enum Body {
    /// As it goes out: short, or not kept.
    Plain(Bytes),
    /// Kept in the cache, where memory is the limit: LZ4 takes JSON answers to about a
    /// quarter (so the budget holds about three times more of them) and expands them at
    /// several GB/s, microseconds per answer, far less than reading them again.
    Lz4 { block: Bytes, len: usize },
}

/// Answers shorter than this are kept and sent as they are: compressing them would save a
/// packet at most.
const COMPRESS_MIN_BYTES: usize = 1024;

/// An answer in the form the cache keeps, made where the answer is written (off the runtime's
/// threads): LZ4, the expanded length first. The encoder allocates for the worst case, about
/// the input's length; cut to the block's own length, the budget is charged what is held.
pub(crate) fn compress(json: &[u8]) -> Vec<u8> {
    let mut block = lz4_flex::block::compress_prepend_size(json);
    block.shrink_to_fit();
    block
}

fn expand(block: &[u8]) -> Result<Bytes, ApiError> {
    lz4_flex::block::decompress_size_prepended(block)
        .map(Bytes::from)
        .map_err(|e| ApiError::Internal(format!("a cached answer does not expand: {e}")))
}

impl Answer {
    /// An answer that goes out as it is (and never gets a gzip form).
    pub fn new(identity: Bytes) -> Answer {
        Answer {
            body: Body::Plain(identity),
            expanded: OnceLock::new(),
            gzip: OnceLock::new(),
        }
    }

    /// An answer `compress` made; a short one is expanded now and kept as it is.
    pub fn from_compressed(block: Bytes) -> Result<Answer, ApiError> {
        let prefix = block
            .first_chunk::<4>()
            .ok_or_else(|| ApiError::Internal("a compressed answer without its length".into()))?;
        let len = u32::from_le_bytes(*prefix) as usize;
        if len < COMPRESS_MIN_BYTES {
            return Ok(Answer::new(expand(&block)?));
        }
        Ok(Answer {
            body: Body::Lz4 { block, len },
            expanded: OnceLock::new(),
            gzip: OnceLock::new(),
        })
    }

    /// An answer built whole (a page, a route answer): in the form the cache keeps when
    /// `kept`, else as it goes out.
    pub fn built(body: Vec<u8>, kept: bool) -> Result<Arc<Answer>, ApiError> {
        Ok(Arc::new(match kept {
            true => Answer::from_compressed(Bytes::from(compress(&body)))?,
            false => Answer::new(Bytes::from(body)),
        }))
    }

    /// The answer as it goes to a client that takes no compression.
    pub fn identity(&self) -> Result<Bytes, ApiError> {
        match (&self.body, self.expanded.get()) {
            (Body::Plain(bytes), _) | (Body::Lz4 { .. }, Some(bytes)) => Ok(bytes.clone()),
            (Body::Lz4 { block, .. }, None) => expand(block),
        }
    }

    /// The length of the expanded form an LZ4 body could keep; 0 for a plain body.
    pub(super) fn expanded_len(&self) -> usize {
        match &self.body {
            Body::Lz4 { len, .. } => *len,
            Body::Plain(_) => 0,
        }
    }

    /// Keeps the expanded form of an LZ4 body.
    pub(super) fn keep_expanded(&self) {
        if let Body::Lz4 { block, .. } = &self.body
            && let Ok(bytes) = expand(block)
        {
            // Another request may have kept it meanwhile: the same bytes.
            let _ = self.expanded.set(bytes);
        }
    }

    /// The gzip form, compressed on first use; `None` for answers that go out as they are,
    /// and for the (unseen) answer whose gzip form would outgrow what its entry reserved.
    pub fn gzip(&self) -> Option<&Bytes> {
        let Body::Lz4 { block, .. } = &self.body else {
            return None;
        };
        self.gzip
            .get_or_init(|| {
                gzip(&self.identity().ok()?).filter(|form| form.len() <= gzip_reserve(block))
            })
            .as_ref()
    }

    /// What the answer costs the cache's budget: what it keeps, with its allocation's
    /// rounding, and for a compressed one the room its gzip form may take.
    pub(super) fn charge(&self) -> usize {
        ALLOCATION_SLACK
            + match &self.body {
                Body::Plain(bytes) => bytes.len(),
                Body::Lz4 { block, .. } => block.len() + gzip_reserve(block) + ALLOCATION_SLACK,
            }
    }
}

/// The room kept for an answer's gzip form: its LZ4 block's length. Both find the same
/// repeats, and gzip also entropy-codes them, so at level 4 its form is the shorter one on
/// JSON (a sixth of the text or less, LZ4 a quarter); a form that is not is not kept.
pub(super) fn gzip_reserve(block: &Bytes) -> usize {
    block.len()
}

fn gzip(data: &[u8]) -> Option<Bytes> {
    let mut encoder = flate2::write::GzEncoder::new(
        Vec::with_capacity(data.len() / 4),
        flate2::Compression::new(4),
    );
    encoder.write_all(data).ok()?;
    let mut form = encoder.finish().ok()?;
    // Charged at its length: the guess at its capacity is given back.
    form.shrink_to_fit();
    Some(Bytes::from(form))
}
