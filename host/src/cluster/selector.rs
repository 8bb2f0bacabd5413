//! Kubernetes label selectors in the API server's string syntax.
//!
//! [`LabelSelector`] parses what `kubectl -l` and the `labelSelector=` query parameter accept,
//! validates keys and values the way the API server does, matches label sets with the API
//! server's semantics, and renders a canonical form (see its [`Display`](fmt::Display) impl).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

/// Why a label selector string was rejected. Positions are byte offsets into `input`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// The text does not follow the selector grammar at `position`.
    #[error("invalid label selector {input:?}: {reason} at position {position}")]
    Syntax {
        /// The whole selector text.
        input: String,
        /// Byte offset of the offending token.
        position: usize,
        /// What was found and what was expected instead.
        reason: String,
    },
    /// A label key is not a qualified name (`[prefix/]name`).
    #[error("invalid label selector {input:?}: key {key:?} at position {position}: {reason}")]
    InvalidKey {
        /// The whole selector text.
        input: String,
        /// Byte offset of the key.
        position: usize,
        /// The rejected key.
        key: String,
        /// Which rule the key breaks.
        reason: String,
    },
    /// A label value is not a valid label value, or not an integer after `>` or `<`.
    #[error("invalid label selector {input:?}: value {value:?} at position {position}: {reason}")]
    InvalidValue {
        /// The whole selector text.
        input: String,
        /// Byte offset of the value.
        position: usize,
        /// The rejected value.
        value: String,
        /// Which rule the value breaks.
        reason: String,
    },
}

/// The operator of one requirement; `=`/`==` are stored as a one-value `In`, `!=` as a
/// one-value `NotIn`. The declaration order is the canonical rendering order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Operator {
    /// The label is present with one of these values (never empty).
    In(BTreeSet<String>),
    /// The label is absent or has none of these values (never empty).
    NotIn(BTreeSet<String>),
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
    /// The label is present and its value is an integer greater than this.
    GreaterThan(i64),
    /// The label is present and its value is an integer less than this.
    LessThan(i64),
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Requirement {
    key: String,
    op: Operator,
}

/// A set of labels a selector can be matched against.
pub trait Labels {
    /// The value of the label `key`.
    fn label(&self, key: &str) -> Option<&str>;
}

impl Labels for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl Requirement {
    fn matches(&self, labels: &(impl Labels + ?Sized)) -> bool {
        let value = labels.label(&self.key);
        match (&self.op, value) {
            (Operator::In(values), Some(v)) => values.contains(v),
            (Operator::In(_), None) => false,
            (Operator::NotIn(values), Some(v)) => !values.contains(v),
            (Operator::NotIn(_), None) => true,
            (Operator::Exists, v) => v.is_some(),
            (Operator::DoesNotExist, v) => v.is_none(),
            (Operator::GreaterThan(bound), Some(v)) => v.parse::<i64>().is_ok_and(|v| v > *bound),
            (Operator::LessThan(bound), Some(v)) => v.parse::<i64>().is_ok_and(|v| v < *bound),
            (Operator::GreaterThan(_) | Operator::LessThan(_), None) => false,
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = &self.key;
        let set = |f: &mut fmt::Formatter<'_>, word: &str, values: &BTreeSet<String>| {
            let joined: Vec<&str> = values.iter().map(String::as_str).collect();
            write!(f, "{key} {word} ({})", joined.join(","))
        };
        match &self.op {
            Operator::In(values) if values.len() == 1 => write!(f, "{key}={}", first(values)),
            Operator::In(values) => set(f, "in", values),
            Operator::NotIn(values) if values.len() == 1 => write!(f, "{key}!={}", first(values)),
            Operator::NotIn(values) => set(f, "notin", values),
            Operator::Exists => write!(f, "{key}"),
            Operator::DoesNotExist => write!(f, "!{key}"),
            Operator::GreaterThan(bound) => write!(f, "{key}>{bound}"),
            Operator::LessThan(bound) => write!(f, "{key}<{bound}"),
        }
    }
}

