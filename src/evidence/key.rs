//! The evidence signing key (`evidence.key_file`) and its public half as others are given it:
//! a JWK (RFC 8037, `OKP`/`Ed25519`) at `GET /evidence/key`, or a PEM public key.

use std::path::Path;

use base64::Engine as _;
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey};
use ed25519_dalek::{SigningKey, VerifyingKey};
use sha2::Digest as _;

/// The largest key file read: a PEM key is some 120 bytes, a seed in base64 44.
const MAX_KEY_FILE_BYTES: u64 = 16 * 1024;

message_error! {
    /// Why a key file or a key's text gives no key, in one line (naming a file, never its
    /// content).
    KeyError
}

/// Reads the signing key: a PKCS#8 PEM private key (`-----BEGIN PRIVATE KEY-----`, as `openssl
/// genpkey -algorithm ed25519` writes it), or the raw 32-byte seed in base64 (standard or URL
/// alphabet, padded or not). The error names the file, never its content.
pub fn load(path: &Path) -> Result<SigningKey, KeyError> {
    load_file(path).map_err(KeyError)
}

fn load_file(path: &Path) -> Result<SigningKey, String> {
    let shown = path.display();
    let metadata = std::fs::metadata(path).map_err(|e| format!("key file `{shown}`: {e}"))?;
    if metadata.is_dir() {
        return Err(format!("key file `{shown}`: a directory, not a file"));
    }
    if metadata.len() > MAX_KEY_FILE_BYTES {
        return Err(format!(
            "key file `{shown}`: {} bytes, more than a key ({MAX_KEY_FILE_BYTES} at most)",
            metadata.len()
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("key file `{shown}`: {e}"))?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| format!("key file `{shown}`: not text (PKCS#8 PEM or a base64 seed)"))?;
    private_key(text).map_err(|why| format!("key file `{shown}`: {why}"))
}

/// A private key from the text of a key file.
pub fn parse_private(text: &str) -> Result<SigningKey, KeyError> {
    private_key(text).map_err(KeyError)
}

fn private_key(text: &str) -> Result<SigningKey, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty".to_string());
    }
    if text.starts_with("-----BEGIN") {
        return SigningKey::from_pkcs8_pem(text)
            .map_err(|_| "not an Ed25519 PKCS#8 private key in PEM (`-----BEGIN PRIVATE KEY-----`; `openssl genpkey -algorithm ed25519`)".to_string());
    }
    let seed =
        decode_base64(text).ok_or("neither PEM nor base64 (a 32-byte Ed25519 seed in base64)")?;
    let seed: [u8; 32] = seed
        .try_into()
        .map_err(|seed: Vec<u8>| format!("a base64 seed of {} bytes, not 32", seed.len()))?;
    Ok(SigningKey::from_bytes(&seed))
}

fn decode_base64(text: &str) -> Option<Vec<u8>> {
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let unpadded = compact.trim_end_matches('=');
    base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(unpadded)
        .or_else(|_| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(unpadded))
        .ok()
}

/// The public key as a JWK: `kty: OKP`, `crv: Ed25519`, `x` (base64url), with `kid` its RFC 7638
/// thumbprint, `alg: EdDSA` and `use: sig`.
pub fn jwk(key: &VerifyingKey) -> serde_json::Value {
    let x = base64url(key.as_bytes());
    serde_json::json!({
        "kty": "OKP",
        "crv": "Ed25519",
        "x": x,
        "kid": thumbprint(&x),
        "alg": "EdDSA",
        "use": "sig",
    })
}

/// RFC 7638: the base64url SHA-256 of the required members in lexicographic order.
fn thumbprint(x: &str) -> String {
    let members = format!("{{\"crv\":\"Ed25519\",\"kty\":\"OKP\",\"x\":\"{x}\"}}");
    base64url(&sha2::Sha256::digest(members.as_bytes()))
}

/// Unpadded base64url, as JWKs and record signatures are written.
pub fn base64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A public key from what a verifier is handed: a JWK (JSON, as `GET /evidence/key` serves
/// it), a PEM public key (`-----BEGIN PUBLIC KEY-----`), or the PEM private key itself.
pub fn parse_public(text: &str) -> Result<VerifyingKey, KeyError> {
    public_key(text).map_err(KeyError)
}

fn public_key(text: &str) -> Result<VerifyingKey, String> {
    let text = text.trim();
    if text.starts_with('{') {
        let jwk: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("not a JWK: {e}"))?;
        let field = |name: &str| jwk.get(name).and_then(serde_json::Value::as_str);
        if field("kty") != Some("OKP") || field("crv") != Some("Ed25519") {
            return Err("not an Ed25519 JWK (`kty: OKP`, `crv: Ed25519`)".to_string());
        }
        let x = field("x").ok_or("a JWK without `x`")?;
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(x)
            .map_err(|_| "the JWK's `x` is not base64url")?;
        let bytes: [u8; 32] = bytes
            .try_into()
            .map_err(|_| "the JWK's `x` is not 32 bytes")?;
        return VerifyingKey::from_bytes(&bytes).map_err(|_| "the JWK's `x` is not a point".into());
    }
    if text.starts_with("-----BEGIN PUBLIC KEY-----") {
        return VerifyingKey::from_public_key_pem(text)
            .map_err(|_| "not an Ed25519 public key in PEM".to_string());
    }
    private_key(text).map(|key| key.verifying_key())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 8037 appendix A.1's key: its JWK `x` and thumbprint (A.3).
    #[test]
    fn the_jwk_and_its_thumbprint_are_rfc_8037s() {
        let seed = "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A";
        let key = parse_private(seed).expect("a seed");
        let jwk = jwk(&key.verifying_key());
        assert_eq!(jwk["x"], "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo");
        assert_eq!(jwk["kid"], "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k");
        let again = parse_public(&jwk.to_string()).expect("the JWK reads back");
        assert_eq!(again, key.verifying_key());
    }

    #[test]
    fn malformed_keys_are_refused_with_why() {
        for text in [
            "",
            "not base64 !!",
            "AAAA",
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----",
        ] {
            assert!(parse_private(text).is_err(), "{text}");
        }
    }
}
