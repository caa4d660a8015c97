//! `svc serve`: open the catalog, start the HTTP API, run the imports, then report ready and
//! serve until SIGINT or SIGTERM.

use crate::admin_password::admin_password;
use crate::cli::ServeArgs;
use crate::listening::{
    MAX_HEADER_BYTES, MAX_URI_BYTES, connection_limits, finish, listen, listen_for_admin,
    start_admin, start_http,
};
use crate::loading::{backfill, fail_on_storage_error, run_imports};
use crate::roles::{IndexerWatch, RoleMetrics, beat, watch_indexer};
use anyhow::Context;
use prometheus_client::registry::Registry;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use svc_catalog::postgres::PostgresCatalog;
use svc_catalog::sqlite::SqliteCatalog;
use svc_catalog::{Catalog, Location, Role};
use svc_ingest::firehose::{LiveConfig, LiveStatus, run_live};
use svc_ingest::{BackfillPeers, IngestMetrics, Ingestor, Readiness, Resync, ResyncProgress};
use svc_lexicon::Lexicons;
use svc_spec::QuerySet;
use tokio::sync::watch;

async fn open_catalog(
    db: &Location,
    queries: &QuerySet,
    readers: usize,
    role: Role,
) -> anyhow::Result<Arc<dyn Catalog>> {
    Ok(match (db, role) {
        (Location::Sqlite(path), Role::Indexer) => Arc::new(SqliteCatalog::open(
            path,
            queries.indexes().clone(),
            readers,
        )?),
        (Location::Sqlite(path), Role::Reader) => {
            Arc::new(SqliteCatalog::open_reader(path, readers)?)
        }
        (Location::Postgres(url), Role::Indexer) => {
            Arc::new(PostgresCatalog::open(url, queries.indexes().clone(), readers).await?)
        }
        (Location::Postgres(url), Role::Reader) => {
            Arc::new(PostgresCatalog::open_reader(url, readers).await?)
        }
    })
}

/// What the flags make of this process; contradictions are usage errors.
fn role_of(args: &ServeArgs) -> anyhow::Result<Role> {
    let usage = |text: &str| anyhow::Error::new(crate::commands::UsageError(text.to_string()));
    if args.no_indexer && args.no_api {
        return Err(usage(
            "--no-indexer and --no-api together leave nothing to do: drop one",
        ));
    }
    if args.no_indexer && !args.imports.is_empty() {
        return Err(usage("--import needs an indexer: drop --no-indexer"));
    }
    if args.no_indexer && args.backfill.is_some() {
        return Err(usage("--backfill needs an indexer: drop --no-indexer"));
    }
    if args.no_indexer && !args.labelers.is_empty() {
        return Err(usage("--labeler needs an indexer: drop --no-indexer"));
    }
    Ok(if args.no_indexer {
        Role::Reader
    } else {
        Role::Indexer
    })
}

fn default_db() -> Location {
    let data = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("."));
    Location::Sqlite(data.join("svc").join("catalog.db"))
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SVC_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}

/// `queries`: the specification `main` loaded (`SVC_SPEC` or the built-in one).
pub fn run(args: ServeArgs, queries: &QuerySet) -> anyhow::Result<()> {
    init_logging();
    crate::process::disable_transparent_huge_pages();
    crate::process::survive_file_size_limit();
    let descriptors = crate::process::raise_descriptor_limit();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_park(crate::process::collect_when_idle)
        .build()
        .context("starting the runtime")?
        .block_on(serve(args, queries, descriptors))
}

/// What the flags make of this process, settled before the catalog opens and the port is
/// taken: whatever can be checked then, is.
struct StartPlan {
    role: Role,
    live_url: Option<String>,
    queries: QuerySet,
    connection_limits: svc_server::ConnectionLimits,
    db: Location,
    /// The admin password, when `--admin-password-file` gives one.
    admin_password: Option<String>,
}

