//! Renders an identification result for people (`describe`) and as an owned, serialisable report (`identify --json`).

use std::fmt::Write as _;

use serde::Serialize;

use super::category::Category;
use super::identify::{GenericRule, Identity, IdentitySource};
use super::purpose::{PurposeControls, Purposes};

/// An [`Identity`] detached from the identifier and the UA, for output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OwnedIdentity {
    /// The crawler's name.
    pub name: String,
    /// The robots.txt tokens it answers to, most specific first.
    pub tokens: Vec<String>,
    /// What its operator uses the pages for.
    pub category: Category,
    /// Who runs it (empty when unknown).
    pub operator: String,
    /// It obeys only groups naming it, not the `*` group.
    pub ignores_global: bool,
    /// What its fetches are for (`search`, `training`, `agent`, `other`).
    pub purposes: Purposes,
    /// Per purpose, the robots.txt token its operator names for refusing that use without
    /// refusing the crawler (`{"training": "Google-Extended"}`).
    #[serde(skip_serializing_if = "PurposeControls::is_empty")]
    pub controls: PurposeControls,
    /// Its operator documents that it ignores `Crawl-delay`.
    pub ignores_crawl_delay: bool,
    /// The stage that identified it.
    pub source: IdentitySource,
    /// The generic rule that matched, for a crawler found by the generic stage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generic_rule: Option<GenericRule>,
    /// Its bounded metric label (the catalogue name, else `other`).
    pub metric_label: String,
    /// The catalogue feed its entry came from (absent: built in or `crawlers.extra`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feed: Option<String>,
}

impl From<&Identity<'_>> for OwnedIdentity {
    fn from(id: &Identity<'_>) -> Self {
        OwnedIdentity {
            name: id.name.to_owned(),
            tokens: id.tokens.to_vec(),
            category: id.category,
            operator: id.operator.to_owned(),
            ignores_global: id.ignores_global,
            purposes: id.purposes,
            controls: id.def.map(|def| def.controls.clone()).unwrap_or_default(),
            ignores_crawl_delay: id.ignores_crawl_delay,
            source: id.source,
            generic_rule: id.generic_rule,
            metric_label: id.metric_label().to_owned(),
            feed: id.def.and_then(|def| def.feed.clone()),
        }
    }
}

/// The JSON shape of an identification: `{"crawler": false}` or `{"crawler": true, ...}`
/// with the [`OwnedIdentity`] fields alongside.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IdentityReport {
    /// Whether the User-Agent is a crawler's.
    pub crawler: bool,
    /// Who, when it is.
    #[serde(flatten)]
    pub identity: Option<OwnedIdentity>,
}

/// The owned report of an identification result.
pub fn report(identity: Option<&Identity<'_>>) -> IdentityReport {
    IdentityReport {
        crawler: identity.is_some(),
        identity: identity.map(OwnedIdentity::from),
    }
}

/// One or two lines for people, e.g.
/// `crawler Googlebot-Image (search, operated by Google), from the catalogue` followed by
/// `robots.txt groups tried: googlebot-image, googlebot, then *`.
pub fn describe(identity: Option<&Identity<'_>>) -> String {
    let Some(id) = identity else {
        return "not a crawler: no catalogue entry, robots.txt name or generic rule matched"
            .to_owned();
    };
    let mut out = format!("crawler {} ({}", id.name, id.category);
    if !id.operator.is_empty() {
        let _ = write!(out, ", operated by {}", id.operator);
    }
    out.push_str("), ");
    match (id.source, id.generic_rule) {
        (IdentitySource::Catalogue, _) => match id.def.and_then(|def| def.feed.as_deref()) {
            Some(feed) => {
                let _ = write!(out, "from the catalogue feed {feed}");
            }
            None => out.push_str("from the catalogue"),
        },
        (IdentitySource::RobotsTxt, _) => out.push_str("named in this site's robots.txt"),
        (IdentitySource::Generic, Some(rule)) => {
            let _ = write!(out, "by the generic rule: {}", rule.explain());
        }
        (IdentitySource::Generic, None) => out.push_str("by a generic rule"),
    }
    out.push_str("\nrobots.txt groups tried: ");
    let mut any = false;
    for token in id.tokens {
        if any {
            out.push_str(", ");
        }
        out.push_str(token);
        any = true;
    }
    if id.ignores_global {
        if !any {
            out.push_str("none");
        }
        out.push_str(" (ignores the * group)");
    } else if any {
        out.push_str(", then *");
    } else {
        out.push_str("only *");
    }
    out.push_str("\npurposes: ");
    for (index, purpose) in id.purposes.iter().enumerate() {
        if index > 0 {
            out.push_str(", ");
        }
        out.push_str(purpose.as_str());
    }
    if id.ignores_crawl_delay {
        out.push_str(" (ignores Crawl-delay)");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Identifier, RobotsTokenScanner};

    fn identifier() -> Identifier {
        match Identifier::builtin(true) {
            Ok(i) => i,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn describes_each_source() {
        let idf = identifier();
        let id = idf.identify(b"Googlebot-Image/1.0", None);
        assert_eq!(
            describe(id.as_ref()),
            "crawler Googlebot-Image (search, operated by Google), from the catalogue\n\
             robots.txt groups tried: googlebot-image, googlebot, then *\n\
             purposes: search, training (ignores Crawl-delay)"
        );
        let id = idf.identify(b"AdsBot-Google (+http://www.google.com/adsbot.html)", None);
        assert!(describe(id.as_ref()).contains("adsbot-google (ignores the * group)\n"));
        let robots = RobotsTokenScanner::new(["AcmeAgent"]);
        let id = idf.identify(b"AcmeAgent/2", Some(&robots));
        assert_eq!(
            describe(id.as_ref()),
            "crawler AcmeAgent (other), named in this site's robots.txt\n\
             robots.txt groups tried: AcmeAgent, then *\n\
             purposes: other"
        );
        let id = idf.identify(b"", None);
        let text = describe(id.as_ref());
        assert!(
            text.contains("generic rule: the User-Agent is empty"),
            "{text}"
        );
        assert!(
            text.ends_with("robots.txt groups tried: only *\npurposes: other"),
            "{text}"
        );
        assert_eq!(
            describe(None),
            "not a crawler: no catalogue entry, robots.txt name or generic rule matched"
        );
    }

    #[test]
    fn json_report() {
        let idf = identifier();
        let id = idf.identify(b"Googlebot-Image/1.0", None);
        let json = serde_json::to_value(report(id.as_ref())).ok();
        let want = serde_json::json!({
            "crawler": true,
            "name": "Googlebot-Image",
            "tokens": ["googlebot-image", "googlebot"],
            "category": "search",
            "operator": "Google",
            "ignores_global": false,
            "purposes": ["search", "training"],
            "controls": {"training": "Google-Extended"},
            "ignores_crawl_delay": true,
            "source": "catalogue",
            "metric_label": "Googlebot-Image",
        });
        assert_eq!(json, Some(want));

        let id = idf.identify(b"FooScraper/1.0", None);
        let json = serde_json::to_value(report(id.as_ref())).ok();
        let want = serde_json::json!({
            "crawler": true,
            "name": "FooScraper",
            "tokens": ["FooScraper"],
            "category": "other",
            "operator": "",
            "ignores_global": false,
            "purposes": ["other"],
            "ignores_crawl_delay": false,
            "source": "generic",
            "generic_rule": "automation-word",
            "metric_label": "other",
        });
        assert_eq!(json, Some(want));

        let json = serde_json::to_string(&report(None)).ok();
        assert_eq!(json.as_deref(), Some(r#"{"crawler":false}"#));
    }
}
