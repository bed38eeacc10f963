//! A deliberately plain model of Google's reference matcher, for differential tests.
//!
//! It follows the structure of the reference library step by step — one parse per query, a
//! per-line state machine, and the quadratic position-set pattern matcher — with none of the
//! engine's indexing, grouping or pruning. When the engine and this model disagree on an input,
//! one of them is wrong, and this one is the easier to read.

#![allow(dead_code)]

const MAX_LINE: usize = 2083 * 8 - 1;

#[derive(Clone, Copy)]
struct Match {
    priority: i64,
    line: u32,
}

impl Match {
    const NONE: Match = Match {
        priority: -1,
        line: 0,
    };

    fn higher(a: Match, b: Match) -> Match {
        if a.priority > b.priority {
            a
        } else {
            b
        }
    }
}

#[derive(Clone, Copy)]
struct Scope {
    global: Match,
    specific: Match,
}

struct Matcher<'a> {
    agents: &'a [&'a [u8]],
    path: Vec<u8>,
    allow: Scope,
    disallow: Scope,
    seen_global: bool,
    seen_specific: bool,
    ever_seen_specific: bool,
    seen_separator: bool,
}

/// Returns (allowed, matching line) for `url` under `body`, treating `agents` as Google's
/// `AllowedByRobots` does (any of them selects a group).
pub fn allowed_by_robots(body: &[u8], agents: &[&[u8]], url: &[u8]) -> (bool, u32) {
    let mut matcher = Matcher {
        agents,
        path: path_params_query(url),
        allow: Scope {
            global: Match::NONE,
            specific: Match::NONE,
        },
        disallow: Scope {
            global: Match::NONE,
            specific: Match::NONE,
        },
        seen_global: false,
        seen_specific: false,
        ever_seen_specific: false,
        seen_separator: false,
    };
    parse(body, &mut matcher);
    (!matcher.disallowed(), matcher.matching_line())
}

impl Matcher<'_> {
    fn disallowed(&self) -> bool {
        if self.allow.specific.priority > 0 || self.disallow.specific.priority > 0 {
            return self.disallow.specific.priority > self.allow.specific.priority;
        }
        if self.ever_seen_specific {
            return false;
        }
        if self.disallow.global.priority > 0 || self.allow.global.priority > 0 {
            return self.disallow.global.priority > self.allow.global.priority;
        }
        false
    }

    fn matching_line(&self) -> u32 {
        if self.ever_seen_specific {
            Match::higher(self.disallow.specific, self.allow.specific).line
        } else {
            Match::higher(self.disallow.global, self.allow.global).line
        }
    }

    fn user_agent(&mut self, value: &[u8]) {
        if self.seen_separator {
            self.seen_specific = false;
            self.seen_global = false;
            self.seen_separator = false;
        }
        if !value.is_empty() && value[0] == b'*' && (value.len() == 1 || is_space(value[1])) {
            self.seen_global = true;
        } else {
            let mut end = 0;
            while end < value.len()
                && (value[end].is_ascii_alphabetic() || value[end] == b'-' || value[end] == b'_')
            {
                end += 1;
            }
            let name = &value[..end];
            for agent in self.agents {
                if name.eq_ignore_ascii_case(agent) {
                    self.seen_specific = true;
                    self.ever_seen_specific = true;
                    break;
                }
            }
        }
    }

    fn rule(&mut self, line: u32, value: &[u8], allow: bool) {
        if !(self.seen_global || self.seen_specific) {
            return;
        }
        self.seen_separator = true;
        let priority = if matches(&self.path, value) {
            value.len() as i64
        } else {
            -1
        };
        if priority >= 0 {
            let scope = if allow {
                &mut self.allow
            } else {
                &mut self.disallow
            };
            let slot = if self.seen_specific {
                &mut scope.specific
            } else {
                &mut scope.global
            };
            if slot.priority < priority {
                *slot = Match { priority, line };
            }
        } else if allow {
            if let Some(slash) = value.iter().rposition(|&b| b == b'/') {
                if value[slash..].starts_with(b"/index.htm") {
                    let mut pattern = value[..=slash].to_vec();
                    pattern.push(b'$');
                    self.rule(line, &pattern, true);
                }
            }
        }
    }
}

/// The reference library's matcher: the set of path positions reachable after each pattern byte.
fn matches(path: &[u8], pattern: &[u8]) -> bool {
    let mut positions = vec![0usize];
    for (index, &byte) in pattern.iter().enumerate() {
        if byte == b'$' && index + 1 == pattern.len() {
            return positions.last() == Some(&path.len());
        }
        if byte == b'*' {
            let first = positions[0];
            positions = (first..=path.len()).collect();
        } else {
            positions = positions
                .iter()
                .filter(|&&p| p < path.len() && path[p] == byte)
                .map(|&p| p + 1)
                .collect();
            if positions.is_empty() {
                return false;
            }
        }
    }
    true
}

fn is_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}