fn plan_start(
    args: &ServeArgs,
    queries: &QuerySet,
    descriptors: Option<u64>,
) -> anyhow::Result<StartPlan> {
    let role = role_of(args)?;
    let live_url = match args.firehose.as_str() {
        _ if role == Role::Reader => None,
        "none" => None,
        url => {
            // A bad URL is a start-up error, not a reconnect loop.
            svc_ingest::firehose::source_kind(url)
                .map_err(|e| anyhow::anyhow!("--firehose {e}"))?;
            Some(url.to_string())
        }
    };
    // `main` has loaded `SVC_SPEC` (or the built-in one) already; only another file is read.
    let queries = match &args.spec {
        Some(path) if Some(path.as_os_str()) != std::env::var_os("SVC_SPEC").as_deref() => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            QuerySet::load(&text).with_context(|| format!("loading {}", path.display()))?
        }
        _ => queries.clone(),
    };
    for path in &args.imports {
        std::fs::metadata(path).with_context(|| format!("--import {}", path.display()))?;
    }
    let connection_limits = connection_limits(args, descriptors)?;
    let db = catalog_location(args)?;
    Ok(StartPlan {
        role,
        live_url,
        queries,
        connection_limits,
        db,
        admin_password: admin_password(args)?,
    })
}

/// The catalog `--db` names (the default one without it), with the password
/// `--db-password-file` gives a PostgreSQL catalog.
fn catalog_location(args: &ServeArgs) -> anyhow::Result<Location> {
    let db = match &args.db {
        Some(text) => text
            .parse::<Location>()
            .map_err(|e| crate::commands::UsageError(format!("--db: {e}")))?,
        None => default_db(),
    };
    Ok(match (db, &args.db_password_file) {
        (Location::Postgres(url), Some(_)) if url.has_password() => {
            return Err(crate::commands::UsageError(format!(
                "--db {url} carries a password, and --db-password-file gives another: drop one"
            ))
            .into());
        }
        (Location::Postgres(url), Some(path)) => Location::Postgres(
            url.with_password_file(path)
                .map_err(|e| anyhow::anyhow!("--db-password-file: {e}"))?,
        ),
        (Location::Sqlite(path), Some(_)) => {
            return Err(crate::commands::UsageError(format!(
                "--db-password-file is for a PostgreSQL catalog, and --db names the SQLite \
                 file {}: drop one",
                path.display()
            ))
            .into());
        }
        (db, None) => db,
    })
}

/// What the HTTP API, the indexer and the role's watchers share.
struct Shared {
    ingestor: Ingestor,
    /// The repositories owed a whole read, as the queue's reader counts them.
    resync_progress: Arc<ResyncProgress>,
    readiness: Arc<Readiness>,
    live_status: Arc<LiveStatus>,
    indexer_watch: Arc<IndexerWatch>,
    role_metrics: Arc<RoleMetrics>,
    not_ready: svc_server::NotReady,
}

impl Shared {
    fn new(
        args: &ServeArgs,
        plan: &StartPlan,
        catalog: &Arc<dyn Catalog>,
        registry: &mut Registry,
    ) -> Shared {
        let ingest_metrics = Arc::new(IngestMetrics::default());
        let role_metrics = Arc::new(RoleMetrics::default());
        ingest_metrics.register(registry);
        role_metrics.register(registry);
        let live_status = Arc::new(LiveStatus::default());
        let ingestor = Ingestor::new(Arc::new(plan.queries.clone()), ingest_metrics);
        let resync_progress = Arc::new(ResyncProgress::default());
        let readiness = Arc::new(
            Readiness::new(
                plan.live_url
                    .as_ref()
                    .map(|_| (Arc::clone(&live_status), args.ready_lag)),
                args.backfill.is_some(),
                Arc::clone(ingestor.writes()),
            )
            .with_resync(Arc::clone(&resync_progress)),
        );
        let indexer_watch = Arc::new(IndexerWatch::default());
        // While this process does not write, the indexer's heartbeat says how current it is.
        let not_ready: svc_server::NotReady = {
            let (readiness, catalog) = (Arc::clone(&readiness), Arc::clone(catalog));
            let indexer_watch = Arc::clone(&indexer_watch);
            Arc::new(move || match catalog.is_writer() {
                true => readiness.not_ready_because(),
                false => indexer_watch.not_ready_because(),
            })
        };
        Shared {
            ingestor,
            resync_progress,
            readiness,
            live_status,
            indexer_watch,
            role_metrics,
            not_ready,
        }
    }
}

