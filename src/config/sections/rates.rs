//! `policy.rates`: operators' rate budgets per crawler, category or purpose (`60/m`).

use super::*;

pub(crate) static RATE_RULE: Section = Section {
    id: "rate_rule",
    place: "in a rate budget",
    title: "A rate budget",
    doc: "The long form of a `policy.rates` entry: `Googlebot: {rate: 600/m, per: crawler}`.",
    keys: &[
        required("rate", Ty::Str, "`N/s`, `N/m` or `N/h` (N from 1 to 1,000,000): at most N requests a second, a minute or an hour, N of them at once."),
        key("per", Ty::Words(|| names(&RATE_PER)), "`client`", "`client`: one budget per client network (`crawl_delay.prefix`) and crawler; `crawler`: one budget for the crawler across all its addresses, for requests verified as the crawler (a claim not verified keeps one per client network, so that an impostor cannot spend the real crawler's budget)."),
    ],
};

/// The most requests a rate may name per period.
pub const MAX_RATE_LIMIT: u32 = 1_000_000;

/// Whose requests share one rate budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RatePer {
    /// One budget per client network and crawler.
    Client,
    /// One budget per crawler (verified requests), whatever the address.
    Crawler,
}

impl RatePer {
    /// The spelling used in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            RatePer::Client => "client",
            RatePer::Crawler => "crawler",
        }
    }
}

/// The spellings of `per`.
pub(crate) const RATE_PER: [(&str, RatePer); 2] =
    [("client", RatePer::Client), ("crawler", RatePer::Crawler)];

/// One rate budget: at most `limit` requests per `period`, `limit` of them at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RateRule {
    /// Requests per period.
    pub limit: u32,
    /// The period: a second, a minute or an hour.
    pub period: Duration,
    /// Whose requests share the budget.
    pub per: RatePer,
}

impl RateRule {
    /// The rate as written: `60/m`.
    pub fn rate_text(&self) -> String {
        let unit = match self.period.as_secs() {
            1 => "s",
            60 => "m",
            _ => "h",
        };
        format!("{}/{unit}", self.limit)
    }

    /// The period in words: `second`, `minute` or `hour`.
    pub fn period_word(&self) -> &'static str {
        match self.period.as_secs() {
            1 => "second",
            60 => "minute",
            _ => "hour",
        }
    }

    /// Whether this rule admits fewer requests over time than `other`.
    fn stricter_than(&self, other: &RateRule) -> bool {
        // limit / period compared without division: a/p < b/q ⟺ a·q < b·p.
        u128::from(self.limit) * other.period.as_millis()
            < u128::from(other.limit) * self.period.as_millis()
    }
}

/// What a rate rule was written for, most specific first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RateScope {
    /// A crawler's catalogue name.
    Crawler,
    /// A crawler category.
    Category,
    /// A purpose the crawler serves.
    Purpose,
}

impl RateScope {
    /// `crawler`, `category` or `purpose`: the `rule` label of
    /// `robotsguard_rate_budget_refusals_total`.
    pub fn as_str(self) -> &'static str {
        match self {
            RateScope::Crawler => "crawler",
            RateScope::Category => "category",
            RateScope::Purpose => "purpose",
        }
    }
}

/// `policy.rates`: rate budgets per crawler name, category and purpose.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct RatesConfig {
    /// Per crawler, as the catalogue spells its name (compared case-insensitively).
    pub crawlers: Vec<(String, RateRule)>,
    /// Per category, indexed by [`Category::index`].
    pub categories: [Option<RateRule>; Category::ALL.len()],
    /// Per purpose, indexed by [`Purpose::index`].
    pub purposes: [Option<RateRule>; Purpose::ALL.len()],
}

impl RatesConfig {
    /// Whether no budget is written (most configs: one comparison per request).
    pub fn is_empty(&self) -> bool {
        self.crawlers.is_empty()
            && self.categories.iter().all(Option::is_none)
            && self.purposes.iter().all(Option::is_none)
    }

    /// The budget for a crawler: its name's, else its category's, else the strictest of its
    /// purposes'; with the key it was written under.
    pub fn rule_for(
        &self,
        name: &str,
        category: Category,
        purposes: crate::crawlers::Purposes,
    ) -> Option<(RateRule, RateScope)> {
        if let Some((_, rule)) = self
            .crawlers
            .iter()
            .find(|(crawler, _)| crawler.eq_ignore_ascii_case(name))
        {
            return Some((*rule, RateScope::Crawler));
        }
        if let Some(rule) = self.categories[category.index()] {
            return Some((rule, RateScope::Category));
        }
        purposes
            .iter()
            .filter_map(|purpose| self.purposes[purpose.index()])
            .reduce(|a, b| if b.stricter_than(&a) { b } else { a })
            .map(|rule| (rule, RateScope::Purpose))
    }
}

