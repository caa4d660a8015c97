//! Command-line definitions. Every flag of `serve` also reads an `SVC_*` environment variable.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

/// The query API the data commands ask, unless `--url` names another.
pub const DEFAULT_URL: &str = "http://localhost:8787";
/// The PLC directory, unless `--plc-url` or `SVC_PLC_URL` names another.
pub const DEFAULT_PLC: &str = "https://plc.directory";
pub const DEFAULT_FIREHOSE: &str = "wss://jetstream2.us-east.bsky.network/subscribe";

#[derive(Debug, Parser)]
#[command(
    name = "svc",
    version,
    about = "A catalog of dev.svc.* AT Protocol records: indexer, query API and tools"
)]
pub struct Cli {
    /// Base address of the running svc that `orchestrator` and `admin` ask (also taken after
    /// them) [env: SVC_URL] [default: http://localhost:8787]
    #[arg(long = "url", id = URL_BEFORE_COMMAND, value_name = "URL")]
    pub url: Option<String>,

    #[command(subcommand)]
    pub command: Command,
}

/// The id of `--url` given before the command.
pub const URL_BEFORE_COMMAND: &str = "url_before_command";

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the query service over the catalog (and its indexer).
    Serve(Box<ServeArgs>),
    /// Resolve a DID and print its handle and PDS.
    Resolve {
        /// did:plc or did:web.
        did: String,
    },
    /// Fetch a record by its AT-URI from its author's PDS and print its value.
    Fetch {
        /// at://<did or handle>/<collection>/<rkey>
        uri: String,
    },
    /// Log in with an app password and store the session (legacy bearer tokens, not OAuth).
    #[command(subcommand)]
    Oauth(OauthCommand),
    /// Validate a record against its lexicon and publish it to your repository.
    Publish(PublishArgs),
    /// Query a running `svc serve` (subcommands come from the query specification).
    #[command(subcommand_required = true, arg_required_else_help = true)]
    Orchestrator(OrchestratorArgs),
    /// Build encounter records.
    #[command(subcommand)]
    Encounter(EncounterCommand),
    /// Check a schema lens and print the verification record (exit 0 holds, 1 falsified or
    /// inconclusive, 2 error).
    #[command(subcommand)]
    Verify(VerifyCommand),
    /// Take down, restore or look up an account or a record on a running `svc serve` started
    /// with --admin-password-file.
    #[command(subcommand)]
    Admin(AdminCommand),
    /// Print a shell completion script.
    Completions { shell: clap_complete::Shell },
    /// Print the version.
    Version,
}

#[derive(Debug, Args)]
pub struct OrchestratorArgs {
    /// Base address of the query API.
    #[arg(long, global = true, env = "SVC_URL", default_value = DEFAULT_URL)]
    pub url: String,
}

#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Take an account (its DID) or a record (its at-uri) out of every answer.
    Takedown {
        /// A DID, or at://did/collection/rkey.
        subject: String,
        /// A reference kept with the takedown (a ticket, a case number).
        #[arg(long = "ref")]
        reference: Option<String>,
        #[command(flatten)]
        access: AdminAccessArgs,
    },
    /// Lift a takedown: what it hid comes back.
    Restore {
        /// A DID, or at://did/collection/rkey.
        subject: String,
        #[command(flatten)]
        access: AdminAccessArgs,
    },
    /// Whether an account or a record is taken down, and its reference.
    Status {
        /// A DID, or at://did/collection/rkey.
        subject: String,
        #[command(flatten)]
        access: AdminAccessArgs,
    },
}

impl AdminCommand {
    pub fn access_mut(&mut self) -> &mut AdminAccessArgs {
        match self {
            AdminCommand::Takedown { access, .. }
            | AdminCommand::Restore { access, .. }
            | AdminCommand::Status { access, .. } => access,
        }
    }
}