/// The record collections the lexicons define: what the API counts and the backfill asks for.
fn record_kinds() -> Vec<String> {
    Lexicons::embedded()
        .record_collections()
        .map(str::to_string)
        .collect()
}

fn server_config(
    args: &ServeArgs,
    plan: &StartPlan,
    catalog: &Arc<dyn Catalog>,
    shared: &Shared,
) -> svc_server::ServerConfig {
    let queries = &plan.queries;
    let admin = plan
        .admin_password
        .clone()
        .map(|password| svc_server::AdminAccess {
            password,
            catalog: Arc::clone(catalog) as Arc<dyn svc_catalog::CatalogWrite>,
        });
    svc_server::ServerConfig {
        catalog: Arc::clone(catalog) as Arc<dyn svc_catalog::CatalogRead>,
        queries: queries.clone(),
        kinds: Arc::new(svc_spec::Kinds::embedded(&record_kinds())),
        not_ready: Arc::clone(&shared.not_ready),
        ready_notes: {
            let readiness = Arc::clone(&shared.readiness);
            Arc::new(move || readiness.notes())
        },
        request_timeout: args.request_timeout,
        trusted_proxies: args.trusted_proxies.clone(),
        admin_apart: args.admin_listen.is_some(),
        limits: svc_server::RequestLimits {
            max_uri_bytes: MAX_URI_BYTES,
            max_header_bytes: MAX_HEADER_BYTES,
            max_in_flight: args.max_requests as usize,
            rate_per_client: args.rate_limit,
            client_prefixes: svc_server::ClientPrefixes {
                v4: args.client_prefix_v4,
                v6: args.client_prefix_v6,
            },
            costly_builds: args
                .costly_builds
                .map_or_else(cores_but_one, |n| n as usize),
            costly_builds_per_client: args.costly_builds_per_client as usize,
        },
        cache_bytes: args.cache_mb.saturating_mul(1 << 20),
        version: env!("CARGO_PKG_VERSION").to_string(),
        api: !args.no_api,
        max_subscribers: args.max_subscribers,
        max_subscribers_per_client: args.max_subscribers_per_client,
        replay_bytes_per_second: args.replay_kib_per_second.saturating_mul(1024),
        admin,
    }
}

/// The cores less one (at least one): what costly pages may take, leaving a core to the rest.
fn cores_but_one() -> usize {
    std::thread::available_parallelism().map_or(1, |cores| cores.get().saturating_sub(1).max(1))
}

/// The catalog the plan names, in its role; a database that asks for a password it was not
/// given says where to give one.
async fn open_planned(args: &ServeArgs, plan: &StartPlan) -> anyhow::Result<Arc<dyn Catalog>> {
    let readers = usize::from(args.readers);
    let catalog = open_catalog(&plan.db, &plan.queries, readers, plan.role)
        .await
        .map_err(|e| {
            if e.to_string().contains("password missing") {
                anyhow::anyhow!(
                    "{e} (the database asks for a password: give it with --db-password-file, \
                     PGPASSWORD or a .pgpass file)"
                )
            } else {
                e
            }
        })
        .with_context(|| format!("opening the catalog {}", plan.db))?;
    tracing::info!(db = %plan.db, role = ?plan.role, "catalog open");
    Ok(catalog)
}