/// Reads `policy.rates` over `base`, entry by entry: a key is a crawler's name, else a category
/// (a word that is both a category and a purpose, `search` or `other`, sets both), else a
/// purpose.
pub(crate) fn rates(
    sink: &mut Sink,
    node: Option<&Node>,
    base: &RatesConfig,
    known: &KnownCrawlers,
) -> RatesConfig {
    let mut out = base.clone();
    for (key, key_pos, value) in map_entries(sink, node, "rates") {
        let category = Category::ALL.iter().copied().find(|c| c.as_str() == key);
        let purpose = Purpose::ALL.iter().copied().find(|p| p.as_str() == key);
        let crawler = if category.is_none() && purpose.is_none() {
            match known.find(key).or(known.open.then_some(key)) {
                Some(name) => Some(name),
                None => {
                    let words: Vec<&str> = Category::ALL
                        .iter()
                        .map(|c| c.as_str())
                        .chain(Purpose::ALL.iter().map(|p| p.as_str()))
                        .collect();
                    let suggestion = match known.suggest(key) {
                        found if !found.is_empty() => found,
                        _ => did_you_mean(key, &words),
                    };
                    sink.error_hint(
                        key_pos,
                        format!("no crawler, category or purpose is named {}{suggestion}", quote(key)),
                        "a key of `rates` is a crawler's name (`robotsguard identify`), a category (`search`, `ai-training`, ...) or a purpose (`search`, `training`, `agent`, `other`)",
                    );
                    continue;
                }
            }
        } else {
            None
        };
        let Some(rule) = rate_rule(sink, value, key) else {
            continue;
        };
        if let Some(name) = crawler {
            out.crawlers
                .retain(|(existing, _)| !existing.eq_ignore_ascii_case(name));
            out.crawlers.push((name.to_owned(), rule));
        }
        if let Some(category) = category {
            out.categories[category.index()] = Some(rule);
        }
        if let Some(purpose) = purpose {
            out.purposes[purpose.index()] = Some(rule);
        }
    }
    out
}

/// One entry's value: `60/m`, or `{rate: 60/m, per: crawler}`.
fn rate_rule(sink: &mut Sink, node: &Node, key: &str) -> Option<RateRule> {
    if !matches!(node.value, Value::Map(_)) {
        let (limit, period) = rate(sink, node, key)?;
        return Some(RateRule {
            limit,
            period,
            per: RatePer::Client,
        });
    }
    let table = Table::read(sink, node, &RATE_RULE, "a rate budget")?;
    let per = table
        .get("per")
        .and_then(|n| reader::choice(sink, n, "per", &RATE_PER))
        .unwrap_or(RatePer::Client);
    let Some(rate_node) = table.get("rate") else {
        sink.error_hint(
            node.pos,
            format!("`policy.rates.{key}` needs `rate`"),
            format!("e.g. {key}: {{rate: 60/m, per: crawler}}"),
        );
        return None;
    };
    let (limit, period) = rate(sink, rate_node, "rate")?;
    Some(RateRule { limit, period, per })
}

/// `N/s`, `N/m` or `N/h`.
fn rate(sink: &mut Sink, node: &Node, what: &str) -> Option<(u32, Duration)> {
    let hint = "write N/s, N/m or N/h, e.g. 60/m (N from 1 to 1000000)";
    let Value::Str(text) = &node.value else {
        sink.error_hint(
            node.pos,
            format!(
                "`{what}` must be a rate such as `60/m`, not {}",
                node.value.kind()
            ),
            hint,
        );
        return None;
    };
    let parsed = text.split_once('/').and_then(|(count, unit)| {
        let period = match unit {
            "s" => Duration::from_secs(1),
            "m" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            _ => return None,
        };
        if count.is_empty() || !count.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some((count.parse::<u64>().ok(), period))
    });
    match parsed {
        Some((Some(limit), period)) if (1..=u64::from(MAX_RATE_LIMIT)).contains(&limit) => {
            Some((u32::try_from(limit).unwrap_or(MAX_RATE_LIMIT), period))
        }
        Some(_) => {
            sink.error_hint(
                node.pos,
                format!(
                    "rate {} must allow from 1 to {MAX_RATE_LIMIT} requests",
                    quote(text)
                ),
                "to refuse a crawler outright, use `policy.crawlers: {NAME: block}`",
            );
            None
        }
        None => {
            sink.error_hint(node.pos, format!("{} is not a rate", quote(text)), hint);
            None
        }
    }
}
