//! Web Bot Auth keys: the members of a key directory (a JWKS) that can verify a signature —
//! Ed25519, RSA-PSS-SHA512 and ECDSA P-256 SHA-256, the HTTP Message Signatures algorithms a
//! maintained RustCrypto crate verifies — each under its RFC 7638 thumbprint, recomputed from
//! the key (a directory's `kid` is never trusted: published directories get it wrong), and the
//! RFC 9421 signature base they verify.
//!
//! A set belongs to one key directory: keys are looked up by (directory, thumbprint), never by
//! thumbprint alone, so a key is only ever an agent's when that agent's directory lists it.

use std::collections::HashMap;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use sfv::SerializeValue;
use sha2::{Digest, Sha256};
use web_bot_auth::components::CoveredComponent;
use web_bot_auth::message_signatures::SignatureBase;

/// The path of an agent's key directory (its JWKS), under the agent's URL.
pub const DIRECTORY_PATH: &str = "/.well-known/http-message-signatures-directory";

/// The most keys of one set imported; a directory lists a few (the current key and the next).
const MAX_KEYS: usize = 64;

/// The smallest RSA modulus accepted (RFC 9421 leaves it to the verifier; 2048 is today's
/// floor) — the `rsa` crate caps the largest at 4096 bits.
const MIN_RSA_BITS: usize = 2048;

/// A verifying key of one of the supported algorithms.
#[derive(Clone, Debug)]
pub(crate) enum PublicKey {
    /// `ed25519`.
    Ed25519(ed25519_dalek::VerifyingKey),
    /// `rsa-pss-sha512`.
    RsaPss(rsa::RsaPublicKey),
    /// `ecdsa-p256-sha256`.
    EcdsaP256(p256::ecdsa::VerifyingKey),
}

impl PublicKey {
    /// The RFC 9421 algorithm name this key verifies.
    pub(crate) fn algorithm(&self) -> &'static str {
        match self {
            PublicKey::Ed25519(_) => "ed25519",
            PublicKey::RsaPss(_) => "rsa-pss-sha512",
            PublicKey::EcdsaP256(_) => "ecdsa-p256-sha256",
        }
    }

    /// Whether `signature` over `base` is this key's.
    pub(crate) fn verify(&self, base: &[u8], signature: &[u8]) -> Result<(), SignatureMismatch> {
        use p256::ecdsa::signature::Verifier;
        let bad = |e: &dyn std::fmt::Display| SignatureMismatch(e.to_string());
        match self {
            PublicKey::Ed25519(key) => {
                let signature =
                    ed25519_dalek::Signature::from_slice(signature).map_err(|e| bad(&e))?;
                key.verify_strict(base, &signature).map_err(|e| bad(&e))
            }
            PublicKey::RsaPss(key) => {
                let verifier = rsa::pss::VerifyingKey::<sha2::Sha512>::new(key.clone());
                let signature = rsa::pss::Signature::try_from(signature).map_err(|e| bad(&e))?;
                verifier.verify(base, &signature).map_err(|e| bad(&e))
            }
            PublicKey::EcdsaP256(key) => {
                // RFC 9421 §3.3.4: the signature is r and s, 32 bytes each (not DER).
                let signature =
                    p256::ecdsa::Signature::from_slice(signature).map_err(|e| bad(&e))?;
                key.verify(base, &signature).map_err(|e| bad(&e))
            }
        }
    }
}

/// Why a signature did not verify under a key: the cryptography crate's reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SignatureMismatch(String);

impl std::fmt::Display for SignatureMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the signature does not verify ({})", self.0)
    }
}

impl std::error::Error for SignatureMismatch {}

/// Why a JSON Web Key Set gave no key set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeySetError {
    /// Not JSON (the parser's reason).
    NotJson(String),
    /// JSON without a `keys` list.
    NoKeys,
    /// No member of a supported kind and size.
    NoUsableKey,
}

