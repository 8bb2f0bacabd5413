//! Differential tests of the host's Kubernetes parsers against apimachinery, the code the API
//! server runs, at the release of the local control plane: label selectors, quantities and
//! names. `tests/oracle/build` builds a Go program around apimachinery (cached after the first
//! build); one oracle process answers every input. The inputs are the string literals of
//! apimachinery's own tests of these parsers (`oracle seeds`) and, for each parser,
//! `DIFFERENTIAL_INPUTS` (default 100000) inputs from a grammar-aware generator seeded with
//! `DIFFERENTIAL_SEED` (default 1). A test fails listing its first disagreements.
//!
//! ```sh
//! DIFFERENTIAL_INPUTS=1000000 cargo test -p kubewasm-tests --test differential -- --nocapture
//! ```

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread;
use std::time::Instant;

use kubewasm::cluster::selector::{
    LabelSelector, SelectorError, is_dns1123_label, is_dns1123_subdomain, validate_qualified_name,
    validate_value,
};
use kubewasm::config::{QuantityError, parse_quantity};
use serde::Deserialize;
use serde_json::{Value, json};

// --- The oracle ---

/// One running `tests/oracle` process, and apimachinery's test literals.
struct Oracle {
    /// Never waited for: the process exits at the end of its input, when this one exits.
    _process: Child,
    stdin: BufWriter<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    seeds: Vec<String>,
}

/// The oracle shared by the tests of this binary, started on first use. It exits when the test
/// process does, at the end of its input.
fn oracle() -> MutexGuard<'static, Oracle> {
    static ORACLE: OnceLock<Mutex<Oracle>> = OnceLock::new();
    ORACLE
        .get_or_init(|| Mutex::new(Oracle::start()))
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

impl Oracle {
    fn start() -> Self {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("oracle");
        let built = Command::new(dir.join("build"))
            .stderr(Stdio::inherit())
            .output()
            .expect("running tests/oracle/build");
        assert!(
            built.status.success(),
            "tests/oracle/build: {}",
            built.status
        );
        let binary = String::from_utf8(built.stdout).expect("a path");
        let binary = binary.trim();
        // `seeds` finds apimachinery through `go list` in the oracle's module.
        let seeds = Command::new(binary)
            .arg("seeds")
            .current_dir(&dir)
            .stderr(Stdio::inherit())
            .output()
            .expect("running oracle seeds");
        assert!(seeds.status.success(), "oracle seeds: {}", seeds.status);
        #[derive(Deserialize)]
        struct Seed {
            value: String,
        }
        let seeds = seeds
            .stdout
            .lines()
            .map(|line| serde_json::from_str::<Seed>(&line.expect("text")).expect("a seed"))
            .map(|seed| seed.value)
            .collect();
        let mut child = Command::new(binary)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("starting the oracle");
        Self {
            stdin: BufWriter::new(child.stdin.take().expect("piped")),
            stdout: BufReader::new(child.stdout.take().expect("piped")),
            _process: child,
            seeds,
        }
    }

    /// The answers to `requests`, in order. Requests are written by a thread of their own, so
    /// that neither side waits on a full pipe.
    fn ask(&mut self, requests: &[Value]) -> Vec<Answer> {
        let Self { stdin, stdout, .. } = self;
        thread::scope(|scope| {
            scope.spawn(move || {
                for request in requests {
                    serde_json::to_writer(&mut *stdin, request).expect("writing to the oracle");
                    stdin.write_all(b"\n").expect("writing to the oracle");
                }
                stdin.flush().expect("writing to the oracle");
            });
            let mut line = String::new();
            requests
                .iter()
                .map(|request| {
                    line.clear();
                    let read = stdout.read_line(&mut line).expect("reading the oracle");
                    assert!(read > 0, "the oracle stopped before answering {request}");
                    let answer: Answer = serde_json::from_str(&line).expect("an answer");
                    assert!(
                        answer.error.is_empty(),
                        "oracle: {} ({request})",
                        answer.error
                    );
                    answer
                })
                .collect()
        })
    }
}

