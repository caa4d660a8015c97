//! Where a catalog lives: an SQLite file or a PostgreSQL database, from one string.

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// The forms a location may take, for error messages.
pub const ACCEPTED_FORMS: &str = "a file path, sqlite:PATH, or a postgres:// (postgresql://) URL";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    Sqlite(PathBuf),
    Postgres(PostgresUrl),
}

/// A `postgres://` or `postgresql://` URL, and the password given beside it, if any. Its
/// `Display` hides the password, so that it can be logged; [`PostgresUrl::expose`] gives the
/// URL itself, for the driver alone.
#[derive(Clone, PartialEq, Eq)]
pub struct PostgresUrl {
    url: String,
    password: Option<String>,
}

/// The longest password file read: a password is far shorter, and a path to something endless
/// (`/dev/zero`) must not be read forever.
const MAX_PASSWORD_FILE: u64 = 4096;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LocationError(String);

impl PostgresUrl {
    pub fn expose(&self) -> &str {
        &self.url
    }

    /// The password given beside the URL ([`PostgresUrl::with_password_file`]).
    pub fn given_password(&self) -> Option<&str> {
        self.password.as_deref()
    }

    /// Whether the URL carries a password itself (in its user information or a `password=`
    /// parameter).
    pub fn has_password(&self) -> bool {
        self.url
            .parse::<tokio_postgres::Config>()
            .is_ok_and(|config| config.get_password().is_some())
    }

    /// The URL with the password read from `path` now, at start: the file holds the password
    /// alone (one trailing line break is not part of it), as a Docker secret or a systemd
    /// credential does. A file that cannot be read, is empty, holds more than one line, or
    /// a URL with a password of its own (two passwords, one unused) is refused.
    pub fn with_password_file(self, path: &Path) -> Result<PostgresUrl, LocationError> {
        let shown = path.display();
        if self.has_password() {
            return Err(LocationError(format!(
                "{self} carries a password already; give the password in one place: drop it \
                 from the URL or drop the password file {shown}"
            )));
        }
        let bytes = read_bounded(path, MAX_PASSWORD_FILE)
            .map_err(|e| LocationError(format!("password file {shown}: {e}")))?;
        let text = String::from_utf8(bytes)
            .map_err(|_| LocationError(format!("password file {shown}: not UTF-8 text")))?;
        let password = text
            .strip_suffix('\n')
            .map(|t| t.strip_suffix('\r').unwrap_or(t))
            .unwrap_or(&text);
        if password.is_empty() {
            return Err(LocationError(format!("password file {shown} is empty")));
        }
        if password.contains(['\n', '\r']) {
            return Err(LocationError(format!(
                "password file {shown} holds more than one line; it should hold the password \
                 alone"
            )));
        }
        Ok(PostgresUrl {
            password: Some(password.to_string()),
            ..self
        })
    }
}

/// A file's bytes, refused when it holds more than `limit`.
pub(crate) fn read_bounded(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(limit + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("longer than {limit} bytes"),
        ));
    }
    Ok(bytes)
}

impl fmt::Display for PostgresUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&redact(&self.url))
    }
}

impl fmt::Debug for PostgresUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PostgresUrl({self})")
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Sqlite(path) => write!(f, "{}", path.display()),
            Location::Postgres(url) => url.fmt(f),
        }
    }
}

/// The scheme of `text` when it reads as a URL (`scheme://...` or `scheme:` with a scheme of
/// two letters or more, so that nothing like a relative path is taken for one).
fn scheme(text: &str) -> Option<&str> {
    let (scheme, _) = text.split_once(':')?;
    let mut chars = scheme.chars();
    let starts_with_letter = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    (scheme.len() >= 2 && starts_with_letter && rest_ok).then_some(scheme)
}

impl FromStr for Location {
    type Err = LocationError;

    fn from_str(text: &str) -> Result<Location, LocationError> {
        if text.is_empty() {
            return Err(LocationError(format!("empty; give {ACCEPTED_FORMS}")));
        }
        match scheme(text).map(str::to_ascii_lowercase).as_deref() {
            None => Ok(Location::Sqlite(PathBuf::from(text))),
            Some("sqlite") => {
                let path = &text["sqlite:".len()..];
                // sqlite:///abs/path is the URL spelling of sqlite:/abs/path.
                let path = path.strip_prefix("//").unwrap_or(path);
                if path.is_empty() {
                    return Err(LocationError("sqlite: names no file".into()));
                }
                Ok(Location::Sqlite(PathBuf::from(path)))
            }
            Some("postgres" | "postgresql") => {
                if !text[text.find(':').unwrap_or(0)..].starts_with("://") {
                    return Err(LocationError(
                        "a PostgreSQL URL starts with postgres:// (or postgresql://)".into(),
                    ));
                }
                Ok(Location::Postgres(PostgresUrl {
                    url: text.to_string(),
                    password: None,
                }))
            }
            Some(other) => Err(LocationError(format!(
                "unsupported scheme {other:?}; give {ACCEPTED_FORMS}"
            ))),
        }
    }
}