/// Where the admin commands go and how they authenticate.
#[derive(Debug, Args)]
pub struct AdminAccessArgs {
    /// Base address of the running service.
    #[arg(long, env = "SVC_URL", default_value = DEFAULT_URL)]
    pub url: String,
    /// File holding the admin password [else the environment's SVC_ADMIN_PASSWORD].
    #[arg(long = "password-file", alias = "password_file")]
    pub password_file: Option<std::path::PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum OauthCommand {
    /// Create a session with an app password and store it.
    Login {
        /// The account: its handle, or its DID. The session the PDS creates must be this
        /// account's (without --pds-url, the DID the handle resolves to; with it, the handle
        /// the PDS reports), or nothing is stored.
        #[arg(long)]
        handle: String,
        /// The app password [env: ATPROTO_APP_PASSWORD or ATPROTO_PASSWORD; else asked on a terminal].
        #[arg(long = "app-password", alias = "app_password")]
        app_password: Option<String>,
        /// The PDS to log in to [default: resolved from the handle].
        #[arg(long = "pds-url", alias = "pds_url")]
        pds_url: Option<String>,
    },
    /// Print the stored sessions (no tokens), ordered by DID.
    List,
    /// Forget the stored session of a DID (a missing one is not an error).
    Logout {
        #[arg(long)]
        did: String,
    },
}

#[derive(Debug, Args)]
pub struct PublishArgs {
    /// Record kind: `bounty`, `dev.svc.bounty`, `vocabulary`...
    pub kind: String,
    /// JSON file of the record, or `-` for standard input.
    #[arg(long)]
    pub record: String,
    /// Record key [default: a new TID].
    #[arg(long)]
    pub rkey: Option<String>,
    /// Publish as this DID [default: the first stored session, by DID].
    #[arg(long)]
    pub did: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum EncounterCommand {
    /// Ask for a use (on stderr, answers from stdin) and print an encounter record.
    Record(EncounterArgs),
}

#[derive(Debug, Args)]
pub struct EncounterArgs {
    /// at-uri of the dev.panproto.schema.lens record that was applied.
    #[arg(long)]
    pub lens: String,
    /// at-uri of the schema record of the data the lens read.
    #[arg(long = "source-schema", alias = "source_schema")]
    pub source_schema: String,
    /// at-uri of the schema record of the data the lens produced.
    #[arg(long = "target-schema", alias = "target_schema")]
    pub target_schema: Option<String>,
    /// at-uri of a vocabulary record whose actions are offered to choose from [default: the
    /// action is asked as free text].
    #[arg(long = "action-vocab", alias = "action_vocab")]
    pub action_vocab: Option<String>,
    /// Kind of encounter: invocation-log, curated, roundtrip-verified, production,
    /// adversarial, or another word.
    #[arg(long, default_value = "invocation-log")]
    pub kind: String,
    /// Audience the record is meant for: public-detailed, public-minimal,
    /// public-aggregate-only, community-scoped or private.
    #[arg(long, default_value = "public-detailed")]
    pub visibility: String,
    /// Ask one free-text line instead of the structured use.
    #[arg(long = "text-only", alias = "text_only")]
    pub text_only: bool,
}

#[derive(Debug, Subcommand)]
pub enum VerifyCommand {
    /// Every corpus record survives get then put (the view written as JSON and read back).
    #[command(name = svc_spec::ROUNDTRIP_TEST)]
    RoundtripTest {
        #[command(flatten)]
        lens: LensArgs,
        /// JSON array or JSON Lines file of source records [default: one record, {"text":""}].
        #[arg(long)]
        corpus: Option<PathBuf>,
    },
    /// `--budget` round-trip cases, case i on corpus record i mod (corpus size).
    #[command(name = svc_spec::PROPERTY_TEST)]
    PropertyTest {
        #[command(flatten)]
        lens: LensArgs,
        /// JSON array or JSON Lines file of source records.
        #[arg(long)]
        corpus: PathBuf,
        /// How many cases run (at least 1).
        #[arg(long, default_value_t = 100)]
        budget: u64,
    },
    /// The lens derives the published target schema, the object hashes match, and both schemas
    /// satisfy their protocol.
    #[command(name = svc_spec::STATIC_CHECK)]
    StaticCheck {
        #[command(flatten)]
        lens: LensArgs,
        /// A panproto Protocol as JSON, for schemas naming a protocol other than the open
        /// default "" (without it such a check is inconclusive).
        #[arg(long)]
        protocol: Option<PathBuf>,
    },
    /// Ask a version-control service whether the lens keeps a standard's coercion laws.
    #[command(name = svc_spec::COERCION_LAW)]
    CoercionLaw {
        #[command(flatten)]
        lens: LensArgs,
        /// Base address of the service answering dev.panproto.translate.verifyCoercionLaws.
        #[arg(long = "vcs-url", alias = "vcs_url")]
        vcs_url: String,
        /// The standard whose laws are checked (at most 256 characters).
        #[arg(long)]
        standard: String,
        /// The standard's version (at most 64 characters).
        #[arg(long = "version")]
        standard_version: Option<String>,
        /// Violations tolerated before the check is falsified [default: none].
        #[arg(long = "violation-threshold", alias = "violation_threshold")]
        violation_threshold: Option<u64>,
    },
}

/// What every verification runner takes.
#[derive(Debug, Args)]
pub struct LensArgs {
    /// at-uri of the dev.panproto.schema.lens record.
    #[arg(long)]
    pub lens: String,
    /// Read the lens and its schemas from this PDS [default: each record's author's PDS].
    #[arg(long = "pds-url", alias = "pds_url")]
    pub pds_url: Option<String>,
    /// The verifier's DID [default: the stored session's, when exactly one is stored].
    #[arg(long = "verifier-did", alias = "verifier_did")]
    pub verifier_did: Option<String>,
    /// Also publish the verification record with the verifier's stored session.
    #[arg(long)]
    pub publish: bool,
}

/// The headings `svc serve --help` groups its flags under, by the process that uses them.
const ROLE_FLAGS: &str = "Every process: the catalog and the role";
const INDEXER_FLAGS: &str = "The indexer (and its standby): what the catalog follows";
const API_FLAGS: &str = "The query API (replicas, or an indexer that answers queries)";
const ADMIN_FLAGS: &str = "The admin methods (on the indexer)";

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on: IP or host name, and port (port 0 picks a free port).
    #[arg(help_heading = API_FLAGS, long, env = "SVC_LISTEN", default_value = "127.0.0.1:8787", value_parser = parse_listen)]
    pub listen: String,