impl std::fmt::Display for KeySetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotJson(e) => write!(f, "not a JSON Web Key Set: {e}"),
            Self::NoKeys => f.write_str("not a JSON Web Key Set: no `keys` list"),
            Self::NoUsableKey => f.write_str(
                "no usable key in the set (Ed25519, RSA of 2048 to 4096 bits, or EC P-256)",
            ),
        }
    }
}

impl std::error::Error for KeySetError {}

/// One directory's usable keys, by recomputed thumbprint.
#[derive(Clone, Debug, Default)]
pub(crate) struct KeySet {
    keys: HashMap<String, PublicKey>,
}

impl KeySet {
    /// The key whose thumbprint is `keyid`.
    pub(crate) fn get(&self, keyid: &str) -> Option<&PublicKey> {
        self.keys.get(keyid)
    }

    /// How many keys the set holds.
    pub(crate) fn len(&self) -> usize {
        self.keys.len()
    }

    /// The set of a JWKS document (`{"keys": [...]}`): members of other types (symmetric,
    /// post-quantum, other curves) or malformed are skipped one by one, so a directory that
    /// adds a key of a newer kind keeps its others. An error when no member is usable.
    pub(crate) fn from_jwks(body: &[u8]) -> Result<KeySet, KeySetError> {
        let value: serde_json::Value =
            serde_json::from_slice(body).map_err(|e| KeySetError::NotJson(e.to_string()))?;
        KeySet::from_value(&value)
    }

    /// As [`KeySet::from_jwks`], from a parsed document (a card's inline `jwks`).
    pub(crate) fn from_value(value: &serde_json::Value) -> Result<KeySet, KeySetError> {
        let Some(members) = value.get("keys").and_then(|keys| keys.as_array()) else {
            return Err(KeySetError::NoKeys);
        };
        let mut set = KeySet::default();
        for member in members.iter().take(MAX_KEYS) {
            if let Some((thumbprint, key)) = import(member) {
                set.keys.entry(thumbprint).or_insert(key);
            }
        }
        if set.keys.is_empty() {
            return Err(KeySetError::NoUsableKey);
        }
        Ok(set)
    }
}

/// A member's base64url field, decoded (no padding, as JWKs write them).
fn field(member: &serde_json::Value, name: &str) -> Option<(String, Vec<u8>)> {
    let text = member.get(name)?.as_str()?;
    let bytes = URL_SAFE_NO_PAD.decode(text).ok()?;
    Some((text.to_string(), bytes))
}

/// The RFC 7638 thumbprint of the required members, in lexicographic order.
fn thumbprint(members: &[(&str, &str)]) -> String {
    let canonical = members
        .iter()
        .map(|(name, value)| format!("\"{name}\":\"{value}\""))
        .collect::<Vec<_>>()
        .join(",");
    URL_SAFE_NO_PAD.encode(Sha256::digest(format!("{{{canonical}}}").as_bytes()))
}

/// One JWK as (thumbprint, key), when it is a supported public key.
fn import(member: &serde_json::Value) -> Option<(String, PublicKey)> {
    let kty = member.get("kty")?.as_str()?;
    match kty {
        "OKP" => {
            let crv = member.get("crv")?.as_str()?;
            if crv != "Ed25519" {
                return None;
            }
            let (x, bytes) = field(member, "x")?;
            let key = ed25519_dalek::VerifyingKey::try_from(bytes.as_slice()).ok()?;
            Some((
                thumbprint(&[("crv", crv), ("kty", kty), ("x", &x)]),
                PublicKey::Ed25519(key),
            ))
        }
        "RSA" => {
            let (n, n_bytes) = field(member, "n")?;
            let (e, e_bytes) = field(member, "e")?;
            let key = rsa::RsaPublicKey::new(
                rsa::BigUint::from_bytes_be(&n_bytes),
                rsa::BigUint::from_bytes_be(&e_bytes),
            )
            .ok()?;
            if rsa::traits::PublicKeyParts::size(&key) * 8 < MIN_RSA_BITS {
                return None;
            }
            Some((
                thumbprint(&[("e", &e), ("kty", kty), ("n", &n)]),
                PublicKey::RsaPss(key),
            ))
        }
        "EC" => {
            let crv = member.get("crv")?.as_str()?;
            if crv != "P-256" {
                return None;
            }
            let (x, x_bytes) = field(member, "x")?;
            let (y, y_bytes) = field(member, "y")?;
            if x_bytes.len() != 32 || y_bytes.len() != 32 {
                return None;
            }
            let point = p256::EncodedPoint::from_affine_coordinates(
                x_bytes.as_slice().into(),
                y_bytes.as_slice().into(),
                false,
            );
            let key = p256::ecdsa::VerifyingKey::from_encoded_point(&point).ok()?;
            Some((
                thumbprint(&[("crv", crv), ("kty", kty), ("x", &x), ("y", &y)]),
                PublicKey::EcdsaP256(key),
            ))
        }
        _ => None,
    }
}

