//! The admin password `svc serve` takes: read from a private file, and refused at start when a
//! guess could find it, since no client is ever refused the right one.

use crate::cli::ServeArgs;
use anyhow::Context;

/// The password `--admin-password-file` holds (its one line); a file that cannot be read, that
/// others may read, or that holds too short a password, is refused at start.
pub fn admin_password(args: &ServeArgs) -> anyhow::Result<Option<String>> {
    let Some(path) = &args.admin_password_file else {
        return Ok(None);
    };
    let text = svc_atproto::secret_file::read_private(path, "the admin password")
        .with_context(|| format!("--admin-password-file {}", path.display()))?;
    let password = text.trim_end_matches(['\n', '\r']);
    if let Some(why) = weakness(password) {
        anyhow::bail!(
            "--admin-password-file {}: {why}; make a strong one with \
             `(umask 077 && head -c 24 /dev/urandom | base64 > {})`",
            path.display(),
            path.display()
        );
    }
    Ok(Some(password.to_string()))
}

/// Why a guess could find the admin password, if one could: no client is ever refused the
/// right password, so its strength alone keeps guessers out.
fn weakness(password: &str) -> Option<String> {
    if password.contains(['\n', '\r']) {
        return Some("the password must be one line".into());
    }
    if password.chars().count() < 12 {
        return Some("the password must be at least 12 characters".into());
    }
    let estimate = zxcvbn::zxcvbn(password, &["svc", "admin", "password"]);
    if estimate.score() >= zxcvbn::Score::Four {
        return None;
    }
    let warning = estimate
        .feedback()
        .and_then(|feedback| feedback.warning())
        .map_or(String::new(), |warning| format!(" ({warning})"));
    Some(format!("the password is too easy to guess{warning}"))
}

#[cfg(test)]
mod tests {
    use super::weakness;

    #[test]
    fn only_a_password_no_guess_finds_is_taken() {
        for weak in [
            "short",
            "password1234",
            "aaaaaaaaaaaaaaaa",
            "qwertyuiopasdf",
            "123456789012",
        ] {
            assert!(weakness(weak).is_some(), "{weak}");
        }
        for strong in ["correct horse battery staple", "fJ3kQ9zL0pWm2xRt8vYb6nCs"] {
            assert_eq!(weakness(strong), None, "{strong}");
        }
    }
}