/// One line of the oracle's output; see `tests/oracle/main.go`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Answer {
    selector: Option<SelectorAnswer>,
    rendered: Option<SelectorAnswer>,
    quantity: Option<QuantityAnswer>,
    names: Option<NamesAnswer>,
    error: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct SelectorAnswer {
    ok: bool,
    error: String,
    canonical: String,
    matches: Vec<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct QuantityAnswer {
    ok: bool,
    error: String,
    sign: i32,
    unscaled: String,
    scale: i64,
    skipped: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct NamesAnswer {
    dns1123_label: Vec<String>,
    dns1123_subdomain: Vec<String>,
    qualified_name: Vec<String>,
    label_value: Vec<String>,
}

// --- Reporting ---

/// The disagreements of one parser; `finish` fails the test if there are any.
struct Report {
    parser: &'static str,
    inputs: usize,
    disagreements: usize,
    first: Vec<String>,
    /// How many inputs had each outcome, to show what the inputs reach.
    outcomes: BTreeMap<String, usize>,
    started: Instant,
}

impl Report {
    fn new(parser: &'static str, inputs: usize, started: Instant) -> Self {
        Self {
            parser,
            inputs,
            disagreements: 0,
            first: Vec::new(),
            outcomes: BTreeMap::new(),
            started,
        }
    }

    fn outcome(&mut self, outcome: impl Into<String>) {
        *self.outcomes.entry(outcome.into()).or_default() += 1;
    }

    fn check(&mut self, input: &str, host: impl Debug, apimachinery: impl Debug, agree: bool) {
        if agree {
            return;
        }
        self.disagreements += 1;
        if self.first.len() < 20 {
            self.first.push(format!(
                "input {input:?}\n  host:         {host:?}\n  apimachinery: {apimachinery:?}"
            ));
        }
    }

    fn finish(self) {
        println!(
            "{}: {} inputs, {} disagreements, {:.1} s; outcomes {:?}",
            self.parser,
            self.inputs,
            self.disagreements,
            self.started.elapsed().as_secs_f64(),
            self.outcomes
        );
        assert!(
            self.disagreements == 0,
            "{}: {} of {} inputs disagree with apimachinery; the first:\n{}",
            self.parser,
            self.disagreements,
            self.inputs,
            self.first.join("\n")
        );
    }
}

// --- Inputs ---

/// SplitMix64: small, seeded, and the same sequence on every machine.
struct Rng(u64);

impl Rng {
    fn new(stream: u64) -> Self {
        let seed = std::env::var("DIFFERENTIAL_SEED").map_or(1, |s| {
            s.parse().expect("DIFFERENTIAL_SEED is an unsigned integer")
        });
        Self(seed ^ stream.wrapping_mul(0xA076_1D64_78BD_642F))
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }

    /// A length: mostly short, often at one of `limits` or one past it, sometimes far beyond.
    fn length(&mut self, limits: &[usize]) -> usize {
        let limit = self.pick(limits);
        match self.below(10) {
            0..=6 => 1 + self.below(8),
            7 | 8 => limit - 2 + self.below(4),
            _ => self.below(2 * limit),
        }
    }
}

/// The number of generated inputs per parser.
fn generated() -> usize {
    std::env::var("DIFFERENTIAL_INPUTS").map_or(100_000, |n| {
        n.parse()
            .expect("DIFFERENTIAL_INPUTS is an unsigned integer")
    })
}

/// Characters outside the label alphabet: whitespace of every kind (some the Go lexer skips,
/// some it does not), NUL (which it reads as the end of input), selector syntax, non-ASCII
/// letters, controls.
const ODD: &[char] = &[
    ' ', '\t', '\n', '\r', '\x0b', '\x0c', '\0', '\u{85}', '\u{a0}', '\u{2028}', '\u{3000}',
    '\u{feff}', '!', '=', '(', ')', ',', '<', '>', '/', '.', '-', '_', '+', '*', '"', '\'', '\\',
    'é', 'ß', 'İ', 'K', '日', '\u{1}', '\u{7f}', '🦀',
];

/// No separator, or whitespace apimachinery's lexer skips.
const SPACE: &[&str] = &[
    "", "", "", "", " ", " ", " ", "  ", "\t", "\n", "\r", "\r\n",
];

/// Other whitespace, and NUL, which apimachinery's lexer reads as the end of input.
const ODD_SPACE: &[&str] = &[
    "\x0b", "\x0c", "\0", "\u{85}", "\u{a0}", "\u{2028}", "\u{3000}", "\u{feff}",
];

/// A separator between selector tokens: mostly none or a space, sometimes odd whitespace.
fn space(rng: &mut Rng) -> &'static str {
    if rng.one_in(12) {
        rng.pick(ODD_SPACE)
    } else {
        rng.pick(SPACE)
    }
}

/// Replaces, inserts or deletes one to three characters at random places.
fn mutate(rng: &mut Rng, text: &str, alphabet: &[char]) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for _ in 0..=rng.below(3) {
        let at = rng.below(chars.len() + 1);
        match rng.below(3) {
            0 if at < chars.len() => chars[at] = rng.pick(alphabet),
            1 if at < chars.len() => {
                chars.remove(at);
            }
            _ => chars.insert(at, rng.pick(alphabet)),
        }
    }
    chars.into_iter().collect()
}