fn first(values: &BTreeSet<String>) -> &str {
    values.first().map_or("", String::as_str)
}

/// A parsed, validated label selector: the conjunction of its requirements.
///
/// Supported syntax (comma-separated; spaces, tabs, CR and LF between tokens ignored; a NUL byte
/// ends the input, or the token right before it, as in the API server): `key=value`,
/// `key==value`, `key!=value`, `key in (a,b)`, `key notin (a,b)`, `key`, `!key`, `key>N` and
/// `key<N`. Keys must be qualified names (`[dns-subdomain/]name`, name at most 63 characters),
/// values valid label values (at most 63 characters, possibly empty), as the API server
/// requires. The empty string parses to the selector that matches everything
/// ([`LabelSelector::default`]).
///
/// Requirements are kept in canonical order without duplicates, so equality, hashing and
/// rendering do not depend on how the selector was written.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LabelSelector {
    /// Sorted by key, then operator, then values; no duplicates.
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Whether every label set matches, i.e. the selector has no requirements.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// This selector with the requirement `key=value` added.
    pub fn and_equal(&self, key: &str, value: &str) -> Self {
        let mut requirements = self.requirements.clone();
        requirements.push(Requirement {
            key: key.to_owned(),
            op: Operator::In(BTreeSet::from([value.to_owned()])),
        });
        requirements.sort();
        requirements.dedup();
        Self { requirements }
    }

    /// The requirements that a label have one value (`key=value`, `key==value`,
    /// `key in (value)`), as key and value, in key order.
    pub fn equalities(&self) -> impl Iterator<Item = (&str, &str)> {
        self.requirements.iter().filter_map(|r| match &r.op {
            Operator::In(values) if values.len() == 1 => Some((r.key.as_str(), first(values))),
            _ => None,
        })
    }

    /// Whether `labels` satisfies every requirement, with the API server's semantics: `!=`,
    /// `notin` and `!key` match when the key is absent; `=`, `in`, `>`, `<` and `key` require it;
    /// `>` and `<` fail when the label's value is not an integer. The empty selector matches
    /// every label set.
    pub fn matches(&self, labels: &(impl Labels + ?Sized)) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }
}

/// Renders the canonical form, which the API server accepts and which parses back to an equal
/// selector: requirements sorted by key, then operator (`=`/`in`, `!=`/`notin`, exists,
/// does-not-exist, `>`, `<`), then values; set values sorted; duplicates dropped; `==` written as
/// `=`; one-value `in`/`notin` written as `=`/`!=`; integers without leading zeros; separated by
/// `,` without spaces. The empty selector renders as the empty string.
impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, requirement) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{requirement}")?;
        }
        Ok(())
    }
}

impl FromStr for LabelSelector {
    type Err = SelectorError;

    /// Parses the API server's selector syntax; see [`LabelSelector`].
    fn from_str(input: &str) -> Result<Self, SelectorError> {
        let mut parser = Parser {
            input,
            tokens: lex(input),
            next: 0,
        };
        let mut requirements = parser.parse()?;
        requirements.sort();
        requirements.dedup();
        Ok(Self { requirements })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A run of bytes that are neither whitespace (see [`is_space`]), NUL nor one of `!=(),<>`.
    Word,
    Not,
    NotEquals,
    Equals,
    DoubleEquals,
    Open,
    Close,
    Comma,
    Greater,
    Less,
    End,
}

#[derive(Debug, Clone, Copy)]
struct Token<'a> {
    kind: Kind,
    text: &'a str,
    position: usize,
}

fn is_special(b: u8) -> bool {
    matches!(b, b'!' | b'=' | b'(' | b')' | b',' | b'<' | b'>')
}

