//! The compiled form of a robots.txt: each distinct set of groups an agent can select becomes one
//! prefix index over its rules, so answering "may this agent fetch this path?" costs a binary search
//! plus the few rules whose literal prefix the path starts with.

use std::collections::HashMap;
use std::time::Duration;

use super::canonical::canonicalize;
use super::parse::{Directive, Group, RobotsTxt};
use super::pattern::{matches_after_prefix, pattern_matches, PatternShape};
use super::prefs::{License, PreferenceLine, Preferences};
use super::url::path_params_query;

/// How paths and patterns are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MatchMode {
    /// Byte for byte as Google's library: what a crawler's own matcher does.
    #[default]
    Exact,
    /// Path and patterns are canonicalised first (see [`super::canonical`]), so evasive spellings
    /// of a disallowed path are still disallowed. What the proxy enforces.
    Canonical,
}

/// Whether a crawler without a group of its own falls back to the `*` group. Google's AdsBot family
/// does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GlobalFallback {
    /// The `*` group applies when no group names the crawler (RFC 9309).
    #[default]
    Use,
    /// Only groups naming the crawler apply.
    Ignore,
}

/// Which group decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupMatch<'a> {
    /// The groups naming this product token (the first of the caller's tokens that has any),
    /// lower-cased as the index stores it.
    Agent(&'a str),
    /// The `*` groups.
    Global,
    /// No group applies: everything is allowed.
    None,
}

/// The rule behind a verdict, as Google's library reports it (`matching_line`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecidingRule<'a> {
    /// The rule's line in the file (1-based).
    pub line: u32,
    /// `Allow` or `Disallow`.
    pub directive: Directive,
    /// The pattern as written in the file after Google's escaping (for an `index.html` rule
    /// applied to its directory, the `index.html` pattern itself).
    pub pattern: &'a str,
}

/// The answer to "may this agent fetch this path?".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verdict<'a> {
    /// Whether the agent may fetch the path.
    pub allowed: bool,
    /// The group that decided.
    pub group: GroupMatch<'a>,
    /// The highest-priority matching rule; can be an empty `Disallow:` on an allowed verdict, as in
    /// Google's library. `None` when no rule matched.
    pub rule: Option<DecidingRule<'a>>,
    /// The `Crawl-delay` of the group that decided (the longest, when several groups name the
    /// agent), if it states one.
    pub crawl_delay: Option<Duration>,
}

impl Verdict<'_> {
    /// The deciding rule's line, if a rule matched.
    pub fn line(&self) -> Option<u32> {
        self.rule.map(|rule| rule.line)
    }
}

const NO_NODE: u32 = u32::MAX;

const FLAG_ANCHORED: u8 = 1;
const FLAG_WILDCARD: u8 = 2;
const FLAG_ALLOW: u8 = 4;

/// A rule in compact form: the compiled size stays within a small multiple of the file. Pattern
/// lengths fit in `u16`: a line keeps at most 16,663 bytes, and escaping at most triples them.
#[derive(Debug, Clone, Copy)]
struct CompiledRule {
    /// The bytes matched against paths, in the arena; their length is the rule's priority.
    match_start: u32,
    /// The pattern shown to people, in the arena (often the same range).
    display_start: u32,
    line: u32,
    match_len: u16,
    display_len: u16,
    literal_prefix: u16,
    flags: u8,
    /// Bytes the path must contain past the literal prefix for a wildcard pattern to match, as a
    /// 64-bit set (see [`byte_set`]): most wildcard rules are skipped with one AND.
    required: u64,
}

/// The preference lines of each set of groups, or `None` when the file has neither preference
/// nor licence lines.
fn compile_prefs(
    parsed: &RobotsTxt,
    sets: &[Vec<u32>],
    mode: MatchMode,
) -> Option<Box<CompiledPrefs>> {
    let any_lines = parsed
        .groups
        .iter()
        .any(|group| !group.preferences.is_empty());
    if !any_lines && parsed.licenses.is_empty() {
        return None;
    }
    let per_index = sets
        .iter()
        .map(|groups| {
            let mut index = IndexPrefs::default();
            let lines = groups
                .iter()
                .flat_map(|&group| parsed.groups[group as usize].preferences.iter());
            for line in lines {
                match &line.path {
                    None => index.group_wide.push(line.clone()),
                    Some(path) => {
                        let form = match mode {
                            MatchMode::Exact => path.clone(),
                            MatchMode::Canonical => {
                                String::from_utf8_lossy(&canonicalize(path.as_bytes())).into_owned()
                            }
                        };
                        index.scoped.push((form, line.clone()));
                    }
                }
            }
            index.group_wide.sort_by_key(|line| line.line);
            // Longest first; a stable sort keeps file order among equals.
            index
                .scoped
                .sort_by_key(|(form, line)| (std::cmp::Reverse(form.len()), line.line));
            index
        })
        .collect();
    Some(Box::new(CompiledPrefs {
        per_index,
        licenses: parsed.licenses.clone(),
    }))
}

