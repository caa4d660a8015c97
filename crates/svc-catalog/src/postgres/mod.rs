//! The PostgreSQL engine: the same tables as SQLite's (uris compared byte-wise), one writer
//! connection on the writer's thread, and a pool of connections for reads. A database that
//! goes away is waited out: reads answer `Unavailable` until it is back, and the writer
//! reconnects whenever it is outside a transaction.

mod bulk;
mod engine;
mod reader;
mod schema;

use crate::rules::{EngineCatalog, Reads};
use crate::spec::QuerySet;
use crate::{
    CatalogError, CatalogFuture, CatalogResult, CursorPosition, Item, KindCounts, Page,
    PageRequest, PostgresUrl,
};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

/// How long a connection attempt may take before the database counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// The catalog on a PostgreSQL database.
pub type PostgresCatalog = EngineCatalog<PostgresReads>;

/// The read side of a PostgreSQL catalog: a pool of connections.
pub struct PostgresReads(deadpool_postgres::Pool);

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

impl EngineCatalog<PostgresReads> {
    /// Connects, runs pending migrations, rebuilds the keys of queries whose definition is new
    /// or changed, and starts the writer. `readers` connections at most serve reads.
    pub async fn open(
        url: &PostgresUrl,
        queries: QuerySet,
        readers: usize,
    ) -> CatalogResult<PostgresCatalog> {
        let (config, tls) = settings(url)?;
        let manager = deadpool_postgres::Manager::from_config(
            config.clone(),
            tls.clone(),
            deadpool_postgres::ManagerConfig {
                recycling_method: deadpool_postgres::RecyclingMethod::Fast,
            },
        );
        // Connections are made when reads need them.
        let pool = deadpool_postgres::Pool::builder(manager)
            .max_size(readers.max(1))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(CONNECT_TIMEOUT))
            .create_timeout(Some(CONNECT_TIMEOUT))
            .recycle_timeout(Some(CONNECT_TIMEOUT))
            .build()
            .map_err(|e| CatalogError::Storage(e.to_string()))?;
        // The writer's connection lives on a runtime of its own on the writer's thread; it is
        // made, and the storage readied, on a plain thread, away from this runtime.
        let (made, catalog) = oneshot::channel();
        std::thread::Builder::new()
            .name("catalog-open".into())
            .spawn(move || {
                let catalog = engine::PostgresEngine::connect(config, tls)
                    .and_then(|engine| EngineCatalog::start(engine, &queries, PostgresReads(pool)));
                let _ = made.send(catalog);
            })
            .map_err(|e| CatalogError::Storage(e.to_string()))?;
        catalog.await.map_err(|_| CatalogError::Closed)?
    }
}

impl Reads for PostgresReads {
    fn list(&self, qid: i64, key: String, page: PageRequest) -> CatalogFuture<'_, Page> {
        Box::pin(async move { reader::list(&self.0, qid, &key, &page).await })
    }

    fn count_keys(&self, qid: i64, keys: Vec<String>) -> CatalogFuture<'_, Vec<u64>> {
        Box::pin(async move { reader::count_keys(&self.0, qid, &keys).await })
    }

    fn kind_counts(&self) -> CatalogFuture<'_, KindCounts> {
        Box::pin(reader::kind_counts(&self.0))
    }

    fn cursor(&self, source: String) -> CatalogFuture<'_, Option<CursorPosition>> {
        Box::pin(async move { reader::cursor(&self.0, &source).await })
    }

    fn get(&self, uri: String) -> CatalogFuture<'_, Option<Item>> {
        Box::pin(async move { reader::get(&self.0, &uri).await })
    }
}
