//! Local files that background work reads whole (range lists, catalogue feeds, registries and
//! their cards): never more than a cap, whatever the file grew to.

use std::io::Read;
use std::path::{Path, PathBuf};

/// Why a capped read failed; each names the file.
#[derive(Debug)]
pub(crate) enum ReadCappedError {
    /// The file could not be opened or read.
    Unreadable(PathBuf, std::io::Error),
    /// The file holds more than the cap.
    TooLarge(PathBuf, usize),
}

impl std::fmt::Display for ReadCappedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unreadable(path, e) => write!(f, "cannot read {}: {e}", path.display()),
            Self::TooLarge(path, max) => write!(f, "{} is larger than {max} bytes", path.display()),
        }
    }
}

impl std::error::Error for ReadCappedError {}

/// Reads `path` whole when it holds at most `max` bytes; a larger file is an error (read no
/// further than one byte past the cap), as is one that cannot be opened or read.
pub(crate) fn read_capped(path: &Path, max: usize) -> Result<Vec<u8>, ReadCappedError> {
    let unreadable = |e| ReadCappedError::Unreadable(path.to_path_buf(), e);
    let file = std::fs::File::open(path).map_err(unreadable)?;
    let mut body = Vec::new();
    file.take(max as u64 + 1)
        .read_to_end(&mut body)
        .map_err(unreadable)?;
    if body.len() > max {
        return Err(ReadCappedError::TooLarge(path.to_path_buf(), max));
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_up_to_the_cap_and_refuses_more() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("list.txt");
        std::fs::write(&path, b"0123456789").expect("written");
        assert_eq!(
            read_capped(&path, 10).ok().as_deref(),
            Some(&b"0123456789"[..])
        );
        let error = read_capped(&path, 9).expect_err("over the cap");
        assert!(matches!(error, ReadCappedError::TooLarge(_, 9)), "{error}");
        assert!(error.to_string().contains("larger than 9 bytes"), "{error}");
        let missing = read_capped(&dir.path().join("gone"), 10).expect_err("missing");
        assert!(
            matches!(missing, ReadCappedError::Unreadable(..)),
            "{missing}"
        );
        assert!(missing.to_string().starts_with("cannot read"), "{missing}");
    }
}
