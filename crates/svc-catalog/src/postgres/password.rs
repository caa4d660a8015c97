//! Where the catalog's PostgreSQL password comes from, as libpq would take it (tokio-postgres
//! reads none of these itself): the URL, the password file given at start, `PGPASSWORD`, or
//! the `.pgpass` file.

use crate::location::{PostgresUrl, read_bounded};
use std::path::{Path, PathBuf};

/// Where the catalog's password came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum PasswordSource {
    Url,
    /// The password file given at start (`--db-password-file`).
    Given,
    /// `PGPASSWORD`.
    Environment,
    /// A `.pgpass` file.
    Pgpass(std::path::PathBuf),
    /// None, and why a `.pgpass` file there is was not read, if it was not.
    Nowhere {
        ignored: Option<String>,
    },
}

/// The port libpq assumes.
const DEFAULT_PORT: u16 = 5432;

/// A password for a URL that carries none, from where libpq would take one (tokio-postgres
/// reads none of these itself): the password file given at start, else `PGPASSWORD`, else
/// the first line of the `.pgpass` file (`PGPASSFILE`, else `~/.pgpass`) that matches the
/// connection. A Unix socket's directory matches as itself or as `localhost`.
pub(super) fn supply_password(
    config: &mut tokio_postgres::Config,
    url: &PostgresUrl,
    env: impl Fn(&str) -> Option<std::ffi::OsString>,
) -> PasswordSource {
    if config.get_password().is_some() {
        return PasswordSource::Url;
    }
    if let Some(password) = url.given_password() {
        config.password(password);
        return PasswordSource::Given;
    }
    if let Some(password) = env("PGPASSWORD").filter(|p| !p.is_empty()) {
        config.password(password.into_encoded_bytes());
        return PasswordSource::Environment;
    }
    from_pgpass(config, &env)
}

/// The password of the first line of the `.pgpass` file that matches the connection.
fn from_pgpass(
    config: &mut tokio_postgres::Config,
    env: &impl Fn(&str) -> Option<std::ffi::OsString>,
) -> PasswordSource {
    let Some(user) = config.get_user().map(str::to_string) else {
        return PasswordSource::Nowhere { ignored: None };
    };
    let Some(path) = pgpass_path(env) else {
        return PasswordSource::Nowhere { ignored: None };
    };
    let text = match read_pgpass(&path) {
        Pgpass::Text(text) => text,
        // libpq passes over a missing file in silence; one named on purpose is worth a word.
        Pgpass::Missing => {
            let ignored = env("PGPASSFILE")
                .filter(|p| !p.is_empty())
                .map(|_| format!("password file {} (PGPASSFILE) not found", path.display()));
            return PasswordSource::Nowhere { ignored };
        }
        Pgpass::Ignored(reason) => {
            return PasswordSource::Nowhere {
                ignored: Some(reason),
            };
        }
    };
    let database = config.get_dbname().unwrap_or(&user).to_string();
    for (host, port) in &pgpass_hosts(config) {
        if let Some(password) = pgpass_password(
            &text,
            &PgpassFields {
                host,
                port,
                database: &database,
                user: &user,
            },
        ) {
            config.password(password);
            return PasswordSource::Pgpass(path);
        }
    }
    PasswordSource::Nowhere { ignored: None }
}

/// The (host, port) pairs a `.pgpass` line may name for this connection, in order.
fn pgpass_hosts(config: &tokio_postgres::Config) -> Vec<(String, String)> {
    let ports = config.get_ports();
    let port = |i: usize| {
        let port = match ports {
            [] => DEFAULT_PORT,
            [one] => *one,
            many => many.get(i).copied().unwrap_or(DEFAULT_PORT),
        };
        port.to_string()
    };
    let mut hosts: Vec<(String, String)> = Vec::new();
    for (i, host) in config.get_hosts().iter().enumerate() {
        match host {
            tokio_postgres::config::Host::Tcp(name) => hosts.push((name.clone(), port(i))),
            #[cfg(unix)]
            tokio_postgres::config::Host::Unix(directory) => {
                hosts.push((directory.display().to_string(), port(i)));
                hosts.push(("localhost".to_string(), port(i)));
            }
        }
    }
    if hosts.is_empty() {
        let addresses = config.get_hostaddrs().iter().enumerate();
        hosts.extend(addresses.map(|(i, address)| (address.to_string(), port(i))));
    }
    if hosts.is_empty() {
        hosts.push(("localhost".to_string(), port(0)));
    }
    hosts
}

/// The longest `.pgpass` file read.
const MAX_PGPASS_FILE: u64 = 1 << 20;