/// `descriptors`: the process's limit on open descriptors, when known.
async fn serve(
    args: ServeArgs,
    queries: &QuerySet,
    descriptors: Option<u64>,
) -> anyhow::Result<()> {
    let plan = plan_start(&args, queries, descriptors)?;
    // Bound before the catalog is opened: an address in use must not leave a new catalog
    // file behind.
    let listener = listen(&args.listen)
        .await
        .with_context(|| format!("--listen {}", args.listen))?;
    let admin_listener = listen_for_admin(&args).await?;
    let catalog = open_planned(&args, &plan).await?;
    let mut registry = Registry::default();
    let shared = Shared::new(&args, &plan, &catalog, &mut registry);
    let routers = svc_server::routers(server_config(&args, &plan, &catalog, &shared), registry);
    let (server, stopped) = start_http(listener, routers.public, plan.connection_limits).await?;
    if let (Some(listener), Some(router)) = (admin_listener, routers.admin) {
        start_admin(listener, router, plan.connection_limits, stopped.clone())?;
    }
    let started_as_writer = catalog.is_writer();
    if !started_as_writer {
        tokio::spawn(watch_indexer(
            Arc::clone(&catalog),
            args.ready_lag,
            Arc::clone(&shared.indexer_watch),
            Arc::clone(&shared.role_metrics),
            stopped.clone(),
        ));
        // A replica, or an indexer standing by: ready as the indexer's heartbeat says.
        tokio::spawn(announce_ready(
            Arc::clone(&shared.not_ready),
            stopped.clone(),
        ));
    }
    if plan.role == Role::Indexer {
        index(
            &args,
            plan.live_url,
            catalog,
            shared,
            started_as_writer,
            stopped,
        )
        .await?;
    }
    finish(server).await
}

/// The indexer's part, once the API serves: take the writer's place (an indexer standing by
/// serves queries until it does), run the imports, then follow the live source beside the
/// backfill. Returns when the process is told to stop or the live source ends.
async fn index(
    args: &ServeArgs,
    live_url: Option<String>,
    catalog: Arc<dyn Catalog>,
    shared: Shared,
    started_as_writer: bool,
    mut stopped: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    tokio::spawn(beat(
        Arc::clone(&catalog),
        Arc::clone(&shared.readiness),
        Arc::clone(&shared.role_metrics),
        args.stream_retention,
        stopped.clone(),
    ));
    tokio::select! {
        started = catalog.writer_started() => started?,
        _ = stopped.wait_for(|stop| *stop) => return Ok(()),
    }
    if !run_imports(args, catalog.as_ref(), &shared.ingestor, &mut stopped).await? {
        return Ok(());
    }
    shared.readiness.imports_finished();
    let resync = start_resync(args, &catalog, &shared, &stopped)?;
    follow_labelers(args, &catalog, &shared, &stopped).await?;
    // The live stream starts before the backfill, so no event falls between the two.
    let live = live_url.map(|url| {
        tokio::spawn(run_live(
            Arc::clone(&catalog) as Arc<dyn svc_catalog::CatalogWrite>,
            shared.ingestor.clone(),
            live_config(args, url),
            Arc::clone(&shared.live_status),
            Some(Arc::clone(&resync)),
            stopped.clone(),
        ))
    });
    if let Some(url) = &args.backfill {
        if !run_backfill(url, catalog.as_ref(), &resync, &mut stopped).await? {
            return Ok(());
        }
        shared.readiness.backfill_finished();
    }
    if started_as_writer {
        tokio::spawn(announce_ready(shared.not_ready, stopped.clone()));
    }
    if let Some(live) = live {
        live.await
            .context("the live source task failed")?
            .context("following the live source")?;
    }
    Ok(())
}

