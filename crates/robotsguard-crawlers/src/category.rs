//! The category of a crawler: what its operator uses the fetched pages for.

use serde::{Deserialize, Serialize};

/// Why a crawler fetches pages. Used as a bounded metric label and in explanations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[repr(usize)]
#[non_exhaustive]
pub enum Category {
    /// Search engines' indexers (Googlebot, Bingbot).
    Search,
    /// Collectors of AI training data (GPTBot, CCBot).
    AiTraining,
    /// Indexers for AI search and answers (OAI-SearchBot, PerplexityBot).
    AiSearch,
    /// User-triggered fetchers of AI assistants.
    AiAssistant,
    /// SEO and marketing tools' crawlers (AhrefsBot, SemrushBot).
    Seo,
    /// Link-preview fetchers of social networks and messengers.
    Social,
    /// Web archives (ia_archiver, archive.org_bot).
    Archive,
    /// Uptime and performance monitors.
    Monitoring,
    /// HTTP client libraries, command-line tools and headless browsers.
    Library,
    /// Crawlers of no category above, and crawlers outside the catalogue.
    Other,
}

impl Category {
    /// Whether it is a tool rather than a crawler: an HTTP library or an uptime monitor. A
    /// User-Agent naming a crawler beside a tool is decided as the crawler.
    pub fn is_tool(self) -> bool {
        matches!(self, Category::Library | Category::Monitoring)
    }

    /// Every category, in [`Category::index`] order.
    pub const ALL: [Category; 10] = [
        Category::Search,
        Category::AiTraining,
        Category::AiSearch,
        Category::AiAssistant,
        Category::Seo,
        Category::Social,
        Category::Archive,
        Category::Monitoring,
        Category::Library,
        Category::Other,
    ];

    /// This category's position in [`Category::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The label used in metrics, logs and config (`ai-training`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Search => "search",
            Category::AiTraining => "ai-training",
            Category::AiSearch => "ai-search",
            Category::AiAssistant => "ai-assistant",
            Category::Seo => "seo",
            Category::Social => "social",
            Category::Archive => "archive",
            Category::Monitoring => "monitoring",
            Category::Library => "library",
            Category::Other => "other",
        }
    }
}

impl std::fmt::Display for Category {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_is_the_position_in_all() {
        for (position, category) in Category::ALL.iter().enumerate() {
            assert_eq!(category.index(), position, "{category}");
        }
    }
}
