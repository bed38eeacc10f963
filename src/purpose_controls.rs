//! The robots.txt groups robotsguard adds for its operators' purpose control tokens: when a
//! policy or a content signal refuses a purpose that a crawler serves through a token of its
//! operator's own (Googlebot's training use is governed by `Google-Extended`), robotsguard lets
//! the crawler in and the robots.txt it serves carries a group for the token instead.
//!
//! An origin's [`ControlPlan`] is made from its config and the catalogue when a snapshot is
//! built; [`added_groups`] applies it to each robots.txt copy as it is stored, so that what is
//! served, enforced and shown by `/explain` is one text. A file that already has a group for
//! the token keeps it as the site wrote it: robotsguard adds nothing for that token.

use std::fmt::Write as _;
use std::sync::Arc;

use crate::config::{Mode, OriginConfig, SignalAction};
use crate::crawlers::{Catalogue, Purpose, Purposes};
use crate::robots::{GlobalFallback, PreferenceLine, Preferences, Robots, Use};

/// Crawler names a comment line of an added group lists; more are counted.
const NAMED_IN_COMMENT: usize = 3;

/// One control token an origin's served robots.txt may carry a group for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ControlToken {
    /// The token as its operator spells it (`Google-Extended`).
    pub token: String,
    /// The purpose it controls.
    pub purpose: Purpose,
    /// Who names the token (the first crawler's operator).
    pub operator: String,
    /// The catalogue crawlers whose `purpose` it controls, in catalogue order.
    pub crawlers: Vec<String>,
    /// The robots.txt tokens of the first of them, most specific first: its group's preference
    /// lines are the ones that speak to the token's crawlers.
    pub crawler_tokens: Vec<String>,
    /// That crawler obeys only groups naming it.
    pub ignores_global: bool,
}

/// What an origin's config asks of the groups for control tokens: which tokens exist, which
/// purposes `policy.purposes` refuses, and whether content signals are enforced. Empty (nothing
/// is ever added) unless the origin enforces.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ControlPlan {
    /// The catalogue's control tokens for the purposes that may be refused here.
    pub tokens: Vec<ControlToken>,
    /// Purposes `policy.purposes` refuses (`block`, `license`): their tokens get `Disallow: /`.
    pub refused_by_policy: Purposes,
    /// `content_signals.action` is `enforce`: a preference line refusing a token's purpose for
    /// its crawlers gets the token a group saying the same in `Allow`/`Disallow` form.
    pub signals: bool,
}

impl ControlPlan {
    /// The plan for an origin with `config`, under the catalogue `catalogue`.
    pub fn for_origin(config: &OriginConfig, catalogue: &Catalogue) -> ControlPlan {
        let refused_by_policy = config.policy.purposes_refused();
        let signals = config.content_signals.action == SignalAction::Enforce;
        if config.mode != Mode::Enforce || (refused_by_policy.is_empty() && !signals) {
            return ControlPlan::default();
        }
        let mut tokens: Vec<ControlToken> = Vec::new();
        for def in catalogue.defs() {
            for (purpose, token) in def.controls.iter() {
                if !signals && !refused_by_policy.contains(purpose) {
                    continue;
                }
                match tokens.iter_mut().find(|known| {
                    known.purpose == purpose && known.token.eq_ignore_ascii_case(token)
                }) {
                    Some(known) => known.crawlers.push(def.name.clone()),
                    None => tokens.push(ControlToken {
                        token: token.to_string(),
                        purpose,
                        operator: def.operator.clone(),
                        crawlers: vec![def.name.clone()],
                        crawler_tokens: def.tokens.clone(),
                        ignores_global: def.ignores_global,
                    }),
                }
            }
        }
        if tokens.is_empty() {
            return ControlPlan::default();
        }
        ControlPlan {
            tokens,
            refused_by_policy,
            signals,
        }
    }

    /// Whether no group can ever be added.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }
}

/// Why robotsguard added a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddedFor {
    /// `policy.purposes` refuses the purpose (`block` or `license`).
    Policy,
    /// A preference line of the token's crawlers' group refuses the purpose (the first such
    /// line: its number and text).
    Signal {
        /// Its line in the robots.txt.
        line: u32,
        /// The line as written.
        text: Arc<str>,
    },
}

/// A group robotsguard added to the robots.txt it serves, for one control token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddedGroup {
    /// The token the group names (`Google-Extended`).
    pub token: String,
    /// The purpose it refuses.
    pub purpose: Purpose,
    /// Who names the token.
    pub operator: String,
    /// The crawlers whose `purpose` the token controls.
    pub crawlers: Vec<String>,
    /// Why it was added.
    pub why: AddedFor,
    /// Its rules, in order: `(true, path)` is `Allow: path`, `(false, path)` `Disallow: path`.
    pub rules: Vec<(bool, String)>,
}

