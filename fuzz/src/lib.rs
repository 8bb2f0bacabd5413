//! Structured inputs for the fuzz targets: every choice a generator makes is read from the
//! fuzzer's bytes, so a coverage-guided fuzzer steers the structure. Once the bytes run out the
//! choices go on from a generator seeded with all of them, so a short random input still makes
//! a large structure, and the same input always makes the same one.

use std::time::Duration;

use serde_json::{Map, Value};

/// How long a fuzz target runs under `cargo test`: `default`, unless `BOLERO_RANDOM_TEST_TIME_MS`
/// sets a time or `BOLERO_RANDOM_ITERATIONS` a number of inputs (then until it is reached).
pub fn test_time(default: Duration) -> Duration {
    let var = |name| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    match (
        var("BOLERO_RANDOM_ITERATIONS"),
        var("BOLERO_RANDOM_TEST_TIME_MS"),
    ) {
        (_, Some(ms)) => Duration::from_millis(ms),
        (Some(_), None) => Duration::MAX,
        (None, None) => default,
    }
}

/// The fuzzer's bytes, read as a sequence of choices.
pub struct Draw<'a> {
    bytes: &'a [u8],
    /// The state of the generator that goes on after the bytes (xorshift64, never 0).
    state: u64,
}

impl<'a> Draw<'a> {
    /// Choices read from `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        // FNV-1a of the bytes and their length.
        let state = bytes
            .iter()
            .chain(&bytes.len().to_le_bytes())
            .fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
                (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
            });
        Self {
            bytes,
            state: state | 1,
        }
    }

    /// The next byte.
    pub fn byte(&mut self) -> u8 {
        match self.bytes.split_first() {
            Some((&b, rest)) => {
                self.bytes = rest;
                b
            }
            None => {
                self.state ^= self.state << 13;
                self.state ^= self.state >> 7;
                self.state ^= self.state << 17;
                (self.state >> 56) as u8
            }
        }
    }

    /// A number below `n` (`n` ≥ 1), from as few bytes as it needs.
    pub fn below(&mut self, n: usize) -> usize {
        let mut value = 0usize;
        let mut range = 1usize;
        while range < n {
            value = value << 8 | usize::from(self.byte());
            range = range.saturating_mul(256);
        }
        value % n
    }

    /// True with probability about 1/`n`.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    /// One of `options` (non-empty).
    pub fn pick<'o, T>(&mut self, options: &'o [T]) -> &'o T {
        &options[self.below(options.len())]
    }

    /// Up to `max` bytes.
    pub fn bytes(&mut self, max: usize) -> Vec<u8> {
        let n = self.below(max + 1);
        (0..n).map(|_| self.byte()).collect()
    }

    /// A string: one of `words`, an odd string from [`ODD`], or the next bytes read as UTF-8.
    pub fn string(&mut self, words: &[&str]) -> String {
        match self.below(16) {
            0..=12 if !words.is_empty() => self.pick(words).to_string(),
            0..=13 => self.pick(ODD).to_string(),
            14 => {
                let word = self.pick(ODD).to_string();
                word.repeat(self.below(80) + 1)
            }
            _ => String::from_utf8_lossy(&self.bytes(40)).into_owned(),
        }
    }

    /// A JSON value at most `depth` levels deep, with object keys from `keys` mostly, and
    /// strings from `words` mostly.
    pub fn json(&mut self, depth: usize, keys: &[&str], words: &[&str]) -> Value {
        let kinds = if depth == 0 { 5 } else { 8 };
        match self.below(kinds) {
            0 => Value::Null,
            1 => Value::Bool(self.one_in(2)),
            2 => self.number(),
            3 | 4 => Value::String(self.string(words)),
            5 => {
                let n = self.below(4);
                Value::Array((0..n).map(|_| self.json(depth - 1, keys, words)).collect())
            }
            _ => {
                let n = self.below(5);
                let mut map = Map::new();
                for _ in 0..n {
                    let key = self.string(keys);
                    map.insert(key, self.json(depth - 1, keys, words));
                }
                Value::Object(map)
            }
        }
    }

    /// A JSON number, often small, often at the edges of the integer types.
    pub fn number(&mut self) -> Value {
        match self.below(16) {
            0 => Value::from(0),
            1 => Value::from(-1),
            2 => Value::from(u64::MAX),
            3 => Value::from(i64::MIN),
            4 => Value::from(u32::MAX),
            5 => Value::from(u64::from(u32::MAX) + 1),
            6 => Value::from(1.5),
            7 => Value::from(1e300),
            8 => Value::from(self.below(1 << 20) * 1024),
            _ => Value::from(self.below(5000)),
        }
    }
}

/// Strings that break parsers: empty, blanks, signs, separators, escapes, markup of YAML and
/// JSON, non-ASCII and control characters, numbers at the edges.
pub const ODD: &[&str] = &[
    "",
    " ",
    "\t",
    "\n",
    "\0",
    "-",
    "+",
    ".",
    "..",
    "/",
    "*",
    "~",
    "!",
    "=",
    ",",
    ":",
    "#",
    "&a",
    "*a",
    "<<",
    "!!binary",
    "---",
    "{",
    "}",
    "[",
    "]",
    "\"",
    "'",
    "\\",
    "%",
    "é",
    "\u{202e}",
    "\u{feff}",
    "🦀",
    "A",
    "a",
    "0",
    "-0",
    "1e309",
    "NaN",
    "null",
    "true",
    "yes",
    "0x10",
    "18446744073709551616",
    "9223372036854775807",
    "-9223372036854775808",
    "4294967296",
    "1Mi",
    "1.5Gi",
    "64Q",
    "1e6",
    "10s",
    "1h2m3.5s",
    "-1s",
    "0s",
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Any bytes draw a value, and the same bytes the same one. (Every test binary of this
    /// package links the fuzzer, this one too.)
    #[test]
    fn any_bytes_draw_the_same_value_again() {
        bolero::check!().for_each(|bytes: &[u8]| {
            let draw = |bytes| {
                let mut draw = Draw::new(bytes);
                (
                    draw.json(4, &["a"], &["b"]),
                    draw.bytes(64),
                    draw.below(1000),
                )
            };
            assert_eq!(draw(bytes), draw(bytes));
        });
    }
}
