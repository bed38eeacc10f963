//! The small, copyable results of the identification stages — what the generic rules found, what
//! an origin's robots.txt-name scanner found — as [`super::memo`] remembers them per thread.
//! Plain data below both the stages that make them and the memory that keeps them.

/// What the generic rules make of a User-Agent, with the token as a byte range of it, so the
/// verdict can be remembered per User-Agent ([`super::memo`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum GenericVerdict {
    NotCrawler,
    EmptyUserAgent,
    /// The token is `user_agent[start..end]`.
    AutomationWord {
        start: usize,
        end: usize,
    },
    /// Every automation word sits in a URL or e-mail address: a crawler without a token.
    AutomationWordOnlyInUrls,
    /// The token (the library's product) is `user_agent[start..end]`.
    HttpLibrary {
        start: usize,
        end: usize,
    },
}

/// A robots.txt-named token found in a User-Agent: its index among the scanner's tokens, and
/// the span of the match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FoundToken {
    pub index: usize,
    pub start: usize,
    pub end: usize,
}

/// What one scan of a User-Agent found, in a form small enough to remember per thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TokenScan {
    None,
    One(FoundToken),
    /// More than one token: list them again with `RobotsTokenScanner::all_whole_words`.
    Several,
}