/// The whitespace apimachinery's lexer skips; any other whitespace is part of a word.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// Splits `input` into tokens as apimachinery's lexer does, byte by byte. That lexer reads a
/// NUL byte as the end of the input: where a token would start, a NUL ends the input; right
/// after a token, it ends that token and is dropped.
fn lex(input: &str) -> Vec<Token<'_>> {
    let bytes = input.as_bytes();
    let mut tokens = Vec::new();
    let mut at = 0;
    loop {
        while bytes.get(at).copied().is_some_and(is_space) {
            at += 1;
        }
        let Some(&first) = bytes.get(at).filter(|&&b| b != 0) else {
            break;
        };
        let start = at;
        let second = bytes.get(at + 1).copied();
        let kind = match (first, second) {
            (b'!', Some(b'=')) => Kind::NotEquals,
            (b'=', Some(b'=')) => Kind::DoubleEquals,
            (b'!', _) => Kind::Not,
            (b'=', _) => Kind::Equals,
            (b'(', _) => Kind::Open,
            (b')', _) => Kind::Close,
            (b',', _) => Kind::Comma,
            (b'>', _) => Kind::Greater,
            (b'<', _) => Kind::Less,
            _ => Kind::Word,
        };
        at += match kind {
            Kind::NotEquals | Kind::DoubleEquals => 2,
            Kind::Word => bytes[at..]
                .iter()
                .position(|&b| b == 0 || is_space(b) || is_special(b))
                .unwrap_or(bytes.len() - at),
            _ => 1,
        };
        tokens.push(Token {
            kind,
            text: &input[start..at],
            position: start,
        });
        if bytes.get(at) == Some(&0) {
            at += 1;
        }
    }
    tokens.push(Token {
        kind: Kind::End,
        text: "",
        position: at,
    });
    tokens
}

fn describe(token: Token<'_>) -> String {
    if token.kind == Kind::End {
        "end of input".to_owned()
    } else {
        format!("{:?}", token.text)
    }
}

