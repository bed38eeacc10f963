//! The certificates a TLS listener serves: one per site, picked for each connection by the name
//! the client asks for (SNI), re-read when their files change, their expiry exported.
//!
//! - **Selection.** Each certificate answers for the DNS names in its subjectAltName extension
//!   (its common name only when it has none); `*.example.com` answers for one label below
//!   `example.com`. An exact name wins over a wildcard, an earlier certificate over a later one,
//!   and a client that sends no name, or a name no certificate has, gets the first.
//! - **Renewal.** The directories of the files are watched with the config file's rules (renames
//!   onto a name, Kubernetes' `..data` swap, in-place writes after a quiet time) and watched
//!   afresh after each change (a directory reached through a swapped link is a new one), and every pair
//!   is also re-read every [`REREAD_INTERVAL`] in case a change went unseen. A pair that no longer
//!   loads (a key written before its certificate, a truncated file) keeps serving the last one
//!   that did: the failure is logged and counted, and the next change is tried again.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use pingora::tls::sign::CertifiedKey;
use pingora::tls::{ClientHello, CryptoProvider, ResolvesServerCert};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::config::{CertificatePair, ListenerTls};
use crate::metrics::METRICS;
use crate::net::watch::{directory_of, Debouncer, DirectoryWatcher};

/// How often every pair is read again whatever the watcher saw: a watch can miss a change (a
/// network file system, an exhausted inotify limit), and certificates expire.
pub const REREAD_INTERVAL: Duration = Duration::from_secs(300);

/// The certificate files of a listener that cannot be served, with the file and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateError(String);

impl std::fmt::Display for CertificateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CertificateError {}

/// One certificate chain and key as served.
struct Served {
    key: Arc<CertifiedKey>,
    /// Lowercase DNS names, wildcards as written (`*.example.com`).
    names: Vec<String>,
    /// The `name` label of its expiry metric: its first name, else its file name.
    label: String,
    /// When the leaf certificate expires, in Unix seconds.
    not_after: i64,
    /// A digest of both files' bytes, to tell a real change from a re-read of the same files.
    fingerprint: u64,
}

/// Every pair as served now, and the name index over them.
struct Loaded {
    served: Vec<Arc<Served>>,
    names: NameIndex,
}

impl Loaded {
    fn new(served: Vec<Arc<Served>>) -> Loaded {
        let names = NameIndex::new(served.iter().map(|entry| entry.names.as_slice()));
        Loaded { served, names }
    }

    /// The certificate for `server_name`, or the first.
    fn pick(&self, server_name: Option<&str>) -> Option<&Arc<Served>> {
        self.served.get(self.names.pick(server_name))
    }
}

/// Exact and wildcard names to the index of the first certificate that has them.
struct NameIndex(HashMap<String, usize>);

impl NameIndex {
    /// `names`: each certificate's names, lowercase, in the configured order.
    fn new<'a>(names: impl Iterator<Item = &'a [String]>) -> NameIndex {
        let mut by_name = HashMap::new();
        for (index, names) in names.enumerate() {
            for name in names {
                by_name.entry(name.clone()).or_insert(index);
            }
        }
        NameIndex(by_name)
    }

    /// The index of the certificate for `server_name` (any case): an exact name, else a
    /// wildcard one label up, else 0.
    fn pick(&self, server_name: Option<&str>) -> usize {
        let found = server_name.and_then(|name| {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            if let Some(index) = self.0.get(&name) {
                return Some(*index);
            }
            let (_, parent) = name.split_once('.')?;
            self.0.get(&format!("*.{parent}")).copied()
        });
        found.unwrap_or(0)
    }
}

/// A TLS listener's certificates: a rustls certificate resolver for pingora's listener, and a
/// background service that re-reads the files.
pub struct ListenerCertificates {
    listener: String,
    pairs: Vec<CertificatePair>,
    loaded: ArcSwap<Loaded>,
    /// The latest failure to read each pair, so a re-read of a still broken file is not logged
    /// and counted again; held while re-reading, which serialises the watcher and the timer.
    failures: Mutex<Vec<Option<String>>>,
}

