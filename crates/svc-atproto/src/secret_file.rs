//! Files that hold secrets (a session's tokens, the admin password) are read only when no one
//! but their owner may read them, as ssh reads a private key: a secret others could read may
//! have leaked, and saying so at once is kinder than a takeover later.

use std::path::Path;

/// The text of a file holding `what` (say "the admin password"), refused with a
/// `PermissionDenied` error naming the fix when group or others may read it.
pub fn read_private(path: &Path, what: &str) -> std::io::Result<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path)?.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!(
                    "the file holding {what} is readable by others (mode {mode:04o}), so it may \
                     have leaked; fix it with `chmod 600 {}`",
                    path.display()
                ),
            ));
        }
    }
    #[cfg(not(unix))]
    let _ = what;
    std::fs::read_to_string(path)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn only_a_file_its_owner_alone_reads_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        std::fs::write(&path, "s3cret").unwrap();
        for (mode, readable) in [(0o600, true), (0o400, true), (0o640, false), (0o604, false)] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let read = read_private(&path, "a secret");
            assert_eq!(read.is_ok(), readable, "mode {mode:o}: {read:?}");
            if let Err(error) = read {
                let text = error.to_string();
                assert!(text.contains(&format!("(mode {mode:04o})")), "{text}");
                assert!(text.contains("chmod 600"), "{text}");
            }
        }
    }
}