    /// The catalog: a file path or sqlite:PATH (SQLite), or a postgres:// URL
    /// [default: <data dir>/svc/catalog.db].
    // Text, parsed at start: clap would echo a URL with its password in a usage error.
    #[arg(help_heading = ROLE_FLAGS, long, env = "SVC_DB")]
    pub db: Option<String>,

    /// File holding the PostgreSQL password alone, for a --db URL without one (else
    /// PGPASSWORD, else PGPASSFILE or ~/.pgpass, as libpq reads them).
    #[arg(help_heading = ROLE_FLAGS, long = "db-password-file", env = "SVC_DB_PASSWORD_FILE")]
    pub db_password_file: Option<PathBuf>,

    /// File holding the admin password alone: with it, takedowns are taken through
    /// com.atproto.admin.updateSubjectStatus (HTTP Basic, user `admin`); without it, the admin
    /// methods are not served.
    #[arg(help_heading = ADMIN_FLAGS, long = "admin-password-file", env = "SVC_ADMIN_PASSWORD_FILE")]
    pub admin_password_file: Option<PathBuf>,

    /// Address the admin methods are served on, and nothing else (a private address; also on
    /// an indexer started with --no-api); the public address then answers them as a server
    /// without admin. Needs --admin-password-file.
    #[arg(help_heading = ADMIN_FLAGS, long = "admin-listen", env = "SVC_ADMIN_LISTEN", value_parser = parse_listen, requires = "admin_password_file")]
    pub admin_listen: Option<String>,

