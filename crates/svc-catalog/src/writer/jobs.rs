//! The writer thread's jobs, and the handle through which the catalog sends them: each call
//! sends one job and waits for its reply.

use super::sync_reads::SyncReads;
use crate::engine::TakedownState;
use crate::{
    AccountStatus, ApplyReport, CatalogError, CatalogResult, Change, CursorPosition, LabelBatch,
    LabelReport, Subject, SyncWrites,
};
use std::sync::mpsc;
use svc_syntax::{AtUri, Did, Tid, UnixMillis};
use tokio::sync::oneshot;

/// What the catalog asks of the writer thread, each with where its answer goes.
pub(super) enum WriteJob {
    Apply {
        changes: Vec<Change>,
        cursor: Option<CursorPosition>,
        sync: SyncWrites,
        reply: oneshot::Sender<CatalogResult<ApplyReport>>,
    },
    BeginBulk {
        reply: oneshot::Sender<CatalogResult<bool>>,
    },
    FinishBulk {
        cursor: Option<CursorPosition>,
        reply: oneshot::Sender<CatalogResult<ApplyReport>>,
    },
    Replace {
        did: Did,
        rev: Tid,
        records: Vec<Change>,
        applied_before: Vec<AtUri>,
        sync: SyncWrites,
        reply: oneshot::Sender<CatalogResult<ApplyReport>>,
    },
    /// A read of the repositories' synchronisation, on the writer's connection.
    SyncRead { read: SyncRead },
    Account {
        did: Did,
        status: AccountStatus,
        reply: oneshot::Sender<CatalogResult<bool>>,
    },
    Heartbeat {
        keep_changes: std::time::Duration,
        reply: oneshot::Sender<CatalogResult<()>>,
    },
    Takedown {
        subject: Subject,
        state: TakedownState,
        reply: oneshot::Sender<CatalogResult<bool>>,
    },
    Labels {
        batch: LabelBatch,
        reply: oneshot::Sender<CatalogResult<LabelReport>>,
    },
    ExpireLabels {
        now: UnixMillis,
        reply: oneshot::Sender<CatalogResult<usize>>,
    },
    ForgetLabelers {
        keep: Vec<svc_syntax::Did>,
        reply: oneshot::Sender<CatalogResult<Vec<String>>>,
    },
}

/// A read of the repositories' synchronisation, answering its caller itself.
pub(super) type SyncRead = Box<dyn FnOnce(&mut dyn SyncReads) + Send>;

/// The catalog's side of the writer thread: each call sends a job and waits for its reply.
/// Dropped, it waits for the thread to end, so that the writer lock and the storage it held
/// are free for whoever opens the catalog next.
pub(crate) struct WriterHandle {
    jobs: Option<mpsc::Sender<WriteJob>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for WriterHandle {
    fn drop(&mut self) {
        drop(self.jobs.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl WriterHandle {
    pub(super) fn new(
        jobs: mpsc::Sender<WriteJob>,
        thread: std::thread::JoinHandle<()>,
    ) -> WriterHandle {
        WriterHandle {
            jobs: Some(jobs),
            thread: Some(thread),
        }
    }

    fn ask<T: Send + 'static>(
        &self,
        job: impl FnOnce(oneshot::Sender<CatalogResult<T>>) -> WriteJob,
    ) -> crate::CatalogFuture<'_, T> {
        let (reply, answer) = oneshot::channel();
        let job = job(reply);
        Box::pin(async move {
            let jobs = self.jobs.as_ref().ok_or(CatalogError::Closed)?;
            jobs.send(job).map_err(|_| CatalogError::Closed)?;
            answer.await.map_err(|_| CatalogError::Closed)?
        })
    }

    pub fn apply(
        &self,
        changes: Vec<Change>,
        cursor: Option<CursorPosition>,
        sync: SyncWrites,
    ) -> crate::CatalogFuture<'_, ApplyReport> {
        self.ask(|reply| WriteJob::Apply {
            changes,
            cursor,
            sync,
            reply,
        })
    }

    pub fn replace_repository(
        &self,
        did: Did,
        rev: Tid,
        records: Vec<Change>,
        applied_before: Vec<AtUri>,
        sync: SyncWrites,
    ) -> crate::CatalogFuture<'_, ApplyReport> {
        self.ask(|reply| WriteJob::Replace {
            did,
            rev,
            records,
            applied_before,
            sync,
            reply,
        })
    }

    /// Runs a read of the repositories' synchronisation on the writer's thread.
    pub fn sync_read<T: Send + 'static>(
        &self,
        read: impl FnOnce(&mut dyn SyncReads) -> CatalogResult<T> + Send + 'static,
    ) -> crate::CatalogFuture<'_, T> {
        self.ask(|reply| WriteJob::SyncRead {
            read: Box::new(move |engine| {
                let _ = reply.send(read(engine));
            }),
        })
    }

    pub fn set_account(&self, did: Did, status: AccountStatus) -> crate::CatalogFuture<'_, bool> {
        self.ask(|reply| WriteJob::Account { did, status, reply })
    }

    pub fn set_takedown(
        &self,
        subject: Subject,
        state: TakedownState,
    ) -> crate::CatalogFuture<'_, bool> {
        self.ask(|reply| WriteJob::Takedown {
            subject,
            state,
            reply,
        })
    }

    pub fn apply_labels(&self, batch: LabelBatch) -> crate::CatalogFuture<'_, LabelReport> {
        self.ask(|reply| WriteJob::Labels { batch, reply })
    }

    pub fn expire_labels(&self, now: UnixMillis) -> crate::CatalogFuture<'_, usize> {
        self.ask(|reply| WriteJob::ExpireLabels { now, reply })
    }

    pub fn forget_labelers(
        &self,
        keep: Vec<svc_syntax::Did>,
    ) -> crate::CatalogFuture<'_, Vec<String>> {
        self.ask(|reply| WriteJob::ForgetLabelers { keep, reply })
    }

    pub fn begin_bulk(&self) -> crate::CatalogFuture<'_, bool> {
        self.ask(|reply| WriteJob::BeginBulk { reply })
    }

    pub fn finish_bulk(
        &self,
        cursor: Option<CursorPosition>,
    ) -> crate::CatalogFuture<'_, ApplyReport> {
        self.ask(|reply| WriteJob::FinishBulk { cursor, reply })
    }

    pub fn heartbeat(&self, keep_changes: std::time::Duration) -> crate::CatalogFuture<'_, ()> {
        self.ask(|reply| WriteJob::Heartbeat {
            keep_changes,
            reply,
        })
    }
}
