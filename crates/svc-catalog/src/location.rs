//! Where a catalog lives: an SQLite file or a PostgreSQL database, from one string.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// The forms a location may take, for error messages.
pub const ACCEPTED_FORMS: &str = "a file path, sqlite:PATH, or a postgres:// (postgresql://) URL";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    Sqlite(PathBuf),
    Postgres(PostgresUrl),
}

/// A `postgres://` or `postgresql://` URL. Its `Display` hides the password, so that it can
/// be logged; [`PostgresUrl::expose`] gives the URL itself, for the driver alone.
#[derive(Clone, PartialEq, Eq)]
pub struct PostgresUrl(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LocationError(String);

impl PostgresUrl {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for PostgresUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&redact(&self.0))
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
                Ok(Location::Postgres(PostgresUrl(text.to_string())))
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
}