impl AddedGroup {
    /// The group as it is served: a comment saying that robotsguard added it and why, the
    /// `User-agent` line and the rules.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let why = match &self.why {
            AddedFor::Policy => format!("policy.purposes refuses {}", self.purpose),
            AddedFor::Signal { line, .. } => format!("line {line} refuses {}", self.purpose),
        };
        let operator = if self.operator.is_empty() {
            "its operator"
        } else {
            self.operator.as_str()
        };
        let mut crawlers = self
            .crawlers
            .iter()
            .take(NAMED_IN_COMMENT)
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(", ");
        if self.crawlers.len() > NAMED_IN_COMMENT {
            let _ = write!(
                crawlers,
                " and {} more",
                self.crawlers.len() - NAMED_IN_COMMENT
            );
        }
        let _ = writeln!(
            out,
            "# Added by robotsguard: {why}; {} is the token {operator} names for refusing that \
             use of what {crawlers} fetch.",
            self.token
        );
        let _ = writeln!(out, "User-agent: {}", self.token);
        for (allow, path) in &self.rules {
            let _ = writeln!(out, "{}: {path}", if *allow { "Allow" } else { "Disallow" });
        }
        out
    }
}

/// The groups `plan` adds to a robots.txt copy whose compiled rules are `rules` (`None` for a
/// copy without a file: allow or disallow everything, where only the policy's refusals
/// apply). A token the file already names gets none.
pub fn added_groups(plan: &ControlPlan, rules: Option<&Robots>) -> Vec<AddedGroup> {
    let mut out: Vec<AddedGroup> = Vec::new();
    for control in &plan.tokens {
        if out
            .iter()
            .any(|group| group.token.eq_ignore_ascii_case(&control.token))
        {
            continue;
        }
        if let Some(rules) = rules {
            if site_names(rules, &control.token) {
                continue;
            }
        }
        let group = if plan.refused_by_policy.contains(control.purpose) {
            Some((AddedFor::Policy, vec![(false, "/".to_string())]))
        } else if plan.signals {
            rules.and_then(|rules| signal_rules(rules, control))
        } else {
            None
        };
        if let Some((why, rules)) = group {
            out.push(AddedGroup {
                token: control.token.clone(),
                purpose: control.purpose,
                operator: control.operator.clone(),
                crawlers: control.crawlers.clone(),
                why,
                rules,
            });
        }
    }
    out
}

/// Whether the file has a group naming `token` itself (robots.txt names compare
/// case-insensitively).
pub fn site_names(rules: &Robots, token: &str) -> bool {
    rules
        .agent_names()
        .any(|name| name.eq_ignore_ascii_case(token))
}

/// What the preference lines of the group `control`'s crawlers obey say about its purpose,
/// as `Allow`/`Disallow` rules for the token: a group-wide refusal is `Disallow: /` (with an
/// `Allow` for each path a path-scoped line gives back), path-scoped refusals alone are a
/// `Disallow` each. `None` when the lines refuse the purpose nowhere.
fn signal_rules<'r>(
    rules: &'r Robots,
    control: &ControlToken,
) -> Option<(AddedFor, Vec<(bool, String)>)> {
    let category = match control.purpose {
        Purpose::Search => Use::Search,
        Purpose::Training => Use::TrainAi,
        Purpose::Agent => Use::AiInput,
        Purpose::Other => return None,
    };
    if !rules.has_preferences() {
        return None;
    }
    let tokens: Vec<&str> = control
        .crawler_tokens
        .iter()
        .map(|token| &token[..crate::robots::reduce_agent_name(token.as_bytes()).len()])
        .filter(|token| !token.is_empty())
        .collect();
    let fallback = if control.ignores_global {
        GlobalFallback::Ignore
    } else {
        GlobalFallback::Use
    };
    let group = rules
        .verdict_with_canonical_path(&tokens, b"/", fallback)
        .group;
    let lines = rules.group_preferences(group);
    let statement = |lines: Vec<&'r PreferenceLine>| -> Option<(bool, &'r PreferenceLine)> {
        Preferences {
            group_wide: &[],
            scoped: lines,
        }
        .statement(category)
        .map(|statement| (statement.allowed, statement.line))
    };
    let group_wide = statement(lines.iter().copied().filter(|l| l.path.is_none()).collect());
    let mut paths: Vec<&str> = Vec::new();
    for line in &lines {
        if let Some(path) = line.path.as_deref() {
            if !paths.contains(&path) {
                paths.push(path);
            }
        }
    }
    let mut out = Vec::new();
    let mut first_refusal = None;
    if let Some((false, line)) = group_wide {
        out.push((false, "/".to_string()));
        first_refusal = Some(line);
    }
    let refused_everywhere = !out.is_empty();
    for path in paths {
        let scoped = statement(
            lines
                .iter()
                .copied()
                .filter(|l| l.path.as_deref() == Some(path))
                .collect(),
        );
        match scoped {
            Some((true, _)) if refused_everywhere => out.push((true, path.to_string())),
            Some((false, line)) if !refused_everywhere => {
                first_refusal.get_or_insert(line);
                out.push((false, path.to_string()));
            }
            _ => {}
        }
    }
    let line = first_refusal?;
    Some((
        AddedFor::Signal {
            line: line.line,
            text: line.shown.clone(),
        },
        out,
    ))
}