/// A label-name-like string near `limit` characters or short: alphanumeric ends, `-_.` inside,
/// uppercase letters, sometimes an odd character.
fn label_name(rng: &mut Rng, limit: usize) -> String {
    let len = rng.length(&[limit]);
    const ENDS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    const INNER: &[u8] = b"abcdefxyz0189AZ-_.";
    let mut name: String = (0..len)
        .map(|i| {
            let set = if i == 0 || i + 1 == len { ENDS } else { INNER };
            char::from(rng.pick(set))
        })
        .collect();
    if rng.one_in(16) {
        name = mutate(rng, &name, ODD);
    }
    name
}

/// A lowercase RFC 1123 label of `len` characters, sometimes with a flaw.
fn dns_label(rng: &mut Rng, len: usize) -> String {
    const ENDS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    const INNER: &[u8] = b"abcxyz0189---";
    let label: String = (0..len)
        .map(|i| {
            let set = if i == 0 || i + 1 == len { ENDS } else { INNER };
            char::from(rng.pick(set))
        })
        .collect();
    if rng.one_in(10) {
        mutate(rng, &label, &['A', 'Z', '_', '.', '-', '/', 'é', ' '])
    } else {
        label
    }
}

/// A DNS subdomain near `limit` bytes or short: dot-separated labels, sometimes with a flaw.
fn subdomain(rng: &mut Rng, limit: usize) -> String {
    let len = rng.length(&[limit]);
    let first = 1 + rng.below(len.clamp(1, 63));
    let mut domain = dns_label(rng, first);
    while domain.len() < len {
        let next = 1 + rng.below((len - domain.len()).clamp(1, 64));
        domain.push('.');
        domain.push_str(&dns_label(rng, next));
    }
    match rng.below(20) {
        0 => domain.to_uppercase(),
        1 => format!("{domain}."),
        2 => format!(".{domain}"),
        3 => domain.replacen('.', "..", 1),
        _ => domain,
    }
}

/// A label key: a name, often with a DNS prefix; near the length limits, sometimes malformed.
fn key(rng: &mut Rng) -> String {
    let name = label_name(rng, 63);
    match rng.below(16) {
        0..=10 => name,
        11..=13 => format!("{}/{name}", subdomain(rng, 253)),
        14 => format!("{}/{name}", label_name(rng, 63)),
        _ => rng
            .pick(&[
                "/",
                "/a",
                "a/",
                "a/b/c",
                "example.com//a",
                "",
                "in",
                "notin",
            ])
            .to_owned(),
    }
}

/// An integer as text: small, near the limits of i64, with signs or leading zeros.
fn integer(rng: &mut Rng) -> String {
    match rng.below(8) {
        0..=2 => rng.below(20).to_string(),
        3 => (rng.next() as i64).to_string(),
        4 => format!("{:0>4}", rng.below(100)),
        5 => format!("{}{}", rng.pick(&["+", "-"]), rng.below(100)),
        _ => rng
            .pick(&[
                "9223372036854775807",
                "9223372036854775808",
                "-9223372036854775808",
                "-9223372036854775809",
                "99999999999999999999",
                "0",
                "-0",
                "+0",
                "",
            ])
            .to_owned(),
    }
}