    /// Proxies whose X-Forwarded-For (or Forwarded: for=) names the client: address ranges
    /// (CIDR), comma-separated. Every per-client rule counts the client they name; any other
    /// connection is its peer's address, whatever it sends [default: none].
    #[arg(help_heading = API_FLAGS, long = "trusted-proxies", env = "SVC_TRUSTED_PROXIES", value_delimiter = ',', value_parser = parse_cidr)]
    pub trusted_proxies: Vec<svc_server::Cidr>,

    /// Memory in MiB for repositories read whole (the backfill's and the resynchronisation's
    /// getRepo), shared by every read in flight; a body it has no room for waits in a
    /// temporary file.
    #[arg(help_heading = INDEXER_FLAGS, long = "read-memory-mb", env = "SVC_READ_MEMORY_MB", default_value_t = svc_ingest::DEFAULT_READ_MEMORY_MB as u32, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub read_memory_mb: u32,

    /// A labeler to follow (repeatable; the variable takes a comma-separated list): its
    /// DID, whose document names its label stream and key. Its labels are shown with the
    /// records they apply to; its `!takedown` hides them.
    #[arg(help_heading = INDEXER_FLAGS, long = "labeler", env = "SVC_LABELERS", value_delimiter = ',', value_parser = parse_did)]
    pub labelers: Vec<svc_syntax::Did>,

    /// Live source of events, or `none`.
    #[arg(help_heading = INDEXER_FLAGS, long, env = "SVC_FIREHOSE", default_value = DEFAULT_FIREHOSE)]
    pub firehose: String,

    /// File to import before reporting ready (repeatable; the variable takes a
    /// comma-separated list): JSON Lines of Jetstream events, or a repository export
    /// (`.car`, as `com.atproto.sync.getRepo` answers), verified unless `--verify none`.
    #[arg(help_heading = INDEXER_FLAGS, long = "import", env = "SVC_IMPORT", value_delimiter = ',')]
    pub imports: Vec<PathBuf>,

    /// PDS or relay to backfill from before following the live source.
    #[arg(help_heading = INDEXER_FLAGS, long, env = "SVC_BACKFILL")]
    pub backfill: Option<String>,

