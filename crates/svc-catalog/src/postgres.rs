//! The PostgreSQL engine: the same tables as SQLite's (uris compared byte-wise), one writer
//! connection on the writer's thread, and a pool of connections for reads. A database that
//! goes away is waited out: reads answer `Unavailable` until it is back, and the writer
//! reconnects whenever it is outside a transaction.

/// The labels in force on a record `r` (a row of `records`) or its author, as a JSON array
/// of `{src, val, cts}` in (subject, labeler, value) order, `!takedown` aside; NULL while the
/// catalog holds no label: every statement that returns records to a page writes them the
/// same way.
macro_rules! labels_json {
    () => {
        "CASE WHEN EXISTS (SELECT 1 FROM labels) THEN ( \
           SELECT json_agg(json_build_object('src', l.src, 'val', l.val, 'cts', l.cts) \
             ORDER BY l.subject, l.src, l.val)::text \
           FROM labels l WHERE l.subject IN (r.uri, split_part(r.uri, '/', 3)) \
           AND NOT l.neg AND l.val <> '!takedown') END"
    };
}

mod activity;
mod binary_rows;
mod bulk;
mod engine;
mod id_index;
mod labels;
mod link;
mod migrations;
mod password;
mod plan_writes;
mod reader;
mod reads;
mod search;
mod staging;
mod standing;
mod sync_state;

use crate::engine::EngineReads;
use crate::engine_catalog::EngineCatalog;
use crate::keys_column::QueryIds;
use crate::replication_log::{self, LogRow, LogSource};
use crate::stream::{StreamBounds, StreamRow};
use crate::{
    CatalogError, CatalogFuture, CatalogResult, CursorPosition, Item, KindCounts, Page,
    PageRequest, PageWriter, PostgresUrl,
};
use crate::{LabelView, Standing};
use password::{PasswordSource, supply_password};
use std::sync::Arc;
use std::time::Duration;
use svc_spec::IndexSet;
use svc_syntax::{AtUri, UnixMillis};
use tokio::sync::oneshot;
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

/// How long a connection attempt may take before the database counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// The catalog on a PostgreSQL database.
pub type PostgresCatalog = EngineCatalog<PostgresReads>;

/// The read side of a PostgreSQL catalog: a pool of connections.
pub struct PostgresReads(reads::ReadPool);

/// A driver error as a catalog error: a lost or refused connection is `Unavailable` (worth
/// retrying), anything the database itself refused is `Storage`.
pub(crate) fn storage(error: tokio_postgres::Error) -> CatalogError {
    let class = error.code().map(|code| code.code().get(..2).unwrap_or(""));
    let unreachable = match error.code() {
        // Connection exceptions, and the server shutting down or starting up.
        Some(code) => code.code().starts_with("08") || code.code().starts_with("57P"),
        None => error.as_db_error().is_none(),
    };
    // The driver's own text names only the kind of error ("db error", "invalid
    // configuration"); what went wrong is in the database's report or the error's source.
    let text = match (error.as_db_error(), std::error::Error::source(&error)) {
        (Some(reported), _) => reported.to_string(),
        (None, Some(cause)) => format!("{error}: {cause}"),
        (None, None) => error.to_string(),
    };
    if unreachable || error.is_closed() {
        CatalogError::Unavailable(text)
    } else if let Some(reason) = class.and_then(refusal) {
        CatalogError::Refused {
            reason,
            message: text,
        }
    } else {
        CatalogError::Storage(text)
    }
}

/// SQLSTATE classes of a value refused for what it is: data exceptions (22: a NUL in text,
/// a malformed value), integrity constraints (23) and program limits (54: an index entry
/// too large). Every other class is the store's state, not the value's.
fn refusal(class: &str) -> Option<crate::Refusal> {
    match class {
        "22" => Some(crate::Refusal::Value),
        "23" => Some(crate::Refusal::Constraint),
        "54" => Some(crate::Refusal::Limit),
        _ => None,
    }
}