/// A label value: empty, an integer, or a label-name-like string near the length limit.
fn value(rng: &mut Rng) -> String {
    match rng.below(10) {
        0 => String::new(),
        1 | 2 => integer(rng),
        3 => rng.pick(&["in", "notin", "!", "=", "()"]).to_owned(),
        _ => label_name(rng, 63),
    }
}

/// The keys and values one selector uses, to build label sets that meet it.
#[derive(Default)]
struct Vocabulary {
    keys: Vec<String>,
    values: Vec<String>,
}

/// `( v, ... )` with empty values, spaces and, sometimes, broken parentheses or commas.
fn value_set(rng: &mut Rng, vocabulary: &mut Vocabulary) -> String {
    let mut set = String::from("(");
    for i in 0..rng.below(4) {
        if i > 0 {
            set.push_str(space(rng));
            set.push_str(rng.pick(&[",", ",", ",", ",,", ""]));
        }
        set.push_str(space(rng));
        let v = value(rng);
        set.push_str(&v);
        vocabulary.values.push(v);
    }
    set.push_str(space(rng));
    set.push_str(rng.pick(&[
        ")", ")", ")", ")", ")", ")", ")", ")", ",)", "", "))", "(", ")a",
    ]));
    set
}

/// One requirement, every operator and some that are not.
fn requirement(rng: &mut Rng, vocabulary: &mut Vocabulary) -> String {
    let k = key(rng);
    vocabulary.keys.push(k.clone());
    let s1 = space(rng);
    let s2 = space(rng);
    let text = match rng.below(18) {
        0..=3 => format!("{k}{s1}{}{s2}", rng.pick(&["=", "==", "!="])),
        4..=7 => {
            let s0 = rng.pick(&[" ", " ", "\t", "  ", ""]);
            let op = rng.pick(&["in", "notin"]);
            return format!("{k}{s0}{op}{s1}{}", value_set(rng, vocabulary));
        }
        8 => return format!("!{s1}{k}"),
        9 => return k,
        10..=12 => {
            let op = rng.pick(&[">", "<"]);
            let bound = integer(rng);
            vocabulary.values.push(bound.clone());
            return format!("{k}{s1}{op}{s2}{bound}");
        }
        13 => format!("{k}{s1}{}{s2}", rng.pick(&[">", "<"])),
        14 => {
            let op = rng.pick(&[
                "=!", "<=", ">=", "===", "!==", "=<", "<>", "in", "notin", "(", ")", "!", "!!", "",
                ",", "=(",
            ]);
            format!("{k}{s1}{op}{s2}")
        }
        15 => format!("!{k}{s1}{}{s2}", rng.pick(&["=", "!=", "in", ""])),
        16 => format!("{k} {}{s1}", rng.pick(&["in", "notin"])),
        _ => return (0..1 + rng.below(6)).map(|_| rng.pick(ODD)).collect(),
    };
    let v = value(rng);
    vocabulary.values.push(v.clone());
    text + &v
}

/// A selector: zero to four requirements between commas and whitespace, sometimes mutated.
fn selector(rng: &mut Rng, vocabulary: &mut Vocabulary) -> String {
    let mut text = String::new();
    if rng.one_in(10) {
        text.push_str(rng.pick(&[",", " ", "\t\n", "\0", "\u{a0}"]));
    }
    for i in 0..rng.pick(&[0, 1, 1, 1, 2, 2, 2, 3, 4]) {
        if i > 0 {
            text.push_str(space(rng));
            text.push_str(rng.pick(&[",", ",", ",", ",", ",", ",", ",", ",", ",,", " ", ";"]));
            text.push_str(space(rng));
        }
        text.push_str(&requirement(rng, vocabulary));
    }
    if rng.one_in(10) {
        text.push_str(rng.pick(&[",", " ", "\n", "\0", "\0junk", "\u{2028}"]));
    }
    if rng.one_in(8) {
        text = mutate(rng, &text, ODD);
    }
    text
}

/// Three label sets, whose keys and values come from `vocabulary` about half the time.
fn label_sets(rng: &mut Rng, vocabulary: &Vocabulary) -> Vec<BTreeMap<String, String>> {
    (0..3)
        .map(|_| {
            (0..rng.below(5))
                .map(|_| {
                    let k = if !vocabulary.keys.is_empty() && rng.one_in(2) {
                        vocabulary.keys[rng.below(vocabulary.keys.len())].clone()
                    } else {
                        key(rng)
                    };
                    let v = match rng.below(4) {
                        0 | 1 if !vocabulary.values.is_empty() => {
                            vocabulary.values[rng.below(vocabulary.values.len())].clone()
                        }
                        0..=2 => integer(rng),
                        _ => value(rng),
                    };
                    (k, v)
                })
                .collect()
        })
        .collect()
}

