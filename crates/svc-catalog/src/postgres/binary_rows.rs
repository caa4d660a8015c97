//! Rows in COPY's binary format, written a piece at a time.

use bytes::Bytes;

/// COPY data is sent in pieces of about this size, so that the database reads one while the
/// next is written.
pub(super) const COPY_PIECE: usize = 1 << 20;

/// The longest value PostgreSQL stores in a field.
pub(super) const MAX_FIELD: usize = (1 << 30) - 1;

/// Rows in COPY's binary format: nothing to escape, numbers as they are.
pub(super) struct BinaryRows {
    pub(super) bytes: Vec<u8>,
}

impl BinaryRows {
    pub fn new() -> BinaryRows {
        let mut bytes = Vec::with_capacity(COPY_PIECE + COPY_PIECE / 4);
        // The signature, no flags, no header extension.
        bytes.extend_from_slice(b"PGCOPY\n\xff\r\n\0");
        bytes.extend_from_slice(&[0; 8]);
        BinaryRows { bytes }
    }

    pub fn row(&mut self, fields: i16) {
        self.bytes.extend_from_slice(&fields.to_be_bytes());
    }

    pub fn bigint(&mut self, value: i64) {
        self.bytes.extend_from_slice(&8i32.to_be_bytes());
        self.bytes.extend_from_slice(&value.to_be_bytes());
    }

    /// A text value; `None` is NULL. Callers keep to `MAX_FIELD` bytes.
    pub fn text(&mut self, value: Option<&str>) {
        match value {
            Some(text) => {
                let length = text.len().min(MAX_FIELD) as i32;
                self.bytes.extend_from_slice(&length.to_be_bytes());
                self.bytes.extend_from_slice(text.as_bytes());
            }
            None => self.bytes.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }

    pub fn take(&mut self) -> Bytes {
        let full = std::mem::replace(
            &mut self.bytes,
            Vec::with_capacity(COPY_PIECE + COPY_PIECE / 4),
        );
        Bytes::from(full)
    }
}