    /// PLC directory for resolving DIDs (backfill reads each repository from its own PDS).
    #[arg(
        help_heading = INDEXER_FLAGS,
        long = "plc-url",
        env = "SVC_PLC_URL",
        default_value = DEFAULT_PLC
    )]
    pub plc_url: String,

    /// How long the change stream keeps each change, for clients resuming from a cursor
    /// (`24h`, `30m`; at most 10,000,000 changes are kept whatever this says).
    #[arg(help_heading = INDEXER_FLAGS, long = "stream-retention", env = "SVC_STREAM_RETENTION", default_value = "24h", value_parser = parse_duration)]
    pub stream_retention: Duration,

    /// Change-stream subscribers (`/v1/changes`) connected at once, at most; more are
    /// answered 503.
    #[arg(
        help_heading = API_FLAGS,
        long = "max-subscribers",
        env = "SVC_MAX_SUBSCRIBERS",
        default_value_t = 1000
    )]
    pub max_subscribers: usize,

    /// Change-stream subscribers from one client address at once, at most; more get a 429.
    #[arg(
        help_heading = API_FLAGS,
        long = "max-subscribers-per-client",
        env = "SVC_MAX_SUBSCRIBERS_PER_CLIENT",
        default_value_t = 100
    )]
    pub max_subscribers_per_client: usize,

    /// KiB per second one client's change-stream replays (the changes stored after a cursor)
    /// send at most, all its subscriptions together; live changes are not counted. 0: not
    /// paced.
    #[arg(
        help_heading = API_FLAGS,
        long = "replay-kib-per-second",
        env = "SVC_REPLAY_KIB_PER_SECOND",
        default_value_t = 4096
    )]
    pub replay_kib_per_second: u64,

    /// Verify what carries proofs before applying it: `all` (the repository firehose's commits
    /// with their Sync 1.1 proofs, repositories the backfill reads whole, `.car` imports;
    /// signing keys from DID documents through --plc-url) or `none`. Jetstream carries no
    /// proofs and is never verified.
    #[arg(help_heading = INDEXER_FLAGS, long, env = "SVC_VERIFY", default_value = "all", value_parser = ["all", "none"])]
    pub verify: String,

    /// Ask Jetstream for zstd-compressed events (about a quarter of the bytes).
    #[arg(help_heading = INDEXER_FLAGS, long = "jetstream-zstd", env = "SVC_JETSTREAM_ZSTD")]
    pub jetstream_zstd: bool,

    /// Reach loopback, private, link-local and other non-public addresses when the network
    /// names them (a `did:web` host, the PDS a DID document names); without it they are
    /// refused, and redirects are not followed to another host. Addresses given here
    /// (--firehose, --backfill, --plc-url) are reached as given either way.
    #[arg(help_heading = INDEXER_FLAGS, long = "allow-private-peers", env = "SVC_ALLOW_PRIVATE_PEERS")]
    pub allow_private_peers: bool,

    /// Reuse a stored cursor even if it was stored for another firehose endpoint.
    #[arg(help_heading = INDEXER_FLAGS, long, env = "SVC_FORCE_CURSOR")]
    pub force_cursor: bool,

    /// How far behind the live source may be and still count as caught up (`/readyz`).
    #[arg(help_heading = API_FLAGS, long, env = "SVC_READY_LAG", default_value = "10s", value_parser = parse_duration)]
    pub ready_lag: Duration,

    /// A live connection silent this long (no event, no pong) is re-opened; a labeler's
    /// stream is pinged after this long quiet, and re-opened after twice it.
    #[arg(help_heading = INDEXER_FLAGS, long, env = "SVC_LIVENESS", default_value = "30s", value_parser = parse_duration)]
    pub liveness: Duration,

    /// Query specification file replacing the built-in one.
    #[arg(help_heading = ROLE_FLAGS, long, env = "SVC_SPEC")]
    pub spec: Option<PathBuf>,

    /// Longest time a request may take (`500ms`, `10s`, or seconds).
    #[arg(help_heading = API_FLAGS, long, env = "SVC_REQUEST_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub request_timeout: Duration,

    /// Memory for cached answers, in MiB (0 turns the cache off).
    #[arg(help_heading = API_FLAGS, long, env = "SVC_CACHE_MB", default_value_t = 32)]
    pub cache_mb: usize,

    /// Longest wait for a request's head, and for the next request on an idle connection.
    #[arg(help_heading = API_FLAGS, long = "head-timeout", env = "SVC_HEAD_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    pub head_timeout: Duration,

    /// Longest time an answer may wait for a client that reads nothing; then the connection
    /// is closed.
    #[arg(help_heading = API_FLAGS, long = "write-timeout", env = "SVC_WRITE_TIMEOUT", default_value = "30s", value_parser = parse_duration)]
    pub write_timeout: Duration,

    /// Open client connections at most [default: the file-descriptor limit less 256].
    #[arg(help_heading = API_FLAGS, long = "max-connections", env = "SVC_MAX_CONNECTIONS", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections: Option<u64>,

    /// Requests answered at once at most; beyond, 503 with Retry-After.
    #[arg(help_heading = API_FLAGS, long = "max-requests", env = "SVC_MAX_REQUESTS", default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_requests: u32,

    /// Costly pages (maps, searches, the front page) built at once, everyone's together; a
    /// build waits up to a second for its turn, then is answered 503 with Retry-After
    /// [default: the cores less one, at least 1].
    #[arg(help_heading = API_FLAGS, long = "costly-builds", env = "SVC_COSTLY_BUILDS", value_parser = clap::value_parser!(u32).range(1..))]
    pub costly_builds: Option<u32>,

    /// Costly pages of one client built at once; beyond, a build waits up to a second for one
    /// of its own, then is answered 429 with Retry-After.
    #[arg(help_heading = API_FLAGS, long = "costly-builds-per-client", env = "SVC_COSTLY_BUILDS_PER_CLIENT", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub costly_builds_per_client: u32,

    /// Requests per second per client (its address prefix; a burst of as many); beyond, 429 with
    /// Retry-After [default: no limit].
    #[arg(help_heading = API_FLAGS, long = "rate-limit", env = "SVC_RATE_LIMIT", value_parser = clap::value_parser!(u32).range(1..))]
    pub rate_limit: Option<u32>,

    /// Leading bits of an IPv4 address that name one client, for the per-client limits (the
    /// rate, change-stream subscribers); loopback addresses are always one client.
    #[arg(help_heading = API_FLAGS, long = "client-prefix-v4", env = "SVC_CLIENT_PREFIX_V4", default_value_t = 24, value_parser = clap::value_parser!(u8).range(0..=32))]
    pub client_prefix_v4: u8,

    /// Leading bits of an IPv6 address that name one client (an IPv4-mapped one counts as its
    /// IPv4 address).
    #[arg(help_heading = API_FLAGS, long = "client-prefix-v6", env = "SVC_CLIENT_PREFIX_V6", default_value_t = 64, value_parser = clap::value_parser!(u8).range(0..=128))]
    pub client_prefix_v6: u8,

    /// Serve queries only: no live source, imports or backfill (a query replica of a
    /// catalog another process indexes); `/readyz` follows the indexer's heartbeat.
    #[arg(help_heading = ROLE_FLAGS, long = "no-indexer", env = "SVC_NO_INDEXER")]
    pub no_indexer: bool,

    /// Index only: serve just `/healthz`, `/readyz` and `/metrics`.
    #[arg(help_heading = ROLE_FLAGS, long = "no-api", env = "SVC_NO_API")]
    pub no_api: bool,

    /// Reader connections to the catalog.
    #[arg(help_heading = ROLE_FLAGS, long, env = "SVC_READERS", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub readers: u16,
}