/// Every suffix apimachinery knows, and some it does not.
const SUFFIXES: &[&str] = &[
    "", "", "", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei",
];
const BAD_SUFFIXES: &[&str] = &[
    "K", "i", "ki", "mi", "KiB", "Kib", "ii", "Z", "e", "E+", "e-", "ee3", "e3i", "Ki5", "Mie3",
    "kk", "mM", "EE", "e+-1", "e 3", "b", "x10",
];
/// Exponents around the limits of the integer types apimachinery reads them into.
const EXPONENTS: &[&str] = &[
    "9",
    "18",
    "19",
    "20",
    "38",
    "39",
    "300",
    "99999",
    "100000",
    "100001",
    "2147483647",
    "2147483648",
    "2147483649",
    "4294967295",
    "4294967296",
    "4294967297",
    "4294967305",
    "4294967314",
    "4294967316",
    "6442450944",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551616",
    "00003",
];

fn digits(rng: &mut Rng, len: usize) -> String {
    (0..len)
        .map(|_| char::from(b'0' + rng.below(10) as u8))
        .collect()
}

/// A quantity: sign, integer and fraction digits (none, few, many, runs of nines that round
/// up to a whole number), a suffix or exponent, whitespace, sometimes mutated.
fn quantity(rng: &mut Rng) -> String {
    let mut text = String::new();
    if rng.one_in(15) {
        text.push_str(space(rng));
    }
    text.push_str(rng.pick(&["", "", "", "", "", "+", "-", "-", "+-", "--"]));
    let integer = match rng.below(12) {
        0 => String::new(),
        1 => "0".to_owned(),
        2 => "000".to_owned(),
        3 => {
            let len = 19 + rng.below(40);
            digits(rng, len)
        }
        4 => {
            let len = 100 + rng.below(300);
            digits(rng, len)
        }
        5 => rng
            .pick(&[
                "18446744073709551615",
                "18446744073709551616",
                "9223372036854775807",
                "9223372036854775808",
                "1023",
                "1024",
            ])
            .to_owned(),
        _ => {
            let len = 1 + rng.below(6);
            digits(rng, len)
        }
    };
    text.push_str(&integer);
    if rng.one_in(2) {
        text.push('.');
        let run = match rng.below(6) {
            0 => String::new(),
            1 => "9".repeat(8 + rng.below(20)),
            2 => "0".repeat(rng.below(12)),
            _ => {
                let len = 1 + rng.below(40);
                digits(rng, len)
            }
        };
        let len = rng.below(4);
        let fraction = run + &digits(rng, len);
        text.push_str(&fraction);
    }
    match rng.below(10) {
        0..=4 => text.push_str(rng.pick(SUFFIXES)),
        5..=7 => {
            text.push(rng.pick(&['e', 'E']));
            text.push_str(rng.pick(&["", "", "+", "-", "-"]));
            if rng.one_in(3) {
                text.push_str(rng.pick(EXPONENTS));
            } else {
                text.push_str(&rng.below(45).to_string());
            }
        }
        _ => text.push_str(rng.pick(BAD_SUFFIXES)),
    }
    if rng.one_in(15) {
        text.push_str(space(rng));
    }
    if rng.one_in(8) {
        const ALPHABET: &[char] = &[
            '0', '1', '9', '.', '+', '-', 'e', 'E', 'i', 'K', 'M', 'm', ' ', '\t', '\0', 'é', 'x',
            '_', ',', '٣',
        ];
        text = mutate(rng, &text, ALPHABET);
    }
    text
}