/// `text` with the password of its user information and any `password=` parameter hidden.
fn redact(text: &str) -> String {
    let mut out = text.to_string();
    if let Some(start) = out.find("://").map(|i| i + 3) {
        let end = out[start..]
            .find(['/', '?', '#'])
            .map_or(out.len(), |i| start + i);
        if let Some(at) = out[start..end].rfind('@').map(|i| start + i)
            && let Some(colon) = out[start..at].find(':').map(|i| start + i)
        {
            out.replace_range(colon + 1..at, "***");
        }
    }
    if let Some(query) = out.find('?') {
        let (head, params) = out.split_at(query + 1);
        let params: Vec<String> = params
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=***"),
                _ => pair.to_string(),
            })
            .collect();
        out = format!("{head}{}", params.join("&"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Location, String> {
        text.parse::<Location>().map_err(|e| e.to_string())
    }

    #[test]
    fn paths_and_sqlite_forms_name_a_file() {
        for (text, path) in [
            ("catalog.db", "catalog.db"),
            ("/var/lib/svc/catalog.db", "/var/lib/svc/catalog.db"),
            ("./c:d.db", "./c:d.db"),
            ("sqlite:catalog.db", "catalog.db"),
            ("sqlite:///var/lib/c.db", "/var/lib/c.db"),
            ("SQLITE:/tmp/c.db", "/tmp/c.db"),
        ] {
            assert_eq!(
                parse(text),
                Ok(Location::Sqlite(PathBuf::from(path))),
                "{text}"
            );
        }
    }

    #[test]
    fn postgres_urls_are_recognised_and_printed_without_their_password() {
        for text in [
            "postgres://svc:s3cret@db.example:5432/catalog?sslmode=require",
            "postgresql://svc:s3cret@db.example/catalog",
        ] {
            let location = parse(text).unwrap();
            let Location::Postgres(url) = &location else {
                panic!("{text}: {location:?}")
            };
            assert_eq!(url.expose(), text);
            for shown in [location.to_string(), format!("{location:?}")] {
                assert!(!shown.contains("s3cret"), "{shown}");
                assert!(shown.contains("svc:***@db.example"), "{shown}");
            }
        }
        let with_parameter = parse("postgres://db/c?user=svc&password=s3cret&sslmode=require");
        let shown = with_parameter.unwrap().to_string();
        assert_eq!(
            shown,
            "postgres://db/c?user=svc&password=***&sslmode=require"
        );
        assert_eq!(
            parse("postgres://svc@127.0.0.1:5432/svc")
                .unwrap()
                .to_string(),
            "postgres://svc@127.0.0.1:5432/svc"
        );
    }

    #[test]
    fn other_schemes_are_refused_naming_the_accepted_forms() {
        for text in [
            "mysql://u:p@host/db",
            "http://host/x",
            "postgres:catalog",
            "",
        ] {
            let error = parse(text).unwrap_err();
            assert!(!error.contains(":p@"), "{error}");
            assert!(
                error.contains("postgres://") || error.contains("sqlite:PATH"),
                "{text}: {error}"
            );
        }
        assert!(parse("sqlite:").is_err());
    }

    #[test]
    fn a_password_file_holds_the_password_alone() {
        let dir = tempfile::tempdir().unwrap();
        let url = || match parse("postgres://svc@db.example/svc").unwrap() {
            Location::Postgres(url) => url,
            other => panic!("{other:?}"),
        };
        let file = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        for (text, password) in [
            ("s3cret", "s3cret"),
            ("s3cret\n", "s3cret"),
            ("s3cret\r\n", "s3cret"),
            (" spaced: #kept ", " spaced: #kept "),
        ] {
            let given = url().with_password_file(&file("ok", text)).unwrap();
            assert_eq!(given.given_password(), Some(password), "{text:?}");
            assert_eq!(given.expose(), "postgres://svc@db.example/svc");
            for shown in [given.to_string(), format!("{given:?}")] {
                assert!(!shown.contains("s3cret"), "{shown}");
            }
        }
        let refused = |path: &Path| url().with_password_file(path).unwrap_err().to_string();
        let missing = dir.path().join("missing");
        let error = refused(&missing);
        assert!(
            error.starts_with(&format!("password file {}: ", missing.display())),
            "{error}"
        );
        assert!(refused(&file("empty", "")).ends_with("is empty"));
        assert!(refused(&file("newline", "\n")).ends_with("is empty"));
        assert!(refused(&file("env", "PGPASSWORD=x\nSVC_DB=y\n")).contains("more than one line"));
        assert!(refused(&file("long", &"x".repeat(5000))).contains("longer than 4096 bytes"));
        assert!(refused(dir.path()).starts_with("password file "));
        let with_password = match parse("postgres://svc:inline@db.example/svc").unwrap() {
            Location::Postgres(url) => url,
            other => panic!("{other:?}"),
        };
        let error = with_password
            .with_password_file(&file("twice", "s3cret"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("carries a password already"), "{error}");
        assert!(
            !error.contains("inline") && !error.contains("s3cret"),
            "{error}"
        );
    }
}