/// The password file libpq reads: `$PGPASSFILE`, else `~/.pgpass`. `None` without a home.
pub(crate) fn pgpass_path(env: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    match env("PGPASSFILE").filter(|p| !p.is_empty()) {
        Some(path) => Some(PathBuf::from(path)),
        None => env("HOME")
            .filter(|h| !h.is_empty())
            .map(|home| PathBuf::from(home).join(".pgpass")),
    }
}

/// What became of a `.pgpass` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Pgpass {
    /// There is none: nothing to say.
    Missing,
    /// There is one, but libpq would not use it (others may read it, it is not a plain
    /// file): the reason, to warn of.
    Ignored(String),
    Text(String),
}

/// Reads a `.pgpass` file as libpq does: only a plain file that neither group nor others may
/// access (mode 0600 or stricter); a missing file is no error.
pub(crate) fn read_pgpass(path: &Path) -> Pgpass {
    let shown = path.display();
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Pgpass::Missing,
        Err(e) => return Pgpass::Ignored(format!("password file {shown} ignored: {e}")),
    };
    if !metadata.is_file() {
        return Pgpass::Ignored(format!("password file {shown} ignored: not a plain file"));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = metadata.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Pgpass::Ignored(format!(
                "password file {shown} ignored: group or others may access it (mode \
                 {mode:04o}); it should be 0600 or less (`chmod 600 {shown}`)"
            ));
        }
    }
    match read_bounded(path, MAX_PGPASS_FILE) {
        Ok(bytes) => Pgpass::Text(String::from_utf8_lossy(&bytes).into_owned()),
        Err(e) => Pgpass::Ignored(format!("password file {shown} ignored: {e}")),
    }
}

/// What a `.pgpass` line is matched against: the connection's own fields.
#[derive(Clone, Copy)]
pub(crate) struct PgpassFields<'a> {
    pub host: &'a str,
    pub port: &'a str,
    pub database: &'a str,
    pub user: &'a str,
}

/// The password a `.pgpass` file's text gives one connection: the first line whose
/// `hostname:port:database:username` fields match (`*` matches anything; `\:` and `\\` stand
/// for `:` and `\`), as libpq reads it. Lines starting with `#` are comments. An empty
/// password is none.
pub(crate) fn pgpass_password(text: &str, connection: &PgpassFields<'_>) -> Option<String> {
    let PgpassFields {
        host,
        port,
        database,
        user,
    } = *connection;
    'lines: for line in text.lines() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut rest = line;
        for wanted in [host, port, database, user] {
            match pgpass_field(rest, wanted) {
                Some(after) => rest = after,
                None => continue 'lines,
            }
        }
        // The password ends at the line's end or at an unescaped `:`, and a `\` at the very
        // end stands for itself, as in libpq.
        let mut password = String::with_capacity(rest.len());
        let mut chars = rest.chars();
        while let Some(c) = chars.next() {
            match c {
                ':' => break,
                '\\' => password.push(chars.next().unwrap_or('\\')),
                c => password.push(c),
            }
        }
        return (!password.is_empty()).then_some(password);
    }
    None
}

