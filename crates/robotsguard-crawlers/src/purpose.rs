//! What a crawler's fetches are for, in the terms sites now choose by (Cloudflare's Search /
//! Agent / Training controls): a crawler may serve several purposes and is judged under each.

use serde::{Deserialize, Serialize};

use super::category::Category;

/// One purpose a crawler's fetches serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[repr(u8)]
pub enum Purpose {
    /// Building a search index (classic or AI search) that links back.
    Search,
    /// Collecting pages to train or fine-tune models.
    Training,
    /// Fetching on a person's behalf, in real time (assistants, browsing agents).
    Agent,
    /// Anything else: previews, SEO, archives, monitors, libraries.
    Other,
}

impl Purpose {
    /// Every purpose, in config order.
    pub const ALL: [Purpose; 4] = [
        Purpose::Search,
        Purpose::Training,
        Purpose::Agent,
        Purpose::Other,
    ];

    /// The spelling used in the catalogue, config, logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Purpose::Search => "search",
            Purpose::Training => "training",
            Purpose::Agent => "agent",
            Purpose::Other => "other",
        }
    }

    /// This purpose's position in [`Purpose::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for Purpose {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A set of purposes (a bit per [`Purpose`]); copying it costs nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Purposes(u8);

impl Purposes {
    /// The set holding `purposes`.
    pub fn of(purposes: &[Purpose]) -> Purposes {
        Purposes(purposes.iter().fold(0, |bits, p| bits | 1 << p.index()))
    }

    /// What a crawler of `category` is for, when its entry lists no purposes: search engines
    /// and AI search indexers search, AI training collectors train, AI assistants' fetchers act
    /// for a person, everyone else is `other`.
    pub fn from_category(category: Category) -> Purposes {
        Purposes::of(&[match category {
            Category::Search | Category::AiSearch => Purpose::Search,
            Category::AiTraining => Purpose::Training,
            Category::AiAssistant => Purpose::Agent,
            _ => Purpose::Other,
        }])
    }

    /// Whether `purpose` is in the set.
    pub fn contains(self, purpose: Purpose) -> bool {
        self.0 & (1 << purpose.index()) != 0
    }

    /// The set with `purpose` added.
    pub fn with(self, purpose: Purpose) -> Purposes {
        Purposes(self.0 | 1 << purpose.index())
    }

    /// How many purposes the set holds.
    pub fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The purposes in the set, in [`Purpose::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = Purpose> {
        Purpose::ALL.into_iter().filter(move |p| self.contains(*p))
    }

    /// `search+training`: the set in one word, for logs and `/explain`.
    pub fn joined(self) -> String {
        self.iter()
            .map(Purpose::as_str)
            .collect::<Vec<_>>()
            .join("+")
    }
}

impl Serialize for Purposes {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

/// The robots.txt tokens by which a crawler's operator lets a site refuse some of its purposes
/// without refusing the crawler: Google's training use of what Googlebot fetches is governed by
/// a `Google-Extended` group, not by Googlebot's own group. Written as a mapping from purpose to
/// token (`{training: Google-Extended}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct PurposeControls(Vec<(Purpose, String)>);

impl PurposeControls {
    /// The controls `pairs` name, in [`Purpose::ALL`] order (a purpose named twice keeps its
    /// last token).
    pub fn of<'a>(pairs: impl IntoIterator<Item = (Purpose, &'a str)>) -> PurposeControls {
        let mut out: Vec<(Purpose, String)> = Vec::new();
        for (purpose, token) in pairs {
            out.retain(|(existing, _)| *existing != purpose);
            out.push((purpose, token.to_string()));
        }
        out.sort_by_key(|(purpose, _)| *purpose);
        PurposeControls(out)
    }

    /// The token that controls `purpose`, when the operator names one.
    pub fn token(&self, purpose: Purpose) -> Option<&str> {
        self.0
            .iter()
            .find(|(p, _)| *p == purpose)
            .map(|(_, token)| token.as_str())
    }

    /// Every `(purpose, token)` pair, in [`Purpose::ALL`] order.
    pub fn iter(&self) -> impl Iterator<Item = (Purpose, &str)> {
        self.0
            .iter()
            .map(|(purpose, token)| (*purpose, token.as_str()))
    }

    /// The purposes a token controls.
    pub fn purposes(&self) -> Purposes {
        Purposes(self.0.iter().fold(0, |bits, (p, _)| bits | 1 << p.index()))
    }

    /// Whether no purpose has a token.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for PurposeControls {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for PurposeControls {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = std::collections::BTreeMap::<Purpose, String>::deserialize(deserializer)?;
        Ok(PurposeControls::of(
            map.iter()
                .map(|(purpose, token)| (*purpose, token.as_str())),
        ))
    }
}

/// Whether `token` can name a robots.txt group exactly: robots.txt reads a `User-agent` value
/// up to its first character outside `[A-Za-z_-]`, so a token with any other character could
/// never be matched as written.
pub fn is_group_token(token: &str) -> bool {
    !token.is_empty()
        && token
            .bytes()
            .all(|b| b.is_ascii_alphabetic() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_and_category_defaults() {
        let set = Purposes::of(&[Purpose::Training, Purpose::Search]);
        assert_eq!(
            set.iter().collect::<Vec<_>>(),
            vec![Purpose::Search, Purpose::Training]
        );
        assert_eq!(set.joined(), "search+training");
        assert!(!set.contains(Purpose::Agent));
        assert_eq!(
            Purposes::from_category(Category::AiAssistant),
            Purposes::of(&[Purpose::Agent])
        );
        assert_eq!(
            Purposes::from_category(Category::Seo),
            Purposes::of(&[Purpose::Other])
        );
    }

    #[test]
    fn controls_keep_one_token_per_purpose_in_order() {
        let controls = PurposeControls::of([
            (Purpose::Training, "Old-Token"),
            (Purpose::Search, "Search-Token"),
            (Purpose::Training, "Google-Extended"),
        ]);
        assert_eq!(controls.token(Purpose::Training), Some("Google-Extended"));
        assert_eq!(controls.token(Purpose::Agent), None);
        assert_eq!(
            controls.iter().collect::<Vec<_>>(),
            vec![
                (Purpose::Search, "Search-Token"),
                (Purpose::Training, "Google-Extended")
            ]
        );
        assert_eq!(
            controls.purposes(),
            Purposes::of(&[Purpose::Search, Purpose::Training])
        );
        assert!(is_group_token("Applebot-Extended"));
        assert!(!is_group_token("Bot2"));
        assert!(!is_group_token(""));
    }
}