fn strip(mut s: &[u8]) -> &[u8] {
    while !s.is_empty() && is_space(s[0]) {
        s = &s[1..];
    }
    while !s.is_empty() && is_space(s[s.len() - 1]) {
        s = &s[..s.len() - 1];
    }
    s
}

fn parse(body: &[u8], matcher: &mut Matcher) {
    let bom = [0xEF, 0xBB, 0xBF];
    let mut bom_pos = 0;
    let mut line: Vec<u8> = Vec::new();
    let mut line_num = 0;
    let mut last_was_cr = false;
    for &ch in body {
        if bom_pos < 3 {
            let expected = bom[bom_pos];
            bom_pos += 1;
            if ch == expected {
                continue;
            }
        }
        bom_pos = 3;
        if ch != b'\n' && ch != b'\r' {
            if line.len() < MAX_LINE {
                line.push(ch);
            }
        } else {
            let crlf_continuation = line.is_empty() && last_was_cr && ch == b'\n';
            if !crlf_continuation {
                line_num += 1;
                emit_line(line_num, &line, matcher);
            }
            line.clear();
            last_was_cr = ch == b'\r';
        }
    }
    line_num += 1;
    emit_line(line_num, &line, matcher);
}

fn emit_line(line_num: u32, raw: &[u8], matcher: &mut Matcher) {
    let mut line = raw;
    if let Some(nul) = line.iter().position(|&b| b == 0) {
        line = &line[..nul];
    }
    if let Some(hash) = line.iter().position(|&b| b == b'#') {
        line = &line[..hash];
    }
    line = strip(line);
    let sep = match line.iter().position(|&b| b == b':') {
        Some(colon) => colon,
        None => {
            let Some(space) = line.iter().position(|&b| b == b' ' || b == b'\t') else {
                return;
            };
            let mut value_start = space;
            while value_start < line.len()
                && (line[value_start] == b' ' || line[value_start] == b'\t')
            {
                value_start += 1;
            }
            if line[value_start..].iter().any(|&b| b == b' ' || b == b'\t') {
                return;
            }
            space
        }
    };
    let key = strip(&line[..sep]);
    if key.is_empty() {
        return;
    }
    let value = strip(&line[sep + 1..]);
    let starts = |name: &str| {
        key.len() >= name.len() && key[..name.len()].eq_ignore_ascii_case(name.as_bytes())
    };
    if starts("user-agent") || starts("useragent") || starts("user agent") {
        matcher.user_agent(value);
    } else if starts("allow") {
        matcher.rule(line_num, &escape(value), true);
    } else if starts("disallow")
        || starts("dissallow")
        || starts("dissalow")
        || starts("disalow")
        || starts("diasllow")
        || starts("disallaw")
    {
        matcher.rule(line_num, &escape(value), false);
    }
}

fn escape(src: &[u8]) -> Vec<u8> {
    let hex = b"0123456789ABCDEF";
    let mut out = Vec::new();
    let mut i = 0;
    while i < src.len() {
        let xdigit = |j: usize| j < src.len() && src[j].is_ascii_hexdigit();
        if src[i] == b'%' && xdigit(i + 1) && xdigit(i + 2) {
            out.push(b'%');
            out.push(src[i + 1].to_ascii_uppercase());
            out.push(src[i + 2].to_ascii_uppercase());
            i += 3;
        } else if src[i] & 0x80 != 0 {
            out.push(b'%');
            out.push(hex[(src[i] >> 4) as usize]);
            out.push(hex[(src[i] & 0xF) as usize]);
            i += 1;
        } else {
            out.push(src[i]);
            i += 1;
        }
    }
    out
}

fn path_params_query(url: &[u8]) -> Vec<u8> {
    let find_first_of = |from: usize, set: &[u8]| -> Option<usize> {
        (from..url.len()).find(|&i| set.contains(&url[i]))
    };
    let find_str = |from: usize, needle: &[u8]| -> Option<usize> {
        (from..url.len()).find(|&i| url[i..].starts_with(needle))
    };
    let search_start = if url.len() >= 2 && url[0] == b'/' && url[1] == b'/' {
        2
    } else {
        0
    };
    let early_path = find_first_of(search_start, b"/?;");
    let mut protocol_end = find_str(search_start, b"://");
    if let (Some(early), Some(protocol)) = (early_path, protocol_end) {
        if early < protocol {
            protocol_end = None;
        }
    }
    let protocol_end = protocol_end.map_or(search_start, |p| p + 3);
    let mut result = match find_first_of(protocol_end, b"/?;") {
        Some(path_start) => {
            let hash = find_str(search_start, b"#");
            match hash {
                Some(hash) if hash < path_start => b"/".to_vec(),
                _ => {
                    let end = hash.unwrap_or(url.len());
                    let mut path = url[path_start..end].to_vec();
                    if path[0] != b'/' {
                        path.insert(0, b'/');
                    }
                    path
                }
            }
        }
        None => b"/".to_vec(),
    };
    if let Some(nul) = result.iter().position(|&b| b == 0) {
        result.truncate(nul);
    }
    result
}