/// The driver's settings from the URL, with TLS only when `sslmode=require` asks for it
/// (certificates checked against the web's root authorities).
fn settings(url: &PostgresUrl) -> CatalogResult<(tokio_postgres::Config, MakeRustlsConnect)> {
    let mut config: tokio_postgres::Config = url
        .expose()
        .parse()
        .map_err(|e: tokio_postgres::Error| CatalogError::Storage(format!("{url}: {e}")))?;
    match supply_password(&mut config, url, |name| std::env::var_os(name)) {
        PasswordSource::Url => {}
        PasswordSource::Given => tracing::info!("catalog password: from the password file"),
        PasswordSource::Environment => tracing::info!("catalog password: from PGPASSWORD"),
        PasswordSource::Pgpass(path) => {
            tracing::info!("catalog password: from {}", path.display())
        }
        PasswordSource::Nowhere { ignored } => {
            if let Some(reason) = ignored {
                tracing::warn!("{reason}");
            }
        }
    }
    if config.get_ssl_mode() != SslMode::Require {
        config.ssl_mode(SslMode::Disable);
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    if config.get_application_name().is_none() {
        config.application_name("svc");
    }
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| CatalogError::Storage(format!("TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok((config, MakeRustlsConnect::new(tls)))
}

impl EngineCatalog<PostgresReads> {
    /// Connects, runs pending migrations, and, with the writer lock, rebuilds the keys of
    /// queries whose definition is new or changed and starts the writer (without it, stands
    /// by). `readers` connections at most serve reads.
    pub async fn open(
        url: &PostgresUrl,
        queries: IndexSet,
        readers: usize,
    ) -> CatalogResult<PostgresCatalog> {
        let (config, tls) = settings(url)?;
        let reads = PostgresReads(reads::ReadPool::new(&config, &tls, readers)?);
        let log = PostgresLog::shared(config.clone(), tls.clone());
        // The writer's connection lives on a runtime of its own on the writer's thread; it is
        // made, and the storage readied, on a plain thread, away from this runtime.
        let (made, catalog) = oneshot::channel();
        std::thread::Builder::new()
            .name("catalog-open".into())
            .spawn(move || {
                let catalog = engine::PostgresEngine::connect(config, tls)
                    .and_then(|engine| EngineCatalog::start(engine, &queries, reads, log));
                let _ = made.send(catalog);
            })
            .map_err(|e| CatalogError::Storage(e.to_string()))?;
        catalog.await.map_err(|_| CatalogError::Closed)?
    }

    /// Reads a catalog an indexer writes (on the primary, or on a hot standby of it),
    /// following its replication log; migrates nothing.
    pub async fn open_reader(url: &PostgresUrl, readers: usize) -> CatalogResult<PostgresCatalog> {
        let (config, tls) = settings(url)?;
        let pool = reads::ReadPool::new(&config, &tls, readers)?;
        let ids = pool
            .reading(|reads| async move {
                let client = reads::connection(&reads).await?;
                migrations::check_current(&client).await?;
                engine::load_ids(&client).await
            })
            .await?;
        EngineCatalog::reader(ids, PostgresReads(pool), PostgresLog::shared(config, tls))
    }
}

/// The replication log as a follower reads it: a connection of its own that listens for the
/// writer's notifications, and polls besides (a hot standby refuses LISTEN; a notification
/// may be missed while reconnecting).
struct PostgresLog {
    config: tokio_postgres::Config,
    tls: MakeRustlsConnect,
    client: tokio::sync::Mutex<Option<tokio_postgres::Client>>,
    notified: Arc<tokio::sync::Notify>,
}

impl PostgresLog {
    fn shared(config: tokio_postgres::Config, tls: MakeRustlsConnect) -> Arc<dyn LogSource> {
        Arc::new(PostgresLog {
            config,
            tls,
            client: tokio::sync::Mutex::new(None),
            notified: Arc::new(tokio::sync::Notify::new()),
        })
    }

    async fn connect(&self) -> CatalogResult<tokio_postgres::Client> {
        use futures_util::StreamExt;
        let (client, mut connection) = self
            .config
            .connect(self.tls.clone())
            .await
            .map_err(storage)?;
        let notified = Arc::clone(&self.notified);
        tokio::spawn(async move {
            let mut messages =
                futures_util::stream::poll_fn(move |context| connection.poll_message(context));
            while let Some(Ok(message)) = messages.next().await {
                if let tokio_postgres::AsyncMessage::Notification(_) = message {
                    notified.notify_one();
                }
            }
        });
        if let Err(error) = client.batch_execute("LISTEN svc_changes").await {
            tracing::debug!("replication log: polling only ({error})");
        }
        Ok(client)
    }

    /// The follower's connection, made again if it was lost.
    async fn client(
        &self,
    ) -> CatalogResult<tokio::sync::MappedMutexGuard<'_, tokio_postgres::Client>> {
        let mut client = self.client.lock().await;
        if client.as_ref().is_none_or(|c| c.is_closed()) {
            *client = Some(self.connect().await?);
        }
        tokio::sync::MutexGuard::try_map(client, Option::as_mut).map_err(|_| CatalogError::Closed)
    }

    async fn query(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> CatalogResult<Vec<tokio_postgres::Row>> {
        self.client()
            .await?
            .query(sql, params)
            .await
            .map_err(storage)
    }
}

impl LogSource for PostgresLog {
    fn entries_after(&self, seq: i64, limit: usize) -> CatalogFuture<'_, Vec<LogRow>> {
        Box::pin(async move {
            let rows = self
                .query(replication_log::sql::AFTER, &[&seq, &(limit as i64)])
                .await?;
            Ok(rows
                .iter()
                .map(|r| LogRow {
                    seq: r.get(0),
                    at_ms: r.get(1),
                    keys: r.get(2),
                    uris: r.get(3),
                    kinds: r.get(4),
                    everything: r.get(5),
                })
                .collect())
        })
    }

    fn last_entry(&self) -> CatalogFuture<'_, i64> {
        Box::pin(async move {
            let rows = self.query(replication_log::sql::LAST, &[]).await?;
            Ok(rows.first().map(|r| r.get(0)).unwrap_or(0))
        })
    }

    fn query_ids(&self) -> CatalogFuture<'_, QueryIds> {
        Box::pin(async move { engine::load_ids(&*self.client().await?).await })
    }

    fn changed(&self, poll: Duration) -> CatalogFuture<'_, ()> {
        Box::pin(async move {
            let _ = tokio::time::timeout(poll, self.notified.notified()).await;
            Ok(())
        })
    }
}