struct Parser<'a> {
    input: &'a str,
    tokens: Vec<Token<'a>>,
    next: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Token<'a> {
        self.tokens[self.next.min(self.tokens.len() - 1)]
    }

    fn bump(&mut self) -> Token<'a> {
        let token = self.peek();
        self.next += 1;
        token
    }

    fn syntax(&self, token: Token<'_>, expected: &str) -> SelectorError {
        SelectorError::Syntax {
            input: self.input.to_owned(),
            position: token.position,
            reason: format!("found {}, expected {expected}", describe(token)),
        }
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, SelectorError> {
        let mut requirements = Vec::new();
        if self.peek().kind == Kind::End {
            return Ok(requirements);
        }
        loop {
            requirements.push(self.requirement()?);
            let token = self.bump();
            match token.kind {
                Kind::End => return Ok(requirements),
                Kind::Comma => {}
                _ => return Err(self.syntax(token, "',' or end of input")),
            }
        }
    }

    fn key(&mut self) -> Result<String, SelectorError> {
        let token = self.bump();
        if token.kind != Kind::Word {
            return Err(self.syntax(token, "a label key"));
        }
        validate_qualified_name(token.text).map_err(|reason| SelectorError::InvalidKey {
            input: self.input.to_owned(),
            position: token.position,
            key: token.text.to_owned(),
            reason,
        })?;
        Ok(token.text.to_owned())
    }

    /// One requirement. As apimachinery, its values are checked once it is read: a syntax
    /// error anywhere in it comes first.
    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        if self.peek().kind == Kind::Not {
            self.bump();
            let key = self.key()?;
            return Ok(Requirement {
                key,
                op: Operator::DoesNotExist,
            });
        }
        let key = self.key()?;
        let token = self.peek();
        let op = match (token.kind, token.text) {
            (Kind::End | Kind::Comma, _) => Operator::Exists,
            (Kind::Equals | Kind::DoubleEquals, _) => {
                self.bump();
                let value = self.single_value("a label value")?;
                Operator::In(self.checked([value])?)
            }
            (Kind::NotEquals, _) => {
                self.bump();
                let value = self.single_value("a label value")?;
                Operator::NotIn(self.checked([value])?)
            }
            (Kind::Word, "in") => {
                self.bump();
                let values = self.value_set()?;
                Operator::In(self.checked(values)?)
            }
            (Kind::Word, "notin") => {
                self.bump();
                let values = self.value_set()?;
                Operator::NotIn(self.checked(values)?)
            }
            (Kind::Greater, _) => {
                self.bump();
                let bound = self.single_value("an integer")?;
                Operator::GreaterThan(self.integer(bound)?)
            }
            (Kind::Less, _) => {
                self.bump();
                let bound = self.single_value("an integer")?;
                Operator::LessThan(self.integer(bound)?)
            }
            _ => {
                return Err(self.syntax(
                    token,
                    "an operator ('=', '==', '!=', 'in', 'notin', '>', '<'), ',' or end of input",
                ));
            }
        };
        Ok(Requirement { key, op })
    }

    /// The values, each a valid label value.
    fn checked(
        &self,
        values: impl IntoIterator<Item = Token<'a>>,
    ) -> Result<BTreeSet<String>, SelectorError> {
        values
            .into_iter()
            .map(|token| {
                validate_value(token.text).map_err(|reason| self.invalid_value(token, reason))?;
                Ok(token.text.to_owned())
            })
            .collect()
    }

    fn invalid_value(&self, token: Token<'_>, reason: String) -> SelectorError {
        SelectorError::InvalidValue {
            input: self.input.to_owned(),
            position: token.position,
            value: token.text.to_owned(),
            reason,
        }
    }

    /// An empty value at `token`'s position.
    fn empty(token: Token<'a>) -> Token<'a> {
        Token {
            kind: Kind::Word,
            text: "",
            position: token.position,
        }
    }

    /// The value after `=`, `==`, `!=`, `>` or `<`, unchecked; empty when directly followed by
    /// `,` or the end.
    fn single_value(&mut self, expected: &str) -> Result<Token<'a>, SelectorError> {
        let token = self.peek();
        match token.kind {
            Kind::End | Kind::Comma => Ok(Self::empty(token)),
            Kind::Word => Ok(self.bump()),
            _ => Err(self.syntax(token, expected)),
        }
    }

    /// `( v, ... )`, unchecked, where each value may be empty, as the API server allows (`()` is
    /// `{""}`).
    fn value_set(&mut self) -> Result<Vec<Token<'a>>, SelectorError> {
        let open = self.bump();
        if open.kind != Kind::Open {
            return Err(self.syntax(open, "'('"));
        }
        let mut values = Vec::new();
        loop {
            let token = self.peek();
            values.push(match token.kind {
                Kind::Word => self.bump(),
                Kind::Comma | Kind::Close => Self::empty(token),
                _ => return Err(self.syntax(token, "a label value, ',' or ')'")),
            });
            let token = self.bump();
            match token.kind {
                Kind::Comma => {}
                Kind::Close => return Ok(values),
                _ => return Err(self.syntax(token, "',' or ')'")),
            }
        }
    }

    /// The bound of `>` or `<`: a valid label value that parses as an `i64`.
    fn integer(&self, token: Token<'_>) -> Result<i64, SelectorError> {
        validate_value(token.text).map_err(|reason| self.invalid_value(token, reason))?;
        token
            .text
            .parse()
            .map_err(|_| self.invalid_value(token, "must be an integer after '>' or '<'".into()))
    }
}

/// The character rule of label names and values, as the API server words it.
const CHARSET_RULE: &str = "consist of alphanumeric characters, '-', '_' or '.', and must start \
                            and end with an alphanumeric character";

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?` without the length limit.
fn is_label_name(s: &str) -> bool {
    let alnum = |c: u8| c.is_ascii_alphanumeric();
    let bytes = s.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(&first), Some(&last)) => {
            alnum(first)
                && alnum(last)
                && bytes
                    .iter()
                    .all(|&c| alnum(c) || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// Whether `s` is a lowercase RFC 1123 subdomain (the API server's `IsDNS1123Subdomain`):
/// dot-separated `[a-z0-9]([-a-z0-9]*[a-z0-9])?` parts, at most 253 bytes in all.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns1123_part)
}

/// Whether `s` is a lowercase RFC 1123 label (the API server's `IsDNS1123Label`):
/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 bytes.
pub fn is_dns1123_label(s: &str) -> bool {
    s.len() <= 63 && is_dns1123_part(s)
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?` without a length limit.
fn is_dns1123_part(s: &str) -> bool {
    let ok = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let bytes = s.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(&first), Some(&last)) => {
            ok(first) && ok(last) && bytes.iter().all(|&c| ok(c) || c == b'-')
        }
        _ => false,
    }
}