impl std::fmt::Debug for ListenerCertificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListenerCertificates")
            .field("listener", &self.listener)
            .field("pairs", &self.pairs)
            .finish()
    }
}

impl ListenerCertificates {
    /// Reads every pair of `tls` for the listener named `listener` (its address, the metrics'
    /// `listener` label). Every pair must load: an error names each file that does not and why.
    pub fn load(
        listener: &str,
        tls: &ListenerTls,
    ) -> Result<Arc<ListenerCertificates>, CertificateError> {
        let mut served = Vec::with_capacity(tls.certs.len());
        let mut problems = Vec::new();
        for pair in &tls.certs {
            match read_pair(pair) {
                Ok(entry) => served.push(Arc::new(entry)),
                Err(e) => problems.push(e),
            }
        }
        if !problems.is_empty() {
            let problems: Vec<String> = problems.into_iter().map(|e| e.0).collect();
            return Err(CertificateError(problems.join("; ")));
        }
        if served.is_empty() {
            return Err(CertificateError(
                "a TLS listener needs at least one certificate".to_string(),
            ));
        }
        let certificates = ListenerCertificates {
            listener: listener.to_string(),
            pairs: tls.certs.clone(),
            loaded: ArcSwap::from_pointee(Loaded::new(served)),
            failures: Mutex::new(vec![None; tls.certs.len()]),
        };
        Ok(Arc::new(certificates))
    }

    /// Checks that every pair of `tls` loads, without keeping anything (what `validate` does).
    pub fn check(tls: &ListenerTls) -> Result<(), CertificateError> {
        Self::load("", tls).map(drop)
    }

    /// Publishes each certificate's expiry (`robotsguard_tls_certificate_expiry_timestamp_seconds`).
    pub fn publish(&self) {
        for served in self.loaded.load().served.iter() {
            METRICS
                .tls_certificate_expiry
                .with_label_values(&[self.listener.as_str(), served.label.as_str()])
                .set(served.not_after as f64);
        }
    }

    /// The names each certificate answers for, in the configured order.
    pub fn names(&self) -> Vec<Vec<String>> {
        self.loaded
            .load()
            .served
            .iter()
            .map(|served| served.names.clone())
            .collect()
    }

    /// Reads every pair again. A pair that changed and loads replaces the one served; one that
    /// no longer loads keeps it, logged and counted (`robotsguard_tls_certificate_reloads_total`).
    pub fn reload(&self) {
        let Ok(mut failures) = self.failures.lock() else {
            return;
        };
        let current = self.loaded.load_full();
        let mut served = current.served.clone();
        let mut changed = false;
        for (index, pair) in self.pairs.iter().enumerate() {
            let Some(old) = served.get(index).cloned() else {
                continue;
            };
            let read = read_pair(pair);
            let failure = read.as_ref().err().map(|e| e.0.clone());
            let repeated = failure.is_some() && failures.get(index) == Some(&failure);
            if let Some(slot) = failures.get_mut(index) {
                *slot = failure;
            }
            match read {
                Ok(new) if new.fingerprint == old.fingerprint => {}
                Ok(new) => {
                    tracing::info!(
                        listener = %self.listener,
                        cert = %pair.cert.display(),
                        names = %new.names.join(", "),
                        expires = new.not_after,
                        "TLS certificate reloaded"
                    );
                    self.count(true);
                    if new.label != old.label {
                        let _ = METRICS
                            .tls_certificate_expiry
                            .remove_label_values(&[self.listener.as_str(), old.label.as_str()]);
                    }
                    served[index] = Arc::new(new);
                    changed = true;
                }
                Err(e) => {
                    // Also when only one of the two files has been written so far: the next
                    // change, or the next re-read, tries again.
                    if !repeated {
                        tracing::warn!(
                            listener = %self.listener,
                            "TLS certificate not reloaded, the previous one is still served: {e}"
                        );
                        self.count(false);
                    }
                }
            }
        }
        if changed {
            self.loaded.store(Arc::new(Loaded::new(served)));
        }
        self.publish();
    }