/// A DID, checked as the flag is read (`--labeler`).
pub fn parse_cidr(text: &str) -> Result<svc_server::Cidr, String> {
    text.trim().parse()
}

pub fn parse_did(text: &str) -> Result<svc_syntax::Did, String> {
    svc_syntax::Did::new(text).map_err(|e| format!("not a DID: {e}"))
}

/// `HOST:PORT` (`[::1]:8787` for an IPv6 address); the host is resolved when the server binds.
pub fn parse_listen(text: &str) -> Result<String, String> {
    let usage = || format!("expected HOST:PORT (127.0.0.1:8787, localhost:0), not {text:?}");
    let (host, port) = text.rsplit_once(':').ok_or_else(usage)?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if host.is_empty() || host.contains(char::is_whitespace) || port.parse::<u16>().is_err() {
        return Err(usage());
    }
    Ok(text.to_string())
}

pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(i) => text.split_at(i),
        None => (text, "s"),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("not a duration: {text:?} (try 10s or 500ms)"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(format!("unknown unit {unit:?} in {text:?} (ms, s, m or h)")),
    };
    if !(seconds > 0.0 && seconds.is_finite()) {
        return Err(format!("duration must be positive: {text:?}"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

impl ServeArgs {
    /// Where svc serve connects when the network names the address.
    pub fn network_reach(&self) -> svc_atproto::Reach {
        match self.allow_private_peers {
            true => svc_atproto::Reach::Anywhere,
            false => svc_atproto::Reach::PublicOnly,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses() {
        for good in [
            "127.0.0.1:8787",
            "localhost:0",
            "[::1]:80",
            "example.org:443",
        ] {
            assert_eq!(parse_listen(good).as_deref(), Ok(good));
        }
        for bad in [
            "not-an-address",
            "localhost",
            ":80",
            "host:99999",
            "a b:1",
            "host:",
        ] {
            assert!(parse_listen(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert!(parse_duration("0").is_err());
        assert_eq!(parse_duration("24h").unwrap(), Duration::from_secs(86_400));
        assert!(parse_duration("5d").is_err());
        assert!(parse_duration("soon").is_err());
    }
}
