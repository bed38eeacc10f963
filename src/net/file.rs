//! Local files that background work reads whole (range lists, catalogue feeds, registries and
//! their cards): never more than a cap, whatever the file grew to.

use std::io::Read;
use std::path::Path;

/// Reads `path` whole when it holds at most `max` bytes; a larger file is an error (read no
/// further than one byte past the cap), as is one that cannot be opened or read. Errors name
/// the file.
pub(crate) fn read_capped(path: &Path, max: usize) -> Result<Vec<u8>, String> {
    let file =
        std::fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut body = Vec::new();
    file.take(max as u64 + 1)
        .read_to_end(&mut body)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if body.len() > max {
        return Err(format!("{} is larger than {max} bytes", path.display()));
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
        assert_eq!(read_capped(&path, 10).as_deref(), Ok(&b"0123456789"[..]));
        let error = read_capped(&path, 9).expect_err("over the cap");
        assert!(error.contains("larger than 9 bytes"), "{error}");
        let missing = read_capped(&dir.path().join("gone"), 10).expect_err("missing");
        assert!(missing.starts_with("cannot read"), "{missing}");
    }
}