/// `body` with `groups` after it, each after a blank line.
pub fn with_groups(body: &[u8], groups: &[AddedGroup]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + groups.len() * 200);
    out.extend_from_slice(body);
    for group in groups {
        if !out.is_empty() && !out.ends_with(b"\n") {
            out.push(b'\n');
        }
        if !out.is_empty() {
            out.push(b'\n');
        }
        out.extend_from_slice(group.text().as_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(refused: &[Purpose], signals: bool) -> ControlPlan {
        ControlPlan {
            tokens: vec![ControlToken {
                token: "Google-Extended".into(),
                purpose: Purpose::Training,
                operator: "Google".into(),
                crawlers: vec![
                    "Googlebot".into(),
                    "Googlebot-Image".into(),
                    "Googlebot-News".into(),
                    "Googlebot-Video".into(),
                ],
                crawler_tokens: vec!["googlebot".into()],
                ignores_global: false,
            }],
            refused_by_policy: Purposes::of(refused),
            signals,
        }
    }

    fn served(plan: &ControlPlan, file: &str) -> String {
        let rules = Robots::parse(file.as_bytes());
        let groups = added_groups(plan, Some(&rules));
        String::from_utf8_lossy(&with_groups(file.as_bytes(), &groups)).into_owned()
    }

    #[test]
    fn a_policy_refusal_adds_a_disallow_all_group_marked_as_added() {
        let text = served(
            &plan(&[Purpose::Training], false),
            "User-agent: *\nDisallow: /private",
        );
        assert_eq!(
            text,
            "User-agent: *\nDisallow: /private\n\n# Added by robotsguard: policy.purposes \
             refuses training; Google-Extended is the token Google names for refusing that use of \
             what Googlebot, Googlebot-Image, Googlebot-News and 1 more fetch.\n\
             User-agent: Google-Extended\nDisallow: /\n"
        );
        // Compiled, the group refuses the token and leaves Googlebot as it was.
        let rules = Robots::parse(text.as_bytes());
        assert!(!rules.verdict(&["google-extended"], b"/a").allowed);
        assert!(rules.verdict(&["googlebot"], b"/a").allowed);
        assert!(!rules.verdict(&["googlebot"], b"/private/x").allowed);
    }

    #[test]
    fn the_sites_own_group_for_the_token_stays_the_only_one() {
        let file = "User-agent: *\nDisallow:\n\nUser-agent: google-extended\nAllow: /\n";
        assert_eq!(served(&plan(&[Purpose::Training], true), file), file);
    }

    #[test]
    fn signals_become_rules_group_wide_and_by_path() {
        let signals = plan(&[], true);
        // Group-wide `ai-train=no`, a path that gives training back.
        let text = served(
            &signals,
            "User-agent: *\nContent-Signal: search=yes, ai-train=no\nContent-Usage: /open/ train-ai=y\nAllow: /\n",
        );
        assert!(
            text.ends_with("User-agent: Google-Extended\nDisallow: /\nAllow: /open/\n"),
            "{text}"
        );
        assert!(text.contains("line 2 refuses training"), "{text}");
        // Path-scoped refusals alone.
        let text = served(
            &signals,
            "User-agent: *\nContent-Usage: /blog/ train-ai=n\nContent-Usage: /blog/ train-ai=y\n",
        );
        assert!(
            text.ends_with("User-agent: Google-Extended\nDisallow: /blog/\n"),
            "two lines for one path combine with `n` winning: {text}"
        );
        // Nothing refused: nothing added. Googlebot's own group speaks for it.
        let quiet = "User-agent: *\nContent-Signal: ai-train=yes\n";
        assert_eq!(served(&signals, quiet), quiet);
        let own = "User-agent: *\nContent-Signal: ai-train=no\nAllow: /\n\nUser-agent: Googlebot\nAllow: /\n";
        assert_eq!(served(&signals, own), own);
        // A file without a trailing newline still gets its own lines.
        let text = served(&signals, "User-agent: *\nContent-Signal: ai-train=no");
        assert!(
            text.starts_with("User-agent: *\nContent-Signal: ai-train=no\n\n# Added"),
            "{text}"
        );
    }

    #[test]
    fn copies_without_a_file_get_only_the_policys_groups() {
        assert_eq!(added_groups(&plan(&[], true), None), Vec::new());
        let groups = added_groups(&plan(&[Purpose::Training], false), None);
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].why, AddedFor::Policy);
    }
}