/// A 64-bit set of byte classes (`byte % 64`). Distinct bytes may share a bit, which only makes
/// the filter weaker, never wrong.
fn byte_set(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0, |set, &b| set | 1u64 << (b & 63))
}

impl CompiledRule {
    fn shape(&self) -> PatternShape {
        PatternShape {
            literal_prefix: usize::from(self.literal_prefix),
            anchored: self.flags & FLAG_ANCHORED != 0,
            has_wildcard: self.flags & FLAG_WILDCARD != 0,
        }
    }

    fn directive(&self) -> Directive {
        if self.flags & FLAG_ALLOW != 0 {
            Directive::Allow
        } else {
            Directive::Disallow
        }
    }

    fn priority(&self) -> u16 {
        self.match_len
    }
}

/// One prefix in the index: the rules whose literal prefix is exactly these bytes. Its rules run
/// from `rules_start` to the next node's `rules_start`.
#[derive(Debug, Clone, Copy)]
struct Node {
    prefix_start: u32,
    rules_start: u32,
    /// The longest other prefix in the index that is a prefix of this one.
    parent: u32,
    prefix_len: u16,
    /// The highest priority of any rule here or in an ancestor: lets a lookup stop early.
    max_priority_to_root: u16,
}

/// The rules of one set of groups, indexed by literal prefix.
#[derive(Debug, Clone, Default)]
struct RuleIndex {
    /// Sorted by prefix bytes.
    nodes: Vec<Node>,
    /// Rule ids, contiguous per node, each node's run sorted by priority (highest first), then line.
    rule_ids: Vec<u32>,
    /// The longest valid `Crawl-delay` among the set's groups.
    crawl_delay: Option<Duration>,
}

impl RuleIndex {
    fn rules_of(&self, node: usize) -> &[u32] {
        let start = self.nodes[node].rules_start as usize;
        let end = self
            .nodes
            .get(node + 1)
            .map_or(self.rule_ids.len(), |next| next.rules_start as usize);
        &self.rule_ids[start..end]
    }
}

#[derive(Debug, Clone, Copy)]
struct Best {
    priority: i32,
    line: u32,
    rule: u32,
}

impl Best {
    const NONE: Best = Best {
        priority: -1,
        line: 0,
        rule: u32::MAX,
    };
}

/// The first byte of an agent name or token, 0 for an empty one (which sorts first too).
fn first_byte(name: &str) -> u8 {
    name.as_bytes().first().copied().unwrap_or(0)
}

/// A robots.txt compiled for fast verdicts. Immutable; share it behind an `Arc`.
#[derive(Debug, Clone, Default)]
pub struct Robots {
    mode: MatchMode,
    arena: String,
    rules: Vec<CompiledRule>,
    indexes: Vec<RuleIndex>,
    /// Lower-cased agent names with the index their groups compile to, sorted by name.
    agents: Vec<(Box<str>, u32)>,
    /// Where the names starting with each byte begin in `agents`, and at 256 where they end
    /// (empty when there are none): a lookup searches only the names that share the token's
    /// first byte, most often one or two.
    agent_starts: Box<[u32]>,
    global: Option<u32>,
    rule_count: usize,
    /// Some group states a valid `Crawl-delay`.
    any_crawl_delay: bool,
    /// Preference and licence lines, when the file has any: boxed so that a file without them
    /// costs one pointer and its verdicts never look.
    prefs: Option<Box<CompiledPrefs>>,
}

/// The preference lines of each rule index, and the file's licences.
#[derive(Debug, Clone, Default)]
struct CompiledPrefs {
    /// Per rule index (same numbering as `Robots::indexes`).
    per_index: Vec<IndexPrefs>,
    licenses: Vec<License>,
}

/// The preference lines of one set of groups.
#[derive(Debug, Clone, Default)]
struct IndexPrefs {
    group_wide: Vec<PreferenceLine>,
    /// Path-scoped lines with the form their path is matched in, longest first.
    scoped: Vec<(String, PreferenceLine)>,
}

impl Robots {
    /// Parses (first 500 KiB) and compiles for exact, Google-identical matching.
    pub fn parse(body: &[u8]) -> Robots {
        Robots::compile(&RobotsTxt::parse(body), MatchMode::Exact)
    }