/// The API server's `IsQualifiedName` (`[prefix/]name`), with the reason when it is not one:
/// the first rule broken, in the order the API server lists them.
pub fn validate_qualified_name(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((_, name)) if name.contains('/') => {
            return Err(
                "must be a name, optionally after a DNS subdomain prefix and one '/' \
                 (e.g. example.com/my-name)"
                    .into(),
            );
        }
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            return Err("prefix part must be non-empty".into());
        }
        if !is_dns1123_subdomain(prefix) {
            return Err(format!(
                "prefix part {prefix:?} must be a lowercase RFC 1123 subdomain of at most 253 \
                 characters"
            ));
        }
    }
    if name.is_empty() {
        return Err("name part must be non-empty".into());
    }
    if name.len() > 63 {
        return Err("name part must be no more than 63 characters".into());
    }
    if !is_label_name(name) {
        return Err(format!("name part must {CHARSET_RULE}"));
    }
    Ok(())
}

/// The API server's `IsValidLabelValue`, with the reason when `value` is not a label value.
/// Public for the differential tests against apimachinery.
pub fn validate_value(value: &str) -> Result<(), String> {
    if value.len() > 63 {
        return Err("must be no more than 63 characters".into());
    }
    if !value.is_empty() && !is_label_name(value) {
        return Err(format!("must be empty or {CHARSET_RULE}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(s: &str) -> LabelSelector {
        s.parse()
            .unwrap_or_else(|e| panic!("{s:?} should parse: {e}"))
    }

    fn err(s: &str) -> SelectorError {
        match s.parse::<LabelSelector>() {
            Ok(parsed) => panic!("{s:?} should not parse, got {parsed}"),
            Err(e) => e,
        }
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|&(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }

    fn set(values: &[&str]) -> BTreeSet<String> {
        values.iter().map(|&v| v.to_owned()).collect()
    }

    fn only(s: &str) -> Requirement {
        let parsed = sel(s);
        assert_eq!(parsed.requirements.len(), 1, "{s:?}");
        parsed.requirements[0].clone()
    }

    #[test]
    fn parses_each_operator() {
        let req = |key: &str, op| Requirement {
            key: key.to_owned(),
            op,
        };
        assert_eq!(only("app=web"), req("app", Operator::In(set(&["web"]))));
        assert_eq!(only("app==web"), req("app", Operator::In(set(&["web"]))));
        assert_eq!(only("app!=web"), req("app", Operator::NotIn(set(&["web"]))));
        assert_eq!(
            only("app in (web,db)"),
            req("app", Operator::In(set(&["db", "web"])))
        );
        assert_eq!(
            only("app notin (web,db)"),
            req("app", Operator::NotIn(set(&["db", "web"])))
        );
        assert_eq!(only("app"), req("app", Operator::Exists));
        assert_eq!(only("!app"), req("app", Operator::DoesNotExist));
        assert_eq!(
            only("replicas>3"),
            req("replicas", Operator::GreaterThan(3))
        );
        assert_eq!(only("replicas<03"), req("replicas", Operator::LessThan(3)));
        assert_eq!(
            only("example.com/tier=front-end_1.x"),
            req("example.com/tier", Operator::In(set(&["front-end_1.x"])))
        );
    }

    #[test]
    fn empty_values_as_the_api_server_allows() {
        assert_eq!(only("a=").op, Operator::In(set(&[""])));
        assert_eq!(only("a!=").op, Operator::NotIn(set(&[""])));
        assert_eq!(only("a in ()").op, Operator::In(set(&[""])));
        assert_eq!(only("a in (x,)").op, Operator::In(set(&["", "x"])));
        assert_eq!(only("a notin (,x)").op, Operator::NotIn(set(&["", "x"])));
        assert_eq!(only("a in (x,,y)").op, Operator::In(set(&["", "x", "y"])));
        assert_eq!(sel("a=,b").requirements.len(), 2);
    }

    #[test]
    fn tolerates_whitespace_and_keyword_like_names() {
        let spaced = sel("  app = web ,\ttier  in(  a , b ) , ! gone,has  ");
        assert_eq!(spaced, sel("app=web,tier in (a,b),!gone,has"));
        assert_eq!(sel("").to_string(), "");
        assert!(sel(" \t ").is_empty());
        // `in` and `notin` are only keywords in operator position.
        assert_eq!(only("in=notin").key, "in");
        assert_eq!(only("notin in (in)").op, Operator::In(set(&["in"])));
        assert_eq!(only("!in").op, Operator::DoesNotExist);
    }

    #[test]
    fn only_the_api_servers_whitespace_separates_tokens() {
        assert_eq!(sel(" a\r\n=\tb "), sel("a=b"));
        // apimachinery skips ' ', '\t', '\r' and '\n' only: other whitespace is part of a word.
        for odd in ["\u{b}", "\u{c}", "\u{85}", "\u{a0}", "\u{2028}", "\u{3000}"] {
            let key = err(&format!("a{odd}=b"));
            assert!(
                matches!(key, SelectorError::InvalidKey { .. }),
                "{odd:?}: {key}"
            );
            let alone = err(odd);
            assert!(
                matches!(alone, SelectorError::InvalidKey { .. }),
                "{odd:?}: {alone}"
            );
            let value = err(&format!("a=b{odd}"));
            assert!(
                matches!(value, SelectorError::InvalidValue { .. }),
                "{odd:?}: {value}"
            );
        }
    }

    #[test]
    fn nul_reads_as_in_apimachinery() {
        // Where a token would start, a NUL byte ends the input.
        assert_eq!(sel("a=b\0"), sel("a=b"));
        assert_eq!(sel("a=b \0 ((("), sel("a=b"));
        assert!(sel("\0").is_empty());
        assert_eq!(sel("a\0\0=b"), sel("a"));
        // Right after a token, it ends that token and is dropped.
        assert_eq!(sel("a\0=b"), sel("a=b"));
        assert_eq!(sel("a in\0(b,\0)"), sel("a in (b,)"));
        assert_eq!(sel("a=\0b"), sel("a=b"));
        assert!(matches!(
            err("a=b\0c"),
            SelectorError::Syntax { position: 4, .. }
        ));
        assert!(matches!(
            err("a!\0=b"),
            SelectorError::Syntax { position: 1, .. }
        ));
        assert!(matches!(
            err("a=b,\0"),
            SelectorError::Syntax { position: 5, .. }
        ));
    }

    #[test]
    fn values_are_checked_once_their_requirement_is_read() {
        // As apimachinery: a syntax error anywhere in a requirement comes before its values'
        // errors, which come before anything in the requirements after it.
        assert!(matches!(
            err("a in (-x, y z)"),
            SelectorError::Syntax { position: 12, .. }
        ));
        assert!(matches!(err("a notin (-x"), SelectorError::Syntax { .. }));
        assert!(matches!(
            err("a=-x b"),
            SelectorError::InvalidValue { position: 2, .. }
        ));
        assert!(matches!(
            err("a in (-x),="),
            SelectorError::InvalidValue { position: 6, .. }
        ));
        // An empty bound is not an integer.
        for input in ["a>", "a<", "a>,b"] {
            match err(input) {
                SelectorError::InvalidValue {
                    position, reason, ..
                } => {
                    assert_eq!(position, 2, "{input:?}");
                    assert!(reason.contains("must be an integer"), "{input:?}: {reason}");
                }
                other => panic!("{input:?}: unexpected {other:?}"),
            }
        }
    }

    #[test]
    fn rejects_malformed_input_with_position() {
        let cases: &[(&str, usize, &str)] = &[
            ("a=b,", 4, "found end of input, expected a label key"),
            (",a", 0, "found \",\", expected a label key"),
            ("a=b c", 4, "found \"c\", expected ',' or end of input"),
            ("a in b", 5, "found \"b\", expected '('"),
            ("a in (b", 7, "found end of input, expected ',' or ')'"),
            ("a in (b c)", 8, "found \"c\", expected ',' or ')'"),
            (
                "a in (=)",
                6,
                "found \"=\", expected a label value, ',' or ')'",
            ),
            ("a foo", 2, "expected an operator"),
            ("a=(b)", 2, "found \"(\", expected a label value"),
            ("!a=b", 2, "found \"=\", expected ',' or end of input"),
            ("!", 1, "found end of input, expected a label key"),
            ("a>(", 2, "found \"(\", expected an integer"),
            ("a=b=c", 3, "found \"=\", expected ',' or end of input"),
        ];
        for &(input, position, reason) in cases {
            match err(input) {
                SelectorError::Syntax {
                    input: i,
                    position: p,
                    reason: r,
                } => {
                    assert_eq!(i, input);
                    assert_eq!(p, position, "{input:?}: {r}");
                    assert!(r.contains(reason), "{input:?}: {r:?} lacks {reason:?}");
                }
                other => panic!("{input:?}: unexpected {other:?}"),
            }
        }
    }

    #[test]
    fn rejects_invalid_keys() {
        let long = "a".repeat(64);
        let long_prefix = format!("{}.com/a", "a".repeat(250));
        let cases: &[(&str, &str)] = &[
            ("-a=b", "must start and end with an alphanumeric"),
            ("a_=b", "must start and end with an alphanumeric"),
            ("a$b", "must consist of alphanumeric characters"),
            (&long, "no more than 63 characters"),
            ("/a", "prefix part must be non-empty"),
            ("example.com/", "name part must be non-empty"),
            ("Example.com/a", "lowercase RFC 1123 subdomain"),
            (
                "a/b/c",
                "optionally after a DNS subdomain prefix and one '/'",
            ),
            (
                "http://example.com",
                "optionally after a DNS subdomain prefix and one '/'",
            ),
            (&long_prefix, "lowercase RFC 1123 subdomain"),
        ];
        for &(input, reason) in cases {
            match err(input) {
                SelectorError::InvalidKey {
                    position,
                    key,
                    reason: r,
                    ..
                } => {
                    assert_eq!(position, usize::from(input.starts_with('!')));
                    assert!(input.starts_with(&key), "{input:?}: key {key:?}");
                    assert!(r.contains(reason), "{input:?}: {r:?} lacks {reason:?}");
                }
                other => panic!("{input:?}: unexpected {other:?}"),
            }
        }
        let longest = format!("{}.{}/{}", "p".repeat(100), "q".repeat(152), "n".repeat(63));
        assert_eq!(only(&longest).op, Operator::Exists);
    }

    #[test]
    fn rejects_invalid_values() {
        let long = format!("a={}", "v".repeat(64));
        let cases: &[(&str, usize, &str)] = &[
            ("a=-v", 2, "must be empty or consist of alphanumeric"),
            ("a in (ok, v_)", 10, "must be empty or consist"),
            (&long, 2, "no more than 63 characters"),
            ("a>x", 2, "must be an integer"),
            ("a<99999999999999999999", 2, "must be an integer"),
            ("a>-1", 2, "must be empty or consist"),
        ];
        for &(input, position, reason) in cases {
            match err(input) {
                SelectorError::InvalidValue {
                    position: p,
                    reason: r,
                    ..
                } => {
                    assert_eq!(p, position, "{input:?}: {r}");
                    assert!(r.contains(reason), "{input:?}: {r:?} lacks {reason:?}");
                }
                other => panic!("{input:?}: unexpected {other:?}"),
            }
        }
    }

    #[test]
    fn error_messages_name_input_position_and_reason() {
        assert_eq!(
            err("app=web,").to_string(),
            "invalid label selector \"app=web,\": found end of input, expected a label key at \
             position 8"
        );
        assert_eq!(
            err("tier=front end").to_string(),
            "invalid label selector \"tier=front end\": found \"end\", expected ',' or end of \
             input at position 11"
        );
        assert_eq!(
            err("a=b,Bad_Prefix/x").to_string(),
            "invalid label selector \"a=b,Bad_Prefix/x\": key \"Bad_Prefix/x\" at position 4: \
             prefix part \"Bad_Prefix\" must be a lowercase RFC 1123 subdomain of at most 253 \
             characters"
        );
        assert_eq!(
            err("a=b.").to_string(),
            "invalid label selector \"a=b.\": value \"b.\" at position 2: must be empty or \
             consist of alphanumeric characters, '-', '_' or '.', and must start and end with \
             an alphanumeric character"
        );
    }

    #[test]
    fn matching_semantics() {
        /// (selector, labels, expected match)
        type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], bool);
        let cases: &[Case] = &[
            ("", &[], true),
            ("", &[("a", "1")], true),
            ("a=1", &[("a", "1")], true),
            ("a=1", &[("a", "2")], false),
            ("a=1", &[], false),
            ("a=", &[("a", "")], true),
            ("a=", &[], false),
            ("a!=1", &[("a", "2")], true),
            ("a!=1", &[("a", "1")], false),
            ("a!=1", &[], true),
            ("a in (1,2)", &[("a", "2")], true),
            ("a in (1,2)", &[("a", "3")], false),
            ("a in (1,2)", &[], false),
            ("a notin (1,2)", &[("a", "3")], true),
            ("a notin (1,2)", &[("a", "1")], false),
            ("a notin (1,2)", &[], true),
            ("a", &[("a", "")], true),
            ("a", &[("b", "1")], false),
            ("!a", &[("b", "1")], true),
            ("!a", &[("a", "")], false),
            ("a>5", &[("a", "6")], true),
            ("a>5", &[("a", "5")], false),
            ("a>5", &[("a", "x")], false),
            ("a>5", &[], false),
            ("a<5", &[("a", "4")], true),
            ("a<5", &[("a", "5")], false),
            ("a=1,b!=2", &[("a", "1"), ("b", "3")], true),
            ("a=1,b!=2", &[("a", "1"), ("b", "2")], false),
            ("a=1,a!=1", &[("a", "1")], false),
            ("x.io/a=1,!b,c", &[("x.io/a", "1"), ("c", "")], true),
            (
                "x.io/a=1,!b,c",
                &[("x.io/a", "1"), ("b", ""), ("c", "")],
                false,
            ),
        ];
        for &(selector, set, expected) in cases {
            assert_eq!(
                sel(selector).matches(&labels(set)),
                expected,
                "{selector:?} on {set:?}"
            );
        }
    }

    #[test]
    fn display_is_canonical() {
        let cases: &[(&str, &str)] = &[
            ("", ""),
            ("b==2, a=1", "a=1,b=2"),
            ("a in (z, y, x)", "a in (x,y,z)"),
            ("a in (x)", "a=x"),
            ("a notin (x)", "a!=x"),
            ("a in ()", "a="),
            ("a notin (x,)", "a notin (,x)"),
            (
                "!c, c, c>01, c<2, c notin (1,2), c!=0, c=5",
                "c=5,c!=0,c notin (1,2),c,!c,c>1,c<2",
            ),
            ("a=1,a==1,a in (1)", "a=1"),
            ("x.io/k=v, k", "k,x.io/k=v"),
        ];
        for &(input, canonical) in cases {
            let parsed = sel(input);
            assert_eq!(parsed.to_string(), canonical, "{input:?}");
            assert_eq!(sel(canonical), parsed, "{canonical:?} round trip");
            assert_eq!(sel(canonical).to_string(), canonical);
        }
        assert_eq!(sel("a=1,b=2"), sel(" b = 2 , a == 1 "));
    }
}