/// A name for the name checks: labels, subdomains and keys near their limits, with dots,
/// dashes, uppercase, non-ASCII and control characters.
fn name(rng: &mut Rng) -> String {
    let text = match rng.below(8) {
        0 | 1 => {
            let len = rng.length(&[63]);
            dns_label(rng, len)
        }
        2 => subdomain(rng, 63),
        3 => key(rng),
        4 => label_name(rng, 63),
        5 => rng
            .pick(&[
                "", ".", "-", "a.", ".a", "a..b", "a-", "-a", "a_b", "A", "0", "a/b",
            ])
            .to_owned(),
        6 => subdomain(rng, 253).to_uppercase(),
        _ => (0..1 + rng.below(6)).map(|_| rng.pick(ODD)).collect(),
    };
    if rng.one_in(6) {
        mutate(rng, &text, ODD)
    } else {
        text
    }
}

// --- Label selectors ---

/// How a selector was refused. The host's variants map one to one to apimachinery's kinds of
/// error: a syntax error, a key that is not a qualified name, a value that is not a label value
/// (or not an integer after `>`/`<`).
#[derive(Debug, PartialEq)]
enum SelectorClass {
    Syntax,
    Key,
    Value,
}

fn host_class(error: &SelectorError) -> SelectorClass {
    match error {
        SelectorError::Syntax { .. } => SelectorClass::Syntax,
        SelectorError::InvalidKey { .. } => SelectorClass::Key,
        SelectorError::InvalidValue { .. } => SelectorClass::Value,
    }
}

/// `labels.Parse` reports syntax errors as text (`found 'x', expected: ...`, sometimes after
/// `unable to parse requirement: `), an invalid key as a field error without a path (`<nil>`),
/// invalid values as field errors under `values[i]`, one or a list of them.
fn apimachinery_class(error: &str) -> SelectorClass {
    let detail = error
        .strip_prefix("unable to parse requirement: ")
        .unwrap_or(error);
    if detail.starts_with("found ") {
        SelectorClass::Syntax
    } else if detail.starts_with("<nil>: Invalid value: ") {
        SelectorClass::Key
    } else if detail.trim_start_matches('[').starts_with("values[") {
        SelectorClass::Value
    } else {
        panic!("an error labels.Parse is not known to give: {error:?}")
    }
}

/// What a parser made of a selector: the canonical form and the match of each label set, or
/// the kind of error.
#[derive(Debug, PartialEq)]
enum SelectorVerdict {
    Accepted {
        canonical: String,
        matches: Vec<bool>,
    },
    Refused(SelectorClass),
}

fn apimachinery_verdict(answer: &SelectorAnswer) -> SelectorVerdict {
    if answer.ok {
        SelectorVerdict::Accepted {
            canonical: answer.canonical.clone(),
            matches: answer.matches.clone(),
        }
    } else {
        SelectorVerdict::Refused(apimachinery_class(&answer.error))
    }
}

/// The host's `LabelSelector` against `labels.Parse`: acceptance, the kind of error, the
/// requirements (through the canonical form) and the match of each label set; and the host's
/// rendering must read as the same selector to apimachinery.
///
/// The host's `Display` differs from apimachinery's `String()` on purpose: it is canonical
/// (sorted by key, operator and values, duplicates dropped, `==` and one-value sets written
/// `=`), where `String()` keeps what was written. So the oracle renders apimachinery's parsed
/// requirements in the host's documented canonical form, and that is what is compared.
#[test]
fn label_selectors_agree_with_apimachinery() {
    let mut oracle = oracle();
    let started = Instant::now();
    let mut rng = Rng::new(1);
    let mut inputs: Vec<(String, Vec<BTreeMap<String, String>>)> = Vec::new();
    for seed in &oracle.seeds {
        let vocabulary = Vocabulary {
            keys: vec![seed.clone(), "x".into(), "a".into()],
            values: vec![seed.clone(), "1".into(), "b".into()],
        };
        inputs.push((seed.clone(), label_sets(&mut rng, &vocabulary)));
    }
    for _ in 0..generated() {
        let mut vocabulary = Vocabulary::default();
        let text = selector(&mut rng, &mut vocabulary);
        inputs.push((text, label_sets(&mut rng, &vocabulary)));
    }
    let mut report = Report::new("label selectors", inputs.len(), started);
    let host: Vec<SelectorVerdict> = inputs
        .iter()
        .map(|(text, sets)| match text.parse::<LabelSelector>() {
            Ok(selector) => SelectorVerdict::Accepted {
                canonical: selector.to_string(),
                matches: sets.iter().map(|set| selector.matches(set)).collect(),
            },
            Err(error) => SelectorVerdict::Refused(host_class(&error)),
        })
        .collect();
    let requests: Vec<Value> = inputs
        .iter()
        .zip(&host)
        .map(|((text, sets), host)| {
            let render = match host {
                SelectorVerdict::Accepted { canonical, .. } => Some(canonical),
                SelectorVerdict::Refused(_) => None,
            };
            json!({"op": "selector", "input": text, "labels": sets, "render": render})
        })
        .collect();
    let answers = oracle.ask(&requests);
    drop(oracle);
    for (((text, _), host), answer) in inputs.iter().zip(&host).zip(&answers) {
        let parsed = apimachinery_verdict(answer.selector.as_ref().expect("a selector answer"));
        match &parsed {
            SelectorVerdict::Accepted { matches, .. } => {
                report.outcome("accepted");
                matches
                    .iter()
                    .for_each(|&m| report.outcome(format!("label set matched: {m}")));
            }
            SelectorVerdict::Refused(class) => report.outcome(format!("refused: {class:?}")),
        }
        report.check(text, host, &parsed, *host == parsed);
        if let Some(rendered) = &answer.rendered {
            let reparsed = apimachinery_verdict(rendered);
            let what = format!("{text:?} rendered by the host");
            report.check(&what, host, &reparsed, *host == reparsed);
        }
    }
    report.finish();
}