    /// Compiles a parsed robots.txt.
    pub fn compile(parsed: &RobotsTxt, mode: MatchMode) -> Robots {
        let mut robots = Robots {
            mode,
            rule_count: parsed.rule_count(),
            ..Robots::default()
        };
        // The group each compiled rule (derived ones included) came from.
        let mut rule_group: Vec<u32> = Vec::with_capacity(parsed.rule_count());
        for (group_id, group) in parsed.groups.iter().enumerate() {
            let added = robots.add_group_rules(group);
            rule_group.extend(std::iter::repeat_n(group_id as u32, added));
        }

        // Agents selecting the same set of groups share one index, so a group naming many agents
        // is indexed once.
        let mut groups_by_agent: HashMap<String, Vec<u32>> = HashMap::new();
        let mut global_groups = Vec::new();
        for (group_id, group) in parsed.groups.iter().enumerate() {
            let group_id = group_id as u32;
            for agent in &group.agents {
                let groups = if agent.global {
                    &mut global_groups
                } else {
                    groups_by_agent
                        .entry(agent.name.to_ascii_lowercase())
                        .or_default()
                };
                if groups.last() != Some(&group_id) {
                    groups.push(group_id);
                }
            }
        }
        let mut agents: Vec<(String, Vec<u32>)> = groups_by_agent.into_iter().collect();
        agents.sort();
        let mut index_of_set: HashMap<Vec<u32>, u32> = HashMap::new();
        let mut sets: Vec<Vec<u32>> = Vec::new();
        let mut intern = |groups: &Vec<u32>, sets: &mut Vec<Vec<u32>>| -> u32 {
            *index_of_set.entry(groups.clone()).or_insert_with(|| {
                sets.push(groups.clone());
                (sets.len() - 1) as u32
            })
        };
        robots.global = (!global_groups.is_empty()).then(|| intern(&global_groups, &mut sets));
        let agent_indexes: Vec<u32> = agents
            .iter()
            .map(|(_, groups)| intern(groups, &mut sets))
            .collect();

        // Sort every rule once by (prefix, priority desc, line); each index then takes its rules
        // in that order, so no index sorts on its own.
        let mut order: Vec<u32> = (0..robots.rules.len() as u32).collect();
        order.sort_by(|&a, &b| {
            let (ra, rb) = (&robots.rules[a as usize], &robots.rules[b as usize]);
            robots
                .prefix_of(ra)
                .cmp(robots.prefix_of(rb))
                .then(rb.priority().cmp(&ra.priority()))
                .then(ra.line.cmp(&rb.line))
        });
        let mut indexes_of_group: Vec<Vec<u32>> = vec![Vec::new(); parsed.groups.len()];
        for (index, groups) in sets.iter().enumerate() {
            for &group in groups.iter() {
                indexes_of_group[group as usize].push(index as u32);
            }
        }
        let mut members: Vec<Vec<u32>> = vec![Vec::new(); sets.len()];
        for &rule in &order {
            for &index in &indexes_of_group[rule_group[rule as usize] as usize] {
                members[index as usize].push(rule);
            }
        }
        robots.indexes = members
            .into_iter()
            .map(|ids| robots.build_index(ids))
            .collect();
        for (index, groups) in robots.indexes.iter_mut().zip(&sets) {
            index.crawl_delay = groups
                .iter()
                .filter_map(|&group| parsed.groups[group as usize].crawl_delay)
                .map(|seconds| {
                    // A year is longer than any cap; it also keeps absurd values representable.
                    Duration::from_secs_f64(seconds.clamp(0.0, 365.0 * 86_400.0))
                })
                .max();
        }
        robots.any_crawl_delay = robots
            .indexes
            .iter()
            .any(|index| index.crawl_delay.is_some());
        robots.prefs = compile_prefs(parsed, &sets, mode);
        robots.agents = agents
            .into_iter()
            .zip(agent_indexes)
            .map(|((name, _), index)| (name.into_boxed_str(), index))
            .collect();
        robots.agent_starts = if robots.agents.is_empty() {
            Box::default()
        } else {
            (0..=256)
                .map(|byte| {
                    let before = robots
                        .agents
                        .partition_point(|(name, _)| usize::from(first_byte(name)) < byte);
                    u32::try_from(before).unwrap_or(u32::MAX)
                })
                .collect()
        };
        robots.arena.shrink_to_fit();
        robots.rules.shrink_to_fit();
        robots
    }