/// Loads what the `--backfill` peer holds; `false` when stopped first.
async fn run_backfill(
    url: &str,
    catalog: &dyn Catalog,
    resync: &Resync,
    stopped: &mut watch::Receiver<bool>,
) -> anyhow::Result<bool> {
    let collections = record_kinds();
    tokio::select! {
        outcome = backfill(catalog, resync, BackfillPeers { server: url }, &collections) => {
            fail_on_storage_error(outcome)?;
            Ok(true)
        }
        _ = stopped.wait_for(|stop| *stop) => Ok(false),
    }
}

/// Starts the resynchronisation of repositories whose chains break, until `stopped`.
fn start_resync(
    args: &ServeArgs,
    catalog: &Arc<dyn Catalog>,
    shared: &Shared,
    stopped: &watch::Receiver<bool>,
) -> anyhow::Result<Arc<Resync>> {
    let resync = Resync::new(
        &args.plc_url,
        args.network_reach(),
        args.verify == "all",
        record_kinds(),
        Arc::clone(catalog) as Arc<dyn svc_catalog::CatalogWrite>,
        shared.ingestor.clone(),
        Arc::clone(&shared.resync_progress),
    )
    .context("starting the resynchronisation")?
    .with_read_memory((args.read_memory_mb as usize) << 20);
    let resync = Arc::new(resync);
    tokio::spawn(Arc::clone(&resync).run(stopped.clone()));
    Ok(resync)
}

/// Forgets the labelers no longer followed, then follows the others until `stopped`.
async fn follow_labelers(
    args: &ServeArgs,
    catalog: &Arc<dyn Catalog>,
    shared: &Shared,
    stopped: &watch::Receiver<bool>,
) -> anyhow::Result<()> {
    forget_unfollowed_labelers(catalog.as_ref(), &args.labelers).await?;
    let labelers = svc_ingest::labelers::Labelers {
        catalog: Arc::clone(catalog) as Arc<dyn svc_catalog::CatalogWrite>,
        resolver: Arc::new(labeler_resolver(args)?),
        reach: args.network_reach(),
        metrics: shared.ingestor.shared_metrics(),
        silence: args.liveness,
    };
    tokio::spawn(labelers.run(args.labelers.clone(), stopped.clone()));
    Ok(())
}

/// What the labelers no longer followed said stops applying: their takedowns are lifted and
/// their labels and cursors removed (followed again, each is read from its first label).
async fn forget_unfollowed_labelers(
    catalog: &dyn Catalog,
    followed: &[svc_syntax::Did],
) -> anyhow::Result<()> {
    let gone = catalog
        .forget_labelers(followed.to_vec())
        .await
        .context("forgetting the labelers no longer followed")?;
    for labeler in gone {
        tracing::info!(%labeler, "a labeler no longer followed: its labels no longer apply");
    }
    Ok(())
}

/// Reads labelers' DID documents: from the directory the operator names, `did:web` hosts
/// under the network's reach.
fn labeler_resolver(args: &ServeArgs) -> anyhow::Result<svc_atproto::Resolver> {
    let timeout = svc_atproto::REQUEST_TIMEOUT;
    let reach = args.network_reach();
    let resolver = svc_atproto::Resolver::new(svc_atproto::http_client(timeout)?, &args.plc_url);
    Ok(resolver.reaching(reach, reach.client(timeout)?))
}

fn live_config(args: &ServeArgs, url: String) -> LiveConfig {
    LiveConfig {
        url,
        force_cursor: args.force_cursor,
        liveness: args.liveness,
        ready_lag: args.ready_lag,
        max_backoff: std::time::Duration::from_secs(30),
        compress: args.jetstream_zstd,
        verify: args.verify == "all",
    }
}

/// Logs "ready" once the catalog has caught up.
async fn announce_ready(not_ready: svc_server::NotReady, stopped: watch::Receiver<bool>) {
    while !*stopped.borrow() {
        if not_ready().is_none() {
            tracing::info!("ready");
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