impl EngineReads for PostgresReads {
    fn list(&self, qid: i64, key: String, page: PageRequest) -> CatalogFuture<'_, Page> {
        Box::pin(
            self.0
                .reading(move |reads| async move { reader::list(&reads, qid, &key, &page).await }),
        )
    }

    fn write_list(
        &self,
        qid: i64,
        key: String,
        page: PageRequest,
        writer: Box<dyn PageWriter>,
    ) -> CatalogFuture<'_, Vec<u8>> {
        Box::pin(self.0.reading(move |reads| async move {
            reader::write_list(&reads, qid, &key, &page, writer).await
        }))
    }

    fn count_keys(&self, qid: i64, keys: Vec<String>) -> CatalogFuture<'_, Vec<u64>> {
        Box::pin(
            self.0
                .reading(move |reads| async move { reader::count_keys(&reads, qid, &keys).await }),
        )
    }

    fn keys_under(
        &self,
        qid: i64,
        prefixes: Vec<String>,
        limit: usize,
    ) -> CatalogFuture<'_, Vec<crate::KeyCounts>> {
        Box::pin(self.0.reading(move |reads| async move {
            reader::keys_under(&reads, qid, &prefixes, limit).await
        }))
    }

    fn kind_counts(&self) -> CatalogFuture<'_, KindCounts> {
        Box::pin(
            self.0
                .reading(move |reads| async move { reader::kind_counts(&reads).await }),
        )
    }

    fn activity(&self, since: i64) -> CatalogFuture<'_, crate::Activity> {
        Box::pin(
            self.0
                .reading(move |reads| async move { reader::activity(&reads, since).await }),
        )
    }

    fn cursor(&self, source: String) -> CatalogFuture<'_, Option<CursorPosition>> {
        Box::pin(
            self.0
                .reading(move |reads| async move { reader::cursor(&reads, &source).await }),
        )
    }

    fn cursors(&self) -> CatalogFuture<'_, Vec<CursorPosition>> {
        Box::pin(
            self.0
                .reading(move |reads| async move { reader::cursors(&reads).await }),
        )
    }

    fn get(&self, uri: AtUri) -> CatalogFuture<'_, Option<Item>> {
        Box::pin(
            self.0
                .reading(move |reads| async move { reader::get(&reads, &uri).await }),
        )
    }

    fn get_many(&self, uris: Vec<String>) -> CatalogFuture<'_, Vec<Option<Item>>> {
        Box::pin(
            self.0
                .reading(move |reads| async move { reader::get_many(&reads, &uris).await }),
        )
    }

    fn write_records(
        &self,
        uris: Vec<String>,
        writer: Box<dyn PageWriter>,
    ) -> CatalogFuture<'_, Vec<u8>> {
        Box::pin(self.0.reading(move |reads| async move {
            reader::write_records(&reads, &uris, writer).await
        }))
    }

    fn held(&self, uris: Vec<String>) -> CatalogFuture<'_, Vec<String>> {
        Box::pin(
            self.0
                .reading(move |reads| async move { reader::held(&reads, &uris).await }),
        )
    }

    fn write_repository_records(
        &self,
        slice: crate::RepositorySlice,
        after: Option<String>,
        limit: usize,
        writer: Box<dyn PageWriter>,
    ) -> CatalogFuture<'_, Vec<u8>> {
        Box::pin(self.0.reading(move |reads| async move {
            reader::write_repository_records(&reads, &slice, after.as_deref(), limit, writer).await
        }))
    }

    fn takedown(&self, subject: String) -> CatalogFuture<'_, Standing> {
        Box::pin(
            self.0
                .reading(move |reads| async move { reader::takedown(&reads, &subject).await }),
        )
    }

    fn labels(&self, subjects: Vec<String>, limit: usize) -> CatalogFuture<'_, Vec<LabelView>> {
        Box::pin(
            self.0.reading(
                move |reads| async move { labels::labels(&reads, &subjects, limit).await },
            ),
        )
    }

    fn search(
        &self,
        request: crate::SearchRequest,
        writer: Box<dyn PageWriter>,
    ) -> CatalogFuture<'_, Vec<u8>> {
        Box::pin(
            self.0.reading(
                move |reads| async move { search::search(&reads, &request, writer).await },
            ),
        )
    }

    fn indexer_heartbeat(&self) -> CatalogFuture<'_, Option<UnixMillis>> {
        Box::pin(
            self.0
                .reading(move |reads| async move { reader::indexer_heartbeat(&reads).await }),
        )
    }

    fn changes_after(&self, seq: i64, limit: usize) -> CatalogFuture<'_, Vec<StreamRow>> {
        Box::pin(
            self.0.reading(
                move |reads| async move { reader::changes_after(&reads, seq, limit).await },
            ),
        )
    }

    fn change_bounds(&self) -> CatalogFuture<'_, StreamBounds> {
        Box::pin(
            self.0
                .reading(move |reads| async move { reader::change_bounds(&reads).await }),
        )
    }
}