    /// The `Content-Signal` and `Content-Usage` lines that apply to the group behind `verdict`
    /// (a verdict of this robots.txt) on `path` (path and query, as given to
    /// [`Robots::verdict`]): the group's group-wide lines and its path-scoped lines with the
    /// longest matching path. Empty where the verdict disallows the path (aipref: preferences
    /// apply only to paths the group may crawl) or no group applies. See [`crate::prefs`].
    pub fn preferences(&self, verdict: &Verdict<'_>, path: &[u8]) -> Preferences<'_> {
        self.preferences_inner(verdict, path, false)
    }

    /// [`Robots::preferences`] for a path already in canonical form (as given to
    /// [`Robots::verdict_with_canonical_path`]).
    pub fn preferences_with_canonical_path(
        &self,
        verdict: &Verdict<'_>,
        canonical_path: &[u8],
    ) -> Preferences<'_> {
        self.preferences_inner(verdict, canonical_path, true)
    }

    fn preferences_inner(
        &self,
        verdict: &Verdict<'_>,
        path: &[u8],
        already_canonical: bool,
    ) -> Preferences<'_> {
        let Some(prefs) = &self.prefs else {
            return Preferences::default();
        };
        if !verdict.allowed {
            return Preferences::default();
        }
        let index = match verdict.group {
            GroupMatch::Agent(name) => self.find_agent(name).map(|(_, index)| index),
            GroupMatch::Global => self.global,
            GroupMatch::None => None,
        };
        let Some(lines) = index.and_then(|index| prefs.per_index.get(index as usize)) else {
            return Preferences::default();
        };
        let mut scoped = Vec::new();
        if !lines.scoped.is_empty() {
            let path = match self.mode {
                MatchMode::Canonical if !already_canonical => canonicalize(path),
                MatchMode::Exact | MatchMode::Canonical => std::borrow::Cow::Borrowed(path),
            };
            let mut longest = None;
            for (form, line) in &lines.scoped {
                if longest.is_some_and(|length| form.len() < length) {
                    break;
                }
                if !form.is_empty() && pattern_matches(form.as_bytes(), &path) {
                    longest = Some(form.len());
                    scoped.push(line);
                }
            }
            scoped.sort_by_key(|line| line.line);
        }
        Preferences {
            group_wide: &lines.group_wide,
            scoped,
        }
    }

    /// Every `Content-Signal` and `Content-Usage` line of the groups behind `group` (as a
    /// verdict of this robots.txt names it), whatever the path: the group-wide lines, then the
    /// path-scoped ones, each in file order. What the group says about a use anywhere.
    pub fn group_preferences(&self, group: GroupMatch<'_>) -> Vec<&PreferenceLine> {
        let Some(prefs) = &self.prefs else {
            return Vec::new();
        };
        let index = match group {
            GroupMatch::Agent(name) => self.find_agent(name).map(|(_, index)| index),
            GroupMatch::Global => self.global,
            GroupMatch::None => None,
        };
        let Some(lines) = index.and_then(|index| prefs.per_index.get(index as usize)) else {
            return Vec::new();
        };
        let mut scoped: Vec<&PreferenceLine> = lines.scoped.iter().map(|(_, line)| line).collect();
        scoped.sort_by_key(|line| line.line);
        lines.group_wide.iter().chain(scoped).collect()
    }

    /// Whether any group has a `Content-Signal` or `Content-Usage` line.
    pub fn has_preferences(&self) -> bool {
        self.prefs.as_ref().is_some_and(|prefs| {
            prefs
                .per_index
                .iter()
                .any(|index| !index.group_wide.is_empty() || !index.scoped.is_empty())
        })
    }

    /// The file's `License` lines (RSL), in file order.
    pub fn licenses(&self) -> &[License] {
        self.prefs.as_ref().map_or(&[], |prefs| &prefs.licenses)
    }

    /// Whether any group states a valid `Crawl-delay` (when none does, no request of this
    /// robots.txt spends a budget).
    pub fn has_crawl_delay(&self) -> bool {
        self.any_crawl_delay
    }

    /// How paths are compared ([`MatchMode`]).
    pub fn mode(&self) -> MatchMode {
        self.mode
    }

    /// Rules in the file's groups (not counting derived `index.html` rules).
    pub fn rule_count(&self) -> usize {
        self.rule_count
    }

    /// Agent names with a group of their own, lower-cased and sorted.
    pub fn agent_names(&self) -> impl Iterator<Item = &str> {
        self.agents.iter().map(|(name, _)| &**name)
    }

    /// Heap bytes held by the compiled form (the measure behind the "≤ 3× the file" budget).
    pub fn heap_size(&self) -> usize {
        use std::mem::size_of;
        self.arena.capacity()
            + self.rules.capacity() * size_of::<CompiledRule>()
            + self.indexes.capacity() * size_of::<RuleIndex>()
            + self
                .indexes
                .iter()
                .map(|i| {
                    i.nodes.capacity() * size_of::<Node>()
                        + i.rule_ids.capacity() * size_of::<u32>()
                })
                .sum::<usize>()
            + self.agents.capacity() * size_of::<(Box<str>, u32)>()
            + self.agent_starts.len() * size_of::<u32>()
            + self
                .agents
                .iter()
                .map(|(name, _)| name.len())
                .sum::<usize>()
    }

    /// Google's `AllowedByRobots` for one agent and a URL (absolute or a path): the path, params
    /// and query are extracted, then matched.
    pub fn check_url(&self, agent: &str, url: &[u8]) -> Verdict<'_> {
        self.verdict(&[agent], &path_params_query(url))
    }

    /// The verdict for a crawler with ordered product tokens (most specific first): the first token
    /// that has a group of its own selects it; with none, the `*` group applies. `path` is the
    /// path with params and query (see [`path_params_query`]).
    pub fn verdict(&self, tokens: &[&str], path: &[u8]) -> Verdict<'_> {
        self.verdict_with(tokens, path, GlobalFallback::Use)
    }

    /// [`Robots::verdict`], choosing whether the `*` group applies to a crawler without a group
    /// of its own ([`GlobalFallback`]).
    pub fn verdict_with(
        &self,
        tokens: &[&str],
        path: &[u8],
        fallback: GlobalFallback,
    ) -> Verdict<'_> {
        self.verdict_inner(tokens, path, fallback, false)
    }

    /// [`Robots::verdict_with`] for a path the caller has already put in canonical form
    /// ([`super::canonicalize`] or its slash-decoding variant): a canonical-mode copy skips
    /// canonicalizing it again.
    pub fn verdict_with_canonical_path(
        &self,
        tokens: &[&str],
        canonical_path: &[u8],
        fallback: GlobalFallback,
    ) -> Verdict<'_> {
        self.verdict_inner(tokens, canonical_path, fallback, true)
    }

    fn verdict_inner(
        &self,
        tokens: &[&str],
        path: &[u8],
        fallback: GlobalFallback,
        already_canonical: bool,
    ) -> Verdict<'_> {
        let selected = tokens.iter().find_map(|&token| {
            self.find_agent(token)
                .map(|(name, index)| (GroupMatch::Agent(name), index))
        });
        let (group, index) = match (selected, self.global, fallback) {
            (Some(found), _, _) => found,
            (None, Some(global), GlobalFallback::Use) => (GroupMatch::Global, global),
            _ => {
                return Verdict {
                    allowed: true,
                    group: GroupMatch::None,
                    rule: None,
                    crawl_delay: None,
                }
            }
        };
        let path = match self.mode {
            MatchMode::Canonical if !already_canonical => canonicalize(path),
            MatchMode::Exact | MatchMode::Canonical => std::borrow::Cow::Borrowed(path),
        };
        let rule_index = &self.indexes[index as usize];
        let (allow, disallow) = self.best_matches(rule_index, &path);
        // Google's rule: only a non-empty pattern decides; Allow wins ties.
        let disallowed =
            (allow.priority > 0 || disallow.priority > 0) && disallow.priority > allow.priority;
        let deciding = if disallow.priority > allow.priority {
            disallow
        } else {
            allow
        };
        Verdict {
            allowed: !disallowed,
            group,
            rule: (deciding.rule != u32::MAX).then(|| self.deciding_rule(deciding.rule)),
            crawl_delay: rule_index.crawl_delay,
        }
    }

    fn deciding_rule(&self, id: u32) -> DecidingRule<'_> {
        let rule = &self.rules[id as usize];
        let start = rule.display_start as usize;
        DecidingRule {
            line: rule.line,
            directive: rule.directive(),
            pattern: &self.arena[start..start + usize::from(rule.display_len)],
        }
    }

    fn find_agent(&self, token: &str) -> Option<(&str, u32)> {
        let first = usize::from(first_byte(token).to_ascii_lowercase());
        let start = *self.agent_starts.get(first)? as usize;
        let end = *self.agent_starts.get(first + 1)? as usize;
        let bucket = self.agents.get(start..end)?;
        let token = token.as_bytes();
        // Names are stored lower-cased; tokens usually are too (the catalogue's are), so most
        // lookups compare slices directly and only mixed-case tokens fold case byte by byte. A
        // bucket is searched, not scanned: a file may give thousands of names one first byte.
        let found = if token.iter().any(u8::is_ascii_uppercase) {
            bucket.binary_search_by(|(name, _)| {
                let name = name.as_bytes().iter().copied();
                name.cmp(token.iter().map(u8::to_ascii_lowercase))
            })
        } else {
            bucket.binary_search_by(|(name, _)| name.as_bytes().cmp(token))
        };
        found.ok().map(|index| (&*bucket[index].0, bucket[index].1))
    }

    /// Compiles a group's rules (and derived ones) into the rule table; returns how many it added.
    fn add_group_rules(&mut self, group: &Group) -> usize {
        let before = self.rules.len();
        for rule in &group.rules {
            let display_start = self.arena.len() as u32;
            let display = clamp_pattern(&rule.pattern);
            self.arena.push_str(display);
            let display_len = display.len() as u16;
            let main = self.push_match_form(display.as_bytes(), Some((display_start, display_len)));
            self.add_rule(main, display_start, display_len, rule);
            // Google: `Allow: /dir/index.htm[l]` also allows `/dir/` exactly.
            if rule.directive == Directive::Allow {
                if let Some(directory) = index_html_directory(display) {
                    let derived = format!("{directory}$");
                    let form = self.push_match_form(derived.as_bytes(), None);
                    self.add_rule(form, display_start, display_len, rule);
                }
            }
        }
        self.rules.len() - before
    }

    /// Stores the bytes a pattern is matched as (canonicalised in canonical mode) and returns their
    /// range, reusing the display range when it is identical.
    fn push_match_form(&mut self, pattern: &[u8], display: Option<(u32, u16)>) -> (u32, u16) {
        let form = match self.mode {
            MatchMode::Exact => std::borrow::Cow::Borrowed(pattern),
            MatchMode::Canonical => canonicalize(pattern),
        };
        if let Some((start, len)) = display {
            if *form == *self.bytes(start, len) {
                return (start, len);
            }
        }
        let start = self.arena.len() as u32;
        // Patterns are ASCII after escaping, and canonicalisation keeps them ASCII; it only grows
        // a lone `%` (to `%25`), so a pattern stays under 3 × MAX_LINE_BYTES < u16::MAX.
        let text = String::from_utf8_lossy(&form);
        let text = clamp_pattern(&text);
        self.arena.push_str(text);
        (start, text.len() as u16)
    }

    fn add_rule(
        &mut self,
        (match_start, match_len): (u32, u16),
        display_start: u32,
        display_len: u16,
        rule: &super::parse::Rule,
    ) {
        let shape = PatternShape::of(self.bytes(match_start, match_len));
        let mut flags = 0;
        if shape.anchored {
            flags |= FLAG_ANCHORED;
        }
        if shape.has_wildcard {
            flags |= FLAG_WILDCARD;
        }
        if rule.directive == Directive::Allow {
            flags |= FLAG_ALLOW;
        }
        let pattern = self.bytes(match_start, match_len);
        let body = if shape.anchored {
            &pattern[..pattern.len() - 1]
        } else {
            pattern
        };
        let required = byte_set(&body[shape.literal_prefix..]) & !byte_set(b"*");
        self.rules.push(CompiledRule {
            match_start,
            display_start,
            line: rule.line,
            match_len,
            display_len,
            literal_prefix: shape.literal_prefix as u16,
            flags,
            required,
        });
    }

    fn bytes(&self, start: u32, len: u16) -> &[u8] {
        &self.arena.as_bytes()[start as usize..start as usize + usize::from(len)]
    }

    fn prefix_of(&self, rule: &CompiledRule) -> &[u8] {
        self.bytes(rule.match_start, rule.literal_prefix)
    }

    fn node_prefix(&self, node: &Node) -> &[u8] {
        self.bytes(node.prefix_start, node.prefix_len)
    }

    /// Builds the prefix index over rule ids already in (prefix, priority desc, line) order.
    fn build_index(&self, rule_ids: Vec<u32>) -> RuleIndex {
        let mut nodes: Vec<Node> = Vec::new();
        // Ancestors of the current prefix, innermost last; sorted order keeps this a chain.
        let mut ancestors: Vec<u32> = Vec::new();
        let mut start = 0;
        while start < rule_ids.len() {
            let first = &self.rules[rule_ids[start] as usize];
            let prefix = self.prefix_of(first);
            let mut end = start + 1;
            let mut max_priority = first.priority();
            while let Some(&next) = rule_ids.get(end) {
                let next = &self.rules[next as usize];
                if self.prefix_of(next) != prefix {
                    break;
                }
                max_priority = max_priority.max(next.priority());
                end += 1;
            }
            while let Some(&top) = ancestors.last() {
                if prefix.starts_with(self.node_prefix(&nodes[top as usize])) {
                    break;
                }
                ancestors.pop();
            }
            let parent = ancestors.last().copied().unwrap_or(NO_NODE);
            let inherited = match parent {
                NO_NODE => 0,
                parent => nodes[parent as usize].max_priority_to_root,
            };
            nodes.push(Node {
                prefix_start: first.match_start,
                rules_start: start as u32,
                parent,
                prefix_len: first.literal_prefix,
                max_priority_to_root: max_priority.max(inherited),
            });
            ancestors.push((nodes.len() - 1) as u32);
            start = end;
        }
        nodes.shrink_to_fit();
        let mut rule_ids = rule_ids;
        rule_ids.shrink_to_fit();
        RuleIndex {
            nodes,
            rule_ids,
            crawl_delay: None,
        }
    }

    /// The highest-priority matching Allow and Disallow (earliest line on ties).
    fn best_matches(&self, index: &RuleIndex, path: &[u8]) -> (Best, Best) {
        let mut allow = Best::NONE;
        let mut disallow = Best::NONE;
        // Every prefix of `path` in the index sorts at or before the greatest entry ≤ path, and is
        // a prefix of that entry: walking its parent chain visits exactly the candidates.
        let after = index
            .nodes
            .partition_point(|node| self.node_prefix(node) <= path);
        let Some(greatest) = after.checked_sub(1) else {
            return (allow, disallow);
        };
        let common = self
            .node_prefix(&index.nodes[greatest])
            .iter()
            .zip(path)
            .take_while(|(a, b)| a == b)
            .count();
        let mut path_set = None;
        let mut current = greatest as u32;
        while current != NO_NODE {
            let node = &index.nodes[current as usize];
            let bound = i32::from(node.max_priority_to_root);
            if bound < allow.priority && bound < disallow.priority {
                break;
            }
            if usize::from(node.prefix_len) <= common {
                self.match_node(
                    index.rules_of(current as usize),
                    path,
                    &mut path_set,
                    &mut allow,
                    &mut disallow,
                );
            }
            current = node.parent;
        }
        (allow, disallow)
    }

    fn match_node(
        &self,
        rule_ids: &[u32],
        path: &[u8],
        path_set: &mut Option<u64>,
        allow: &mut Best,
        disallow: &mut Best,
    ) {
        for &id in rule_ids {
            let rule = &self.rules[id as usize];
            let priority = i32::from(rule.priority());
            if priority < allow.priority && priority < disallow.priority {
                break;
            }
            let best = match rule.directive() {
                Directive::Allow => &mut *allow,
                Directive::Disallow => &mut *disallow,
            };
            if priority < best.priority || (priority == best.priority && rule.line >= best.line) {
                continue;
            }
            let shape = rule.shape();
            let matched = shape.is_plain_prefix() || {
                let set = *path_set.get_or_insert_with(|| byte_set(path));
                rule.required & !set == 0
                    && matches_after_prefix(
                        self.bytes(rule.match_start, rule.match_len),
                        shape,
                        path,
                    )
            };
            if matched {
                *best = Best {
                    priority,
                    line: rule.line,
                    rule: id,
                };
            }
        }
    }
}