// --- Quantities ---

/// The host's answer for an accepted quantity of exact value `unscaled` × 10^-`scale` (no
/// trailing zeros in `unscaled`): the host accepts whole, non-negative byte counts that fit a
/// u64, and refuses the rest with the first of these that applies: negative, not whole, too
/// large. apimachinery's refusals are all `Invalid`.
fn expected_quantity(text: &str, answer: &QuantityAnswer) -> Result<u64, QuantityError> {
    if !answer.ok {
        return Err(QuantityError::Invalid(text.to_owned()));
    }
    if answer.sign < 0 {
        return Err(QuantityError::Negative(text.to_owned()));
    }
    if answer.scale > 0 {
        return Err(QuantityError::Fraction(text.to_owned()));
    }
    let zeros = usize::try_from(-answer.scale).unwrap_or(usize::MAX);
    let too_large = || QuantityError::TooLarge(text.to_owned());
    if answer.unscaled.len().saturating_add(zeros) > 20 {
        return Err(too_large());
    }
    let value: u128 = format!("{}{}", answer.unscaled, "0".repeat(zeros))
        .parse()
        .expect("digits");
    u64::try_from(value).map_err(|_| too_large())
}

/// `parse_quantity` against `resource.ParseQuantity`: where apimachinery accepts, the host
/// gives the exact value or refuses it for one of its deliberate reasons, which the exact value
/// must show; where apimachinery refuses, so does the host.
///
/// Quantities that apimachinery would not finish with (a non-zero number with an exponent
/// beyond ±100000, see `unbounded` in the oracle) are skipped by the oracle. apimachinery
/// accepts their syntax and their value is far from a whole byte count that fits a u64 (or
/// negative), so the host must refuse them, but not as invalid.
#[test]
fn quantities_agree_with_apimachinery() {
    let mut oracle = oracle();
    let started = Instant::now();
    let mut rng = Rng::new(2);
    let mut inputs = oracle.seeds.clone();
    inputs.extend((0..generated()).map(|_| quantity(&mut rng)));
    let requests: Vec<Value> = inputs
        .iter()
        .map(|text| json!({"op": "quantity", "input": text}))
        .collect();
    let answers = oracle.ask(&requests);
    drop(oracle);
    let mut report = Report::new("quantities", inputs.len(), started);
    for (text, answer) in inputs.iter().zip(&answers) {
        let answer = answer.quantity.as_ref().expect("a quantity answer");
        let host = parse_quantity(text);
        if answer.skipped {
            report.outcome("skipped by the oracle");
            let refused = matches!(
                host,
                Err(QuantityError::Negative(_)
                    | QuantityError::Fraction(_)
                    | QuantityError::TooLarge(_))
            );
            report.check(text, &host, "skipped: accepted, far from a u64", refused);
        } else {
            let expected = expected_quantity(text, answer);
            report.outcome(match &expected {
                Ok(_) => "accepted",
                Err(QuantityError::Invalid(_)) => "invalid",
                Err(QuantityError::Negative(_)) => "negative",
                Err(QuantityError::Fraction(_)) => "not whole",
                Err(QuantityError::TooLarge(_)) => "too large",
            });
            report.check(text, &host, (&expected, answer), host == expected);
        }
    }
    report.finish();
}