    fn count(&self, loaded: bool) {
        METRICS
            .tls_certificate_reloads
            .with_label_values(&[
                self.listener.as_str(),
                if loaded { "loaded" } else { "failed" },
            ])
            .inc();
    }

    /// The directories holding the pairs' files.
    fn directories(&self) -> Vec<PathBuf> {
        let mut directories: Vec<PathBuf> = self
            .pairs
            .iter()
            .flat_map(|pair| [directory_of(&pair.cert), directory_of(&pair.key)])
            .collect();
        directories.sort();
        directories.dedup();
        directories
    }

    /// Re-reads the files on every change in their directories and every [`REREAD_INTERVAL`],
    /// until `shutdown`.
    pub async fn watch(&self, mut shutdown: tokio::sync::watch::Receiver<bool>) {
        let debouncer = Arc::new(Debouncer::default());
        let watcher = match DirectoryWatcher::new() {
            Ok(watcher) => Some(watcher),
            Err(e) => {
                tracing::warn!(
                    listener = %self.listener,
                    "TLS certificate files are not watched, only re-read every {}s: {e}",
                    REREAD_INTERVAL.as_secs()
                );
                None
            }
        };
        for directory in self.directories() {
            let Some(watcher) = &watcher else { break };
            let sink_debouncer = debouncer.clone();
            if let Err(e) = watcher.add(
                &directory,
                Box::new(move |_, change| sink_debouncer.record(change)),
            ) {
                tracing::warn!(
                    listener = %self.listener,
                    directory = %directory.display(),
                    "TLS certificate directory not watched, re-read every {}s: {e}",
                    REREAD_INTERVAL.as_secs()
                );
            }
        }
        let mut reread = tokio::time::interval(REREAD_INTERVAL);
        reread.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        reread.tick().await;
        loop {
            tokio::select! {
                _ = shutdown.wait_for(|stop| *stop) => return,
                _ = debouncer.next() => {}
                _ = reread.tick() => {}
            }
            // A directory reached through a link that was swapped (a Secret's `tls ->
            // ..data/tls`) is another directory now: watch where the link points first, so a
            // change made while reading is not missed.
            for directory in self.directories() {
                if let Some(watcher) = &watcher {
                    if let Err(e) = watcher.rewatch(&directory) {
                        tracing::debug!(directory = %directory.display(), "rewatch: {e}");
                    }
                }
            }
            self.reload();
        }
    }
}

impl ResolvesServerCert for ListenerCertificates {
    fn resolve(&self, client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let loaded = self.loaded.load();
        loaded
            .pick(client_hello.server_name())
            .map(|served| served.key.clone())
    }
}

#[async_trait]
impl BackgroundService for ListenerCertificates {
    async fn start(&self, shutdown: ShutdownWatch) {
        // Both series from the start, so a rate over them is never over a missing series.
        for result in ["loaded", "failed"] {
            METRICS
                .tls_certificate_reloads
                .with_label_values(&[self.listener.as_str(), result])
                .inc_by(0);
        }
        self.publish();
        self.watch(shutdown).await;
    }
}

/// Reads one pair: a PEM certificate chain (leaf first) and the PEM private key that fits it.
fn read_pair(pair: &CertificatePair) -> Result<Served, CertificateError> {
    let cert_bytes = read_file(&pair.cert, "certificate")?;
    let key_bytes = read_file(&pair.key, "private key")?;
    let mut chain = Vec::new();
    for (index, cert) in CertificateDer::pem_slice_iter(&cert_bytes).enumerate() {
        let cert = cert.map_err(|e| {
            CertificateError(format!(
                "`{}`: certificate {}: {e}",
                pair.cert.display(),
                index + 1
            ))
        })?;
        chain.push(cert);
    }
    let Some(leaf) = chain.first() else {
        return Err(CertificateError(format!(
            "`{}` holds no PEM certificate",
            pair.cert.display()
        )));
    };
    let (names, not_after) = leaf_facts(leaf.as_ref()).map_err(|e| {
        CertificateError(format!(
            "`{}`: the first certificate is not X.509: {e}",
            pair.cert.display()
        ))
    })?;
    let key = PrivateKeyDer::from_pem_slice(&key_bytes).map_err(|e| {
        CertificateError(format!(
            "`{}` holds no usable PEM private key (PKCS#1, PKCS#8 or SEC1): {e}",
            pair.key.display()
        ))
    })?;
    pingora::tls::install_default_crypto_provider();
    let provider = CryptoProvider::get_default().ok_or_else(|| {
        CertificateError("no TLS crypto provider is installed (a programming error)".to_string())
    })?;
    let key = CertifiedKey::from_der(chain, key, provider).map_err(|e| {
        CertificateError(format!(
            "the key `{}` does not fit the certificate `{}`: {e}",
            pair.key.display(),
            pair.cert.display()
        ))
    })?;
    let label = names.first().cloned().unwrap_or_else(|| {
        pair.cert
            .file_name()
            .map_or_else(String::new, |name| name.to_string_lossy().into_owned())
    });
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    cert_bytes.hash(&mut hasher);
    key_bytes.hash(&mut hasher);
    Ok(Served {
        key: Arc::new(key),
        names,
        label,
        not_after,
        fingerprint: hasher.finish(),
    })
}