/// The RFC 9421 §2.5 signature base of a parsed signature: each covered component's identifier
/// and value, then `@signature-params` (the covered identifiers with the signature's
/// parameters). `None` when a component cannot be written, or the base is not ASCII.
pub(crate) fn signature_base(base: &SignatureBase) -> Option<String> {
    let mut out = String::new();
    let mut items = Vec::with_capacity(base.components.len());
    for (component, value) in &base.components {
        let item = match component.clone() {
            CoveredComponent::HTTP(field) => sfv::Item::try_from(field).ok()?,
            CoveredComponent::Derived(derived) => sfv::Item::try_from(derived).ok()?,
        };
        out.push_str(&item.serialize_value());
        out.push_str(": ");
        out.push_str(value);
        out.push('\n');
        items.push(item);
    }
    let params = vec![sfv::ListEntry::InnerList(sfv::InnerList::with_params(
        items,
        base.parameters.raw.clone(),
    ))]
    .serialize_value()?;
    out.push_str("\"@signature-params\": ");
    out.push_str(&params);
    out.is_ascii().then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thumbprints_are_recomputed_and_unusable_members_skipped() {
        // RFC 8037 §A.3's key and thumbprint.
        let set = br#"{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","kid":"lies"}]}"#;
        let keys = KeySet::from_jwks(set).unwrap_or_default();
        assert_eq!(keys.len(), 1);
        assert!(keys
            .get("kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k")
            .is_some());
        assert!(keys.get("lies").is_none());
        let mixed = br#"{"keys":[{"kty":"AKP","alg":"ML-DSA-44","pub":"AAAA"},{"kty":"oct","k":"AAAA"},{"kty":"EC","crv":"P-384","x":"AA","y":"AA"},{"kty":"RSA","n":"AQAB","e":"AQAB"},{"kty":"OKP","crv":"Ed25519","x":"short"},"junk",{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}"#;
        assert_eq!(KeySet::from_jwks(mixed).map(|k| k.len()), Ok(1));
        assert_eq!(
            KeySet::from_jwks(br#"{"keys":[]}"#).err(),
            Some(KeySetError::NoUsableKey)
        );
        assert_eq!(
            KeySet::from_jwks(br#"{"keys":{}}"#).err(),
            Some(KeySetError::NoKeys)
        );
        assert!(matches!(
            KeySet::from_jwks(b"<html>"),
            Err(KeySetError::NotJson(_))
        ));
    }

    #[test]
    fn rfc_7638_rsa_thumbprint() {
        // RFC 7638 §3.1's example key and thumbprint.
        let n = "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw";
        let member = serde_json::json!({"kty": "RSA", "n": n, "e": "AQAB", "alg": "RS256", "kid": "2011-04-29"});
        let (thumbprint, key) = import(&member).unwrap_or_else(|| unreachable!());
        assert_eq!(thumbprint, "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs");
        assert_eq!(key.algorithm(), "rsa-pss-sha512");
    }
}