/// Patterns can't outgrow `u16` (see [`CompiledRule`]); this cut only guards the invariant.
fn clamp_pattern(pattern: &str) -> &str {
    &pattern[..pattern.len().min(usize::from(u16::MAX))]
}

/// For `…/index.htm…` (after the last `/`), the directory prefix `…/` that Google also allows.
fn index_html_directory(pattern: &str) -> Option<&str> {
    let slash = pattern.rfind('/')?;
    pattern[slash..]
        .starts_with("/index.htm")
        .then(|| &pattern[..=slash])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deciding_group_gives_the_crawl_delay() {
        let robots = Robots::parse(
            b"User-agent: a\nCrawl-delay: 2\nDisallow: /x\n\n\
              User-agent: a\nUser-agent: b\nCrawl-delay: 5.5\nDisallow: /y\n\n\
              User-agent: c\nDisallow: /\n\n\
              User-agent: *\nCrawl-delay: 1\n",
        );
        let delay = |agent: &str| robots.verdict(&[agent], b"/page").crawl_delay;
        // Groups naming the same agent merge; the longest delay stands. (A `Crawl-delay` line
        // does not end a group's agent list, as a rule does: hence the `Disallow: /y`.)
        assert_eq!(delay("a"), Some(Duration::from_millis(5500)));
        assert_eq!(delay("b"), Some(Duration::from_millis(5500)));
        assert_eq!(delay("c"), None);
        assert_eq!(delay("other"), Some(Duration::from_secs(1)));
        assert_eq!(
            robots.verdict(&["a"], b"/x").crawl_delay,
            Some(Duration::from_millis(5500))
        );
        let none = Robots::parse(b"User-agent: a\nDisallow: /x\n");
        assert_eq!(none.verdict(&["other"], b"/").crawl_delay, None);
        assert!(robots.has_crawl_delay());
        assert!(!none.has_crawl_delay());
    }

    /// Every agent is found by its own name in any ASCII case, whichever byte it starts with
    /// (`-`, `_`, names sharing a first byte, a name that is a prefix of another), and a near
    /// miss finds none.
    #[test]
    fn agents_are_found_by_name_in_any_case_and_near_misses_are_not() {
        let names = [
            "-dash",
            "_under",
            "a",
            "ab",
            "abc",
            "AdsBot",
            "Googlebot",
            "googlebot-image",
            "GPTBot",
            "z",
            "zz-top",
        ];
        let mut text = String::new();
        for (line, name) in names.iter().enumerate() {
            text.push_str(&format!("User-agent: {name}\nDisallow: /only-{line}\n\n"));
        }
        let robots = Robots::parse(text.as_bytes());
        for (line, name) in names.iter().enumerate() {
            let path = format!("/only-{line}");
            for spelling in [
                name.to_string(),
                name.to_ascii_lowercase(),
                name.to_ascii_uppercase(),
            ] {
                let verdict = robots.verdict(&[&spelling], path.as_bytes());
                assert!(!verdict.allowed, "{spelling} was not found");
                assert_eq!(
                    verdict.group,
                    GroupMatch::Agent(&name.to_ascii_lowercase()),
                    "{spelling}"
                );
            }
        }
        for miss in [
            "",
            "-",
            "_",
            "abcd",
            "aa",
            "googlebo",
            "googlebot-imag",
            "zzz",
            "\u{e9}",
        ] {
            assert_eq!(
                robots.verdict(&[miss], b"/only-0").group,
                GroupMatch::None,
                "{miss:?} matched a group"
            );
        }
        let empty = Robots::parse(b"Disallow: /\n");
        assert_eq!(empty.verdict(&["a"], b"/").group, GroupMatch::None);
    }

    /// A file whose agents all share a first byte and a length (the worst case for a lookup)
    /// still finds each of them, in any case, and no near miss.
    #[test]
    fn agents_sharing_a_first_byte_are_each_found() {
        let letters = |n: usize| -> String {
            let alphabet = b"abcdefghijklmnopqrstuvwxyz";
            (0..3)
                .map(|place| char::from(alphabet[n / 26usize.pow(place) % 26]))
                .collect()
        };
        let names: Vec<String> = (0..2000).map(|n| format!("g{}", letters(n))).collect();
        let mut text = String::new();
        for name in &names {
            text.push_str(&format!("User-agent: {name}\n"));
        }
        text.push_str("Disallow: /shared\n");
        let robots = Robots::parse(text.as_bytes());
        for name in names.iter().step_by(7) {
            for spelling in [name.clone(), name.to_ascii_uppercase()] {
                let verdict = robots.verdict(&[&spelling], b"/shared");
                assert_eq!(verdict.group, GroupMatch::Agent(name), "{spelling}");
                assert!(!verdict.allowed, "{spelling}");
            }
        }
        for miss in ["gzzzz", "gzz", "g", "ga-a"] {
            assert_eq!(
                robots.verdict(&[miss], b"/shared").group,
                GroupMatch::None,
                "{miss}"
            );
        }
    }

    #[test]
    fn a_groups_preference_lines_whatever_the_path() {
        let robots = Robots::parse(
            b"User-agent: *\nContent-Usage: /b/ train-ai=y\nContent-Signal: ai-train=no\n\
              Content-Usage: /a/ train-ai=n\nDisallow: /a/\n\nUser-agent: bot\nAllow: /\n",
        );
        let lines: Vec<u32> = robots
            .group_preferences(GroupMatch::Global)
            .iter()
            .map(|line| line.line)
            .collect();
        // Group-wide first, then path-scoped in file order; a disallowed path's line too.
        assert_eq!(lines, [3, 2, 4]);
        assert!(robots
            .group_preferences(GroupMatch::Agent("bot"))
            .is_empty());
        assert!(robots.group_preferences(GroupMatch::None).is_empty());
        assert!(Robots::parse(b"User-agent: *\nAllow: /\n")
            .group_preferences(GroupMatch::Global)
            .is_empty());
    }
}