/// What follows a field that matches `wanted` and its `:`, if it does.
fn pgpass_field<'a>(field: &'a str, wanted: &str) -> Option<&'a str> {
    if let Some(rest) = field.strip_prefix("*:") {
        return Some(rest);
    }
    let mut chars = field.char_indices();
    let mut wanted = wanted.chars();
    loop {
        let (at, c) = chars.next()?;
        let c = match c {
            ':' => return wanted.next().is_none().then(|| &field[at + 1..]),
            '\\' => chars.next()?.1,
            c => c,
        };
        if wanted.next() != Some(c) {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::settings;
    use super::*;
    use crate::{Location, PostgresUrl};
    use std::ffi::OsString;
    use std::path::Path;

    fn url(text: &str) -> PostgresUrl {
        match text.parse::<Location>() {
            Ok(Location::Postgres(url)) => url,
            other => panic!("{text}: {other:?}"),
        }
    }

    /// The password the driver would send for `text` in the environment `env`.
    fn supplied(url: &PostgresUrl, env: &[(&str, &OsString)]) -> (Option<String>, PasswordSource) {
        let mut config: tokio_postgres::Config = url.expose().parse().unwrap();
        let source = supply_password(&mut config, url, |name| {
            env.iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).clone())
        });
        let password = config
            .get_password()
            .map(|p| String::from_utf8_lossy(p).into_owned());
        (password, source)
    }

    fn pgpass(dir: &Path, text: &str) -> OsString {
        let path = dir.join("pgpass");
        std::fs::write(&path, text).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        path.into_os_string()
    }

    #[test]
    fn a_password_comes_from_the_url_the_file_the_environment_or_pgpass_in_that_order() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("password");
        std::fs::write(&file, "from-file\n").unwrap();
        let passfile = pgpass(dir.path(), "db.example:5432:svc:svc:from-pgpass\n");
        let environment: OsString = "from-environment".into();
        let everything = [("PGPASSWORD", &environment), ("PGPASSFILE", &passfile)];
        let plain = url("postgres://svc@db.example/svc");
        let given = plain.clone().with_password_file(&file).unwrap();
        let inline = url("postgres://svc:from-url@db.example/svc");
        assert_eq!(
            supplied(&inline, &everything),
            (Some("from-url".into()), PasswordSource::Url)
        );
        assert_eq!(
            supplied(&given, &everything),
            (Some("from-file".into()), PasswordSource::Given)
        );
        assert_eq!(
            supplied(&plain, &everything),
            (Some("from-environment".into()), PasswordSource::Environment)
        );
        assert_eq!(
            supplied(&plain, &everything[1..]),
            (
                Some("from-pgpass".into()),
                PasswordSource::Pgpass(passfile.clone().into())
            )
        );
        let empty: OsString = "".into();
        assert_eq!(
            supplied(&plain, &[("PGPASSWORD", &empty), ("PGPASSFILE", &passfile)]).0,
            Some("from-pgpass".into())
        );
        let other = url("postgres://svc@db.example:5433/svc");
        assert_eq!(
            supplied(&other, &everything[1..]),
            (None, PasswordSource::Nowhere { ignored: None })
        );
    }

    #[test]
    fn pgpass_is_matched_as_libpq_matches_it() {
        let dir = tempfile::tempdir().unwrap();
        let passfile = pgpass(
            dir.path(),
            "\
db.example:5432:svc:svc:default-port-and-database
db.example:6432:catalog:reader:explicit
/run/postgresql:5432:svc:svc:socket-directory
localhost:5433:svc:svc:socket-as-localhost
127.0.0.1:5434:svc:svc:host-address
",
        );
        let env = [("PGPASSFILE", &passfile)];
        for (text, password) in [
            ("postgres://svc@db.example", "default-port-and-database"),
            ("postgres://reader@db.example:6432/catalog", "explicit"),
            ("postgres://svc@%2Frun%2Fpostgresql/svc", "socket-directory"),
            (
                "postgres://svc@%2Fvar%2Frun%2Fpg:5433/svc",
                "socket-as-localhost",
            ),
            (
                "postgres://svc@/svc?hostaddr=127.0.0.1&port=5434",
                "host-address",
            ),
            (
                "postgres://svc@other.example,db.example/svc",
                "default-port-and-database",
            ),
        ] {
            assert_eq!(
                supplied(&url(text), &env).0.as_deref(),
                Some(password),
                "{text}"
            );
        }
        // Without a home and without PGPASSFILE, there is nothing to read.
        assert_eq!(
            supplied(&url("postgres://svc@db.example/svc"), &[]),
            (None, PasswordSource::Nowhere { ignored: None })
        );
    }

    #[cfg(unix)]
    #[test]
    fn an_unusable_pgpass_is_named_in_a_warning() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let passfile = pgpass(dir.path(), "*:*:*:*:secret\n");
        std::fs::set_permissions(&passfile, std::fs::Permissions::from_mode(0o644)).unwrap();
        let plain = url("postgres://svc@db.example/svc");
        let (password, source) = supplied(&plain, &[("PGPASSFILE", &passfile)]);
        assert_eq!(password, None);
        let PasswordSource::Nowhere {
            ignored: Some(reason),
        } = source
        else {
            panic!("{source:?}")
        };
        assert!(reason.contains("mode 0644"), "{reason}");
        let missing: OsString = dir.path().join("missing").into_os_string();
        let (_, source) = supplied(&plain, &[("PGPASSFILE", &missing)]);
        let PasswordSource::Nowhere {
            ignored: Some(reason),
        } = source
        else {
            panic!("{source:?}")
        };
        assert!(reason.ends_with("(PGPASSFILE) not found"), "{reason}");
        // ~/.pgpass missing is the common case, and says nothing.
        let home: OsString = dir.path().join("home").into_os_string();
        assert_eq!(
            supplied(&plain, &[("HOME", &home)]).1,
            PasswordSource::Nowhere { ignored: None }
        );
    }

    #[test]
    fn the_settings_carry_the_given_password() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("password");
        std::fs::write(&file, "from-file").unwrap();
        let given = url("postgres://svc@db.example/svc")
            .with_password_file(&file)
            .unwrap();
        let (config, _) = settings(&given).unwrap();
        assert_eq!(config.get_password(), Some(&b"from-file"[..]));
    }

    /// The `svc` user's connection to its `svc` database on `host`, port 5432.
    fn svc_on(host: &str) -> PgpassFields<'_> {
        PgpassFields {
            host,
            port: "5432",
            database: "svc",
            user: "svc",
        }
    }

    #[test]
    fn pgpass_lines_match_by_field_with_wildcards() {
        let text = "\
# a comment: db.example:5432:svc:svc:commented
db.example:5432:svc:svc:first
db.example:5432:svc:svc:second
*:5433:*:svc:any-host
db.example:*:catalog:*:any-port-and-user

other:5432:svc:svc:other-host
";
        let password = |host, port, database, user| {
            let fields = PgpassFields {
                host,
                port,
                database,
                user,
            };
            pgpass_password(text, &fields)
        };
        assert_eq!(
            password("db.example", "5432", "svc", "svc").as_deref(),
            Some("first")
        );
        assert_eq!(
            password("anything", "5433", "x", "svc").as_deref(),
            Some("any-host")
        );
        assert_eq!(password("anything", "5433", "x", "bob"), None);
        assert_eq!(
            password("db.example", "6000", "catalog", "bob").as_deref(),
            Some("any-port-and-user")
        );
        assert_eq!(
            password("other", "5432", "svc", "svc").as_deref(),
            Some("other-host")
        );
        // Fields compare whole and exactly: no prefix, no case folding.
        assert_eq!(password("db.exampl", "5432", "svc", "svc"), None);
        assert_eq!(password("db.example.org", "5432", "svc", "svc"), None);
        assert_eq!(password("DB.example", "5432", "svc", "svc"), None);
        assert_eq!(password("db.example", "5432", "svc", "sv"), None);
        assert_eq!(
            pgpass_password(
                "",
                &PgpassFields {
                    host: "h",
                    port: "1",
                    database: "d",
                    user: "u"
                }
            ),
            None
        );
    }

    #[test]
    fn pgpass_escapes_colons_and_backslashes() {
        let text = "\
/run/pg\\:x:5432:svc:svc:socket
h:5432:svc:we\\\\ird:back\\\\slash\\:colon
h:5432:svc:star:\\*literal
h:5432:svc:cut:before:after
h:5432:svc:trailing:ends\\
h:5432:svc:empty:
h:5432:svc:crlf:windows\r
";
        let password = |host, user| {
            pgpass_password(
                text,
                &PgpassFields {
                    host,
                    port: "5432",
                    database: "svc",
                    user,
                },
            )
        };
        assert_eq!(password("/run/pg:x", "svc").as_deref(), Some("socket"));
        assert_eq!(
            password("h", "we\\ird").as_deref(),
            Some("back\\slash:colon")
        );
        assert_eq!(password("h", "star").as_deref(), Some("*literal"));
        assert_eq!(password("h", "cut").as_deref(), Some("before"));
        assert_eq!(password("h", "trailing").as_deref(), Some("ends\\"));
        assert_eq!(password("h", "empty"), None);
        assert_eq!(password("h", "crlf").as_deref(), Some("windows"));
        // A literal `*` is not a wildcard: `\*` matches only `*`.
        let starred = "\\*:5432:svc:svc:star-host\n";
        assert_eq!(pgpass_password(starred, &svc_on("h")), None);
        assert_eq!(
            pgpass_password(starred, &svc_on("*")).as_deref(),
            Some("star-host")
        );
        // Too few fields is no match.
        assert_eq!(pgpass_password("h:5432:svc\n", &svc_on("h")), None);
    }

    #[cfg(unix)]
    #[test]
    fn a_pgpass_file_others_may_read_is_ignored_as_libpq_does() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pgpass");
        assert_eq!(read_pgpass(&path), Pgpass::Missing);
        std::fs::write(&path, "*:*:*:*:secret\n").unwrap();
        for (mode, read) in [(0o600, true), (0o400, true), (0o640, false), (0o604, false)] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            match read_pgpass(&path) {
                Pgpass::Text(text) => assert!(read, "{mode:o}: {text}"),
                Pgpass::Ignored(reason) => {
                    assert!(!read, "{mode:o}: {reason}");
                    assert!(reason.contains(&format!("(mode {mode:04o})")), "{reason}");
                    assert!(reason.contains("chmod 600"), "{reason}");
                    assert!(!reason.contains("secret"), "{reason}");
                }
                Pgpass::Missing => panic!("{mode:o}: missing"),
            }
        }
        let Pgpass::Ignored(reason) = read_pgpass(dir.path()) else {
            panic!("a directory was read")
        };
        assert!(reason.contains("not a plain file"), "{reason}");
        let env = |name: &str| match name {
            "HOME" => Some("/home/svc".into()),
            _ => None,
        };
        assert_eq!(pgpass_path(env), Some(PathBuf::from("/home/svc/.pgpass")));
        let env = |name: &str| match name {
            "HOME" => Some("/home/svc".into()),
            "PGPASSFILE" => Some("/etc/svc/pgpass".into()),
            _ => None,
        };
        assert_eq!(pgpass_path(env), Some(PathBuf::from("/etc/svc/pgpass")));
        assert_eq!(pgpass_path(|_| None), None);
    }
}
