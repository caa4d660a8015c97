//! The PostgreSQL engine: the same tables as SQLite's (uris compared byte-wise), one writer
//! connection on the writer's thread, and a pool of connections for reads. A database that
//! goes away is waited out: reads answer `Unavailable` until it is back, and the writer
//! reconnects at its next transaction.

mod bulk;
mod engine;
mod reader;
mod schema;

use crate::keys_column::QueryIds;
use crate::rules::{WriterHandle, spawn_writer};
use crate::spec::{QueryId, QuerySet};
use crate::{
    AccountStatus, ApplyReport, Catalog, CatalogError, CatalogFuture, CatalogResult, Change,
    ChangeClock, CursorPosition, Item, KindCounts, Page, PageRequest, PostgresUrl,
};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

/// How long a connection attempt may take before the database counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

pub struct PostgresCatalog {
    qids: QueryIds,
    clock: Arc<ChangeClock>,
    writer: WriterHandle,
    pool: deadpool_postgres::Pool,
}

/// A driver error as a catalog error: a lost or refused connection is `Unavailable` (worth
/// retrying), anything the database itself refused is `Storage`.
pub(crate) fn storage(error: tokio_postgres::Error) -> CatalogError {
    let unreachable = match error.code() {
        Some(code) => {
            let code = code.code();
            // Connection exceptions, and the server shutting down or starting up.
            code.starts_with("08") || code.starts_with("57P")
        }
        None => error.as_db_error().is_none(),
    };
    if unreachable || error.is_closed() {
        CatalogError::Unavailable(error.to_string())
    } else {
        CatalogError::Storage(error.to_string())
    }
}

/// The driver's settings from the URL, with TLS only when `sslmode=require` asks for it
/// (certificates checked against the web's root authorities).
fn settings(url: &PostgresUrl) -> CatalogResult<(tokio_postgres::Config, MakeRustlsConnect)> {
    let mut config: tokio_postgres::Config = url
        .expose()
        .parse()
        .map_err(|e: tokio_postgres::Error| CatalogError::Storage(format!("{url}: {e}")))?;
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

impl PostgresCatalog {
    /// Connects, runs pending migrations, rebuilds the keys of queries whose definition is new
    /// or changed, and starts the writer. `readers` connections at most serve reads.
    pub async fn open(
        url: &PostgresUrl,
        queries: QuerySet,
        readers: usize,
    ) -> CatalogResult<PostgresCatalog> {
        let (config, tls) = settings(url)?;
        let clock = Arc::new(ChangeClock::default());
        // The writer's connection lives on a runtime of its own on the writer's thread; it is
        // made on a plain thread, away from this runtime.
        let (made, writer) = oneshot::channel();
        {
            let (config, tls, clock) = (config.clone(), tls.clone(), Arc::clone(&clock));
            std::thread::Builder::new()
                .name("catalog-open".into())
                .spawn(move || {
                    let writer = engine::PostgresEngine::connect(config, tls)
                        .and_then(|engine| spawn_writer(engine, &queries, clock));
                    let _ = made.send(writer);
                })
                .map_err(|e| CatalogError::Storage(e.to_string()))?;
        }
        let writer = writer.await.map_err(|_| CatalogError::Closed)??;
        let manager = deadpool_postgres::Manager::from_config(
            config,
            tls,
            deadpool_postgres::ManagerConfig {
                recycling_method: deadpool_postgres::RecyclingMethod::Fast,
            },
        );
        let pool = deadpool_postgres::Pool::builder(manager)
            .max_size(readers.max(1))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(CONNECT_TIMEOUT))
            .create_timeout(Some(CONNECT_TIMEOUT))
            .recycle_timeout(Some(CONNECT_TIMEOUT))
            .build()
            .map_err(|e| CatalogError::Storage(e.to_string()))?;
        let qids = reader::query_ids(&pool).await?;
        Ok(PostgresCatalog {
            qids,
            clock,
            writer,
            pool,
        })
    }
}

impl Catalog for PostgresCatalog {
    fn apply(
        &self,
        changes: Vec<Change>,
        cursor: Option<CursorPosition>,
    ) -> CatalogFuture<'_, ApplyReport> {
        self.writer.apply(changes, cursor)
    }

    fn list(&self, query: QueryId, key: String, page: PageRequest) -> CatalogFuture<'_, Page> {
        Box::pin(async move {
            let qid = self.qids.qid(&query)?;
            reader::list(&self.pool, qid, &key, &page).await
        })
    }

    fn count_keys(&self, query: QueryId, keys: Vec<String>) -> CatalogFuture<'_, Vec<u64>> {
        Box::pin(async move {
            let qid = self.qids.qid(&query)?;
            reader::count_keys(&self.pool, qid, &keys).await
        })
    }

    fn kind_counts(&self) -> CatalogFuture<'_, KindCounts> {
        Box::pin(reader::kind_counts(&self.pool))
    }

    fn cursor(&self, source: String) -> CatalogFuture<'_, Option<CursorPosition>> {
        Box::pin(async move { reader::cursor(&self.pool, &source).await })
    }

    fn get(&self, uri: String) -> CatalogFuture<'_, Option<Item>> {
        Box::pin(async move { reader::get(&self.pool, &uri).await })
    }

    fn set_account(&self, did: String, status: AccountStatus) -> CatalogFuture<'_, ()> {
        self.writer.set_account(did, status)
    }

    fn begin_bulk(&self) -> CatalogFuture<'_, bool> {
        self.writer.begin_bulk()
    }

    fn finish_bulk(&self, cursor: Option<CursorPosition>) -> CatalogFuture<'_, ApplyReport> {
        self.writer.finish_bulk(cursor)
    }

    fn clock(&self) -> &ChangeClock {
        &self.clock
    }
}