// --- Names ---

/// Which rule a label key breaks, from the first reason each side gives (apimachinery lists
/// every broken rule, the host gives the first).
#[derive(Debug, PartialEq)]
enum KeyClass {
    /// More than one `/`.
    Shape,
    Prefix,
    NameEmpty,
    NameLength,
    NameCharset,
}

/// Which rule a label value breaks, from the first reason each side gives.
#[derive(Debug, PartialEq)]
enum ValueClass {
    Length,
    Charset,
}

fn key_class(reason: &str) -> KeyClass {
    if reason.starts_with("prefix part ") {
        KeyClass::Prefix
    } else if reason == "name part must be non-empty" {
        KeyClass::NameEmpty
    } else if reason.starts_with("name part must be no more than 63 ") {
        KeyClass::NameLength
    } else if reason.starts_with("name part ") {
        KeyClass::NameCharset
    } else if reason.starts_with("a valid label key ") || reason.contains("one '/'") {
        KeyClass::Shape
    } else {
        panic!("an unknown reason for a key: {reason:?}")
    }
}

fn value_class(reason: &str) -> ValueClass {
    if reason.starts_with("must be no more than 63 ") {
        ValueClass::Length
    } else {
        ValueClass::Charset
    }
}

/// The verdicts of the four name checks.
#[derive(Debug, PartialEq)]
struct NameVerdict {
    dns1123_label: bool,
    dns1123_subdomain: bool,
    qualified_name: Result<(), KeyClass>,
    label_value: Result<(), ValueClass>,
}

fn first_error<T>(errors: &[String], class: fn(&str) -> T) -> Result<(), T> {
    errors.first().map_or(Ok(()), |reason| Err(class(reason)))
}

/// `is_dns1123_label`, `is_dns1123_subdomain`, `validate_qualified_name` and `validate_value`
/// against apimachinery's `IsDNS1123Label`, `IsDNS1123Subdomain`, `IsQualifiedName` and
/// `IsValidLabelValue`: acceptance, and for keys and values the rule broken.
#[test]
fn names_agree_with_apimachinery() {
    let mut oracle = oracle();
    let started = Instant::now();
    let mut rng = Rng::new(3);
    let mut inputs = oracle.seeds.clone();
    inputs.extend((0..generated()).map(|_| name(&mut rng)));
    let requests: Vec<Value> = inputs
        .iter()
        .map(|text| json!({"op": "names", "input": text}))
        .collect();
    let answers = oracle.ask(&requests);
    drop(oracle);
    let mut report = Report::new("names", inputs.len(), started);
    for (text, answer) in inputs.iter().zip(&answers) {
        let answer = answer.names.as_ref().expect("a names answer");
        let host = NameVerdict {
            dns1123_label: is_dns1123_label(text),
            dns1123_subdomain: is_dns1123_subdomain(text),
            qualified_name: validate_qualified_name(text).map_err(|r| key_class(&r)),
            label_value: validate_value(text).map_err(|r| value_class(&r)),
        };
        let apimachinery = NameVerdict {
            dns1123_label: answer.dns1123_label.is_empty(),
            dns1123_subdomain: answer.dns1123_subdomain.is_empty(),
            qualified_name: first_error(&answer.qualified_name, key_class),
            label_value: first_error(&answer.label_value, value_class),
        };
        for (check, valid) in [
            ("dns1123 label", apimachinery.dns1123_label),
            ("dns1123 subdomain", apimachinery.dns1123_subdomain),
            ("qualified name", apimachinery.qualified_name.is_ok()),
            ("label value", apimachinery.label_value.is_ok()),
        ] {
            report.outcome(format!(
                "{check}: {}",
                if valid { "valid" } else { "invalid" }
            ));
        }
        report.check(text, &host, &apimachinery, host == apimachinery);
    }
    report.finish();
}