/// Certificate and key files are small; anything larger is not one.
const MAX_FILE_BYTES: u64 = 1 << 20;

fn read_file(path: &Path, what: &str) -> Result<Vec<u8>, CertificateError> {
    let cannot = |e: &dyn std::fmt::Display| {
        CertificateError(format!(
            "cannot read the TLS {what} `{}`: {e}",
            path.display()
        ))
    };
    let length = std::fs::metadata(path).map_err(|e| cannot(&e))?.len();
    if length > MAX_FILE_BYTES {
        return Err(cannot(&format!("larger than {MAX_FILE_BYTES} bytes")));
    }
    std::fs::read(path).map_err(|e| cannot(&e))
}

/// The leaf certificate's DNS names (lowercase; the common name when it has no subjectAltName)
/// and its expiry in Unix seconds.
fn leaf_facts(der: &[u8]) -> Result<(Vec<String>, i64), String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).map_err(|e| e.to_string())?;
    let mut names = Vec::new();
    if let Ok(Some(alt)) = cert.subject_alternative_name() {
        for name in &alt.value.general_names {
            if let x509_parser::extensions::GeneralName::DNSName(dns) = name {
                names.push(dns.trim_end_matches('.').to_ascii_lowercase());
            }
        }
    }
    if names.is_empty() {
        names.extend(
            cert.subject()
                .iter_common_name()
                .filter_map(|cn| cn.as_str().ok())
                .map(|cn| cn.trim_end_matches('.').to_ascii_lowercase()),
        );
    }
    names.dedup();
    Ok((names, cert.validity().not_after.timestamp()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(certificates: &[&[&str]]) -> NameIndex {
        let owned: Vec<Vec<String>> = certificates
            .iter()
            .map(|names| names.iter().map(|n| n.to_string()).collect())
            .collect();
        NameIndex::new(owned.iter().map(Vec::as_slice))
    }

    #[test]
    fn exact_names_win_over_wildcards_and_the_first_is_the_default() {
        let names = index(&[
            &["shop.example"],
            &["*.blog.example", "blog.example"],
            &["www.blog.example"],
        ]);
        assert_eq!(names.pick(Some("shop.example")), 0);
        assert_eq!(names.pick(Some("SHOP.Example.")), 0);
        assert_eq!(names.pick(Some("blog.example")), 1);
        assert_eq!(names.pick(Some("a.blog.example")), 1);
        assert_eq!(names.pick(Some("www.blog.example")), 2);
        // A wildcard covers one label only.
        assert_eq!(names.pick(Some("a.b.blog.example")), 0);
        assert_eq!(names.pick(Some("other.example")), 0);
        assert_eq!(names.pick(Some("example")), 0);
        assert_eq!(names.pick(None), 0);
    }

    #[test]
    fn an_earlier_certificate_keeps_a_name_two_have() {
        let names = index(&[&["a.example"], &["b.example", "a.example"]]);
        assert_eq!(names.pick(Some("a.example")), 0);
        assert_eq!(names.pick(Some("b.example")), 1);
    }
}
