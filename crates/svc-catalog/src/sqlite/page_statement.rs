//! The statements every uncached page runs (its snapshot's begin and end, its count, its rows),
//! held through SQLite's C interface. rusqlite reads a column with three calls into the
//! statement (its type, its text, its length) behind a checked accessor, and finds each cached
//! statement by hashing its SQL; for a page of 100 items of three columns that was an eighth of
//! the page's instructions (callgrind). A text column here is one call into the statement (its
//! value) and two reads of that value. The SQL and its plans are unchanged.

use crate::CatalogResult;
use rusqlite::{Connection, ffi};
use std::ffi::{CStr, c_int};
use std::ptr::{self, NonNull};

/// A prepared statement of one connection, finalized when dropped: its owner drops it before
/// the connection (see [`super::reader::Reader`]).
pub(crate) struct PageStatement {
    statement: NonNull<ffi::sqlite3_stmt>,
    db: NonNull<ffi::sqlite3>,
}

impl PageStatement {
    pub(crate) fn prepare(conn: &Connection, sql: &str) -> CatalogResult<PageStatement> {
        // SAFETY: the handle is the connection's own, used on this thread only while `conn`
        // lives (the statement is finalized before the connection closes).
        let db = unsafe { conn.handle() };
        let db = NonNull::new(db).ok_or_else(|| failure_text("the connection is closed"))?;
        let length = c_int::try_from(sql.len()).map_err(|_| failure_text("statement too long"))?;
        let mut statement = ptr::null_mut();
        // SAFETY: `sql` is valid for `length` bytes (SQLite copies what it needs); `statement`
        // is written by SQLite.
        let rc = unsafe {
            ffi::sqlite3_prepare_v3(
                db.as_ptr(),
                sql.as_ptr().cast(),
                length,
                ffi::SQLITE_PREPARE_PERSISTENT,
                &mut statement,
                ptr::null_mut(),
            )
        };
        check(db, rc)?;
        let statement =
            NonNull::new(statement).ok_or_else(|| failure_text("the statement is empty"))?;
        Ok(PageStatement { statement, db })
    }

    /// Binds the parameters (1-based, in order), steps through the rows, and resets the
    /// statement however the reading ends.
    pub(crate) fn run(&mut self, parameters: &[Parameter<'_>]) -> CatalogResult<Rows<'_>> {
        let rows = Rows { statement: self };
        for (index, parameter) in parameters.iter().enumerate() {
            rows.statement.bind(index as c_int + 1, parameter)?;
        }
        Ok(rows)
    }

    fn bind(&mut self, index: c_int, parameter: &Parameter<'_>) -> CatalogResult<()> {
        let statement = self.statement.as_ptr();
        // SAFETY: the statement is live and reset (no step under way); SQLite copies bound
        // text (SQLITE_TRANSIENT), so `text` need not outlive the call.
        let rc = unsafe {
            match *parameter {
                Parameter::Integer(value) => ffi::sqlite3_bind_int64(statement, index, value),
                Parameter::Text(text) => ffi::sqlite3_bind_text(
                    statement,
                    index,
                    text.as_ptr().cast(),
                    c_int::try_from(text.len()).map_err(|_| failure_text("parameter too long"))?,
                    ffi::SQLITE_TRANSIENT(),
                ),
            }
        };
        check(self.db, rc)
    }
}

impl Drop for PageStatement {
    fn drop(&mut self) {
        // SAFETY: the statement is live and finalized once, here.
        unsafe {
            ffi::sqlite3_finalize(self.statement.as_ptr());
        }
    }
}

pub(crate) enum Parameter<'a> {
    Integer(i64),
    Text(&'a str),
}

/// The rows of a statement being stepped through; resets it when dropped.
pub(crate) struct Rows<'s> {
    statement: &'s mut PageStatement,
}

impl Rows<'_> {
    /// Steps to the next row; `false` past the last.
    pub(crate) fn step(&mut self) -> CatalogResult<bool> {
        // SAFETY: the statement is live and its parameters bound.
        let rc = unsafe { ffi::sqlite3_step(self.statement.statement.as_ptr()) };
        match rc {
            ffi::SQLITE_ROW => Ok(true),
            ffi::SQLITE_DONE => Ok(false),
            rc => check(self.statement.db, rc).map(|()| false),
        }
    }

    /// Column `index` of the current row as an integer (0 when NULL).
    pub(crate) fn integer(&self, index: c_int) -> i64 {
        // SAFETY: the statement stands on a row (`step` returned true).
        unsafe { ffi::sqlite3_column_int64(self.statement.statement.as_ptr(), index) }
    }

    /// Column `index` of the current row as stored text (empty when NULL), borrowed until the
    /// next step.
    pub(crate) fn text(&self, index: c_int) -> &[u8] {
        let statement = self.statement.statement.as_ptr();
        // SAFETY: the statement stands on a row (`step` returned true; the borrow of `self`
        // keeps it there). The column's value is read through `sqlite3_column_value`, one
        // call into the statement where `sqlite3_column_text` and `sqlite3_column_bytes` make
        // two: SQLite calls such a value unprotected, unsafe only when another thread uses the
        // connection meanwhile, and a reader's connection never leaves its thread. The text
        // pointer is read before the length, as SQLite requires, and stays valid until the
        // statement steps or resets, which needs `&mut self`.
        unsafe {
            let value = ffi::sqlite3_column_value(statement, index);
            let text = ffi::sqlite3_value_text(value);
            let length = ffi::sqlite3_value_bytes(value);
            if text.is_null() || length <= 0 {
                return &[];
            }
            std::slice::from_raw_parts(text, length as usize)
        }
    }
}

impl Drop for Rows<'_> {
    fn drop(&mut self) {
        // SAFETY: the statement is live; resetting ends its read, so the snapshot around it
        // can end.
        unsafe {
            ffi::sqlite3_reset(self.statement.statement.as_ptr());
        }
    }
}

/// `rc` as a result, with SQLite's message for the connection's last failure.
fn check(db: NonNull<ffi::sqlite3>, rc: c_int) -> CatalogResult<()> {
    if rc == ffi::SQLITE_OK {
        return Ok(());
    }
    // SAFETY: the connection is live; SQLite's message is a NUL-terminated string it owns,
    // copied out at once.
    let message = unsafe { CStr::from_ptr(ffi::sqlite3_errmsg(db.as_ptr())) }
        .to_string_lossy()
        .into_owned();
    Err(rusqlite::Error::SqliteFailure(ffi::Error::new(rc), Some(message)).into())
}

fn failure_text(message: &str) -> crate::CatalogError {
    crate::CatalogError::Storage(format!("the page statement: {message}"))
}
