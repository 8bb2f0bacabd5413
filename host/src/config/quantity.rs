//! Kubernetes quantities, read as apimachinery reads them, and the byte sizes of the
//! configuration (a number or a quantity).

/// Why [`parse_quantity`] refused a text; each variant holds the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// Not a quantity.
    #[error("{0:?} is not a quantity")]
    Invalid(String),
    /// A quantity below zero.
    #[error("{0:?} is negative")]
    Negative(String),
    /// A quantity that is not a whole number of bytes.
    #[error("{0:?} is not a whole number of bytes")]
    Fraction(String),
    /// A quantity of more than `u64::MAX` bytes.
    #[error("{0:?} is too large")]
    TooLarge(String),
}

impl From<QuantityError> for String {
    fn from(error: QuantityError) -> Self {
        error.to_string()
    }
}

/// A Kubernetes quantity as a whole number of bytes, read as apimachinery's `ParseQuantity`
/// reads it: an optional sign, a decimal number (`128`, `1.5`, `.5`, `1.`, or no digits at all
/// for zero), and a binary suffix (`Ki` … `Ei`), a decimal suffix (`n`, `u`, `m`, `k`, `M`, `G`,
/// `T`, `P`, `E`) or a decimal exponent (`e6`, `E-3`, read as an int64 cut to an int32).
/// Its value is apimachinery's: rounded up to a multiple of 10^-9, and at most 2^63 - 1 with a
/// binary suffix. Of those values, only whole, non-negative byte counts that fit a u64 are
/// accepted; the others are refused with the first that applies of
/// [`QuantityError::Negative`], [`QuantityError::Fraction`] and [`QuantityError::TooLarge`].
pub fn parse_quantity(text: &str) -> Result<u64, QuantityError> {
    let invalid = || QuantityError::Invalid(text.to_owned());
    let (negative, number, fraction, suffix) = split_quantity(text).ok_or_else(invalid)?;
    let decimal = |exponent: i32| (exponent, 0);
    let (exponent, power) = match suffix {
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "" => decimal(0),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        // apimachinery keeps the low 32 bits of the exponent.
        _ => match suffix.strip_prefix(['e', 'E']).map(str::parse::<i64>) {
            Some(Ok(exponent)) => decimal(exponent as i32),
            _ => return Err(invalid()),
        },
    };
    let digits = format!("{number}{fraction}");
    // apimachinery needs digits where it computes with big numbers: below 10^-9 or from Pi on.
    if digits.is_empty() && (exponent < -9 || power >= 50) {
        return Err(invalid());
    }
    // The value is digits × 2^power × 10^-scale, the scale an int32 that may wrap around, as
    // apimachinery's.
    let scale = (fraction.len() as i32).wrapping_sub(exponent);
    let Some(mut value) = Decimal::new(&digits, power, -i64::from(scale)) else {
        return Ok(0);
    };
    if negative {
        return Err(QuantityError::Negative(text.to_owned()));
    }
    value.round_up_to_nanos();
    if power > 0 && value.exceeds(i64::MAX as u128) {
        return Ok(i64::MAX as u64);
    }
    if value.exponent < 0 {
        return Err(QuantityError::Fraction(text.to_owned()));
    }
    value
        .whole()
        .and_then(|v| u64::try_from(v).ok())
        .ok_or_else(|| QuantityError::TooLarge(text.to_owned()))
}

/// `text` split as apimachinery splits a quantity: whether it is negative, the digits before
/// and after the dot, and the suffix (`[eEinumkKMGTP]*[-+]?[0-9]*`); `None` if it is not one.
fn split_quantity(text: &str) -> Option<(bool, &str, &str, &str)> {
    if text.is_empty() {
        return None;
    }
    let digits = |s: &str| s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (negative, rest) = match text.strip_prefix(['+', '-']) {
        Some(rest) => (text.starts_with('-'), rest),
        None => (false, text),
    };
    let (number, rest) = rest.split_at(digits(rest));
    let (fraction, suffix) = match rest.strip_prefix('.') {
        Some(rest) => rest.split_at(digits(rest)),
        None => ("", rest),
    };
    let letters = suffix.trim_start_matches(|c: char| "eEinumkKMGTP".contains(c));
    let signed = letters.strip_prefix(['+', '-']).unwrap_or(letters);
    signed
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then_some((negative, number, fraction, suffix))
}

/// A positive decimal number: `digits` × 10^`exponent`, `digits` without leading or trailing
/// zeros.
struct Decimal {
    digits: Vec<u8>,
    exponent: i64,
}

impl Decimal {
    /// `digits` (ASCII) × 2^`power` × 10^`exponent`, or `None` if that is zero.
    fn new(digits: &str, power: u32, exponent: i64) -> Option<Self> {
        let mut value: Vec<u8> = digits.bytes().map(|b| b - b'0').collect();
        let factor = 1u64 << power;
        let mut carry = 0;
        for digit in value.iter_mut().rev() {
            let product = u64::from(*digit) * factor + carry;
            *digit = (product % 10) as u8;
            carry = product / 10;
        }
        while carry > 0 {
            value.insert(0, (carry % 10) as u8);
            carry /= 10;
        }
        let first = value.iter().position(|&d| d != 0)?;
        value.drain(..first);
        let mut decimal = Self {
            digits: value,
            exponent,
        };
        decimal.trim();
        Some(decimal)
    }

    fn trim(&mut self) {
        while self.digits.last() == Some(&0) {
            self.digits.pop();
            self.exponent += 1;
        }
    }

    /// Rounds up (away from zero) to a multiple of 10^-9, as apimachinery does.
    fn round_up_to_nanos(&mut self) {
        if self.exponent >= -9 {
            return;
        }
        // Keeps the digits at 10^-9 and above and adds 10^-9: the dropped ones are not all zero.
        let kept = (self.digits.len() as i64 + self.exponent + 9).max(0) as usize;
        self.digits.truncate(kept);
        self.exponent = -9;
        let nines = self.digits.iter().rev().take_while(|&&d| d == 9).count();
        self.digits.truncate(self.digits.len() - nines);
        self.exponent += nines as i64;
        match self.digits.last_mut() {
            Some(last) => *last += 1,
            None => self.digits.push(1),
        }
        self.trim();
    }

    /// The value if it is a whole number that fits a u128.
    fn whole(&self) -> Option<u128> {
        let zeros = u32::try_from(self.exponent).ok()?;
        let digits = self
            .digits
            .iter()
            .try_fold(0u128, |n, &d| n.checked_mul(10)?.checked_add(u128::from(d)))?;
        10u128.checked_pow(zeros)?.checked_mul(digits)
    }

    /// Whether the value is more than `bound`.
    fn exceeds(&self, bound: u128) -> bool {
        // The whole part; a fraction makes the value exceed a whole part equal to the bound.
        let whole_digits = self.digits.len() as i64 + self.exponent;
        let floor = Self {
            digits: self.digits[..whole_digits.clamp(0, self.digits.len() as i64) as usize]
                .to_vec(),
            exponent: self.exponent.max(0),
        };
        match floor.whole() {
            Some(floor) => floor > bound || floor == bound && self.exponent < 0,
            None => true,
        }
    }
}

/// A byte size as a plain number or a quantity string, at least `minimum`.
pub(super) fn byte_size(value: &serde_yaml::Value, minimum: u64) -> Result<u64, String> {
    let (bytes, shown) = match value {
        serde_yaml::Value::Number(n) => {
            // YAML reads `1e9` as a float; accept it when it is a whole number of bytes.
            let whole = n.as_u64().or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && (0.0..18_446_744_073_709_551_616.0).contains(f))
                    .map(|f| f as u64)
            });
            match whole {
                Some(bytes) => (bytes, n.to_string()),
                None => return Err(format!("{n} is not a whole, non-negative number of bytes")),
            }
        }
        serde_yaml::Value::String(s) => (parse_quantity(s)?, format!("{s:?}")),
        other => {
            let found = match other {
                serde_yaml::Value::Bool(b) => b.to_string(),
                serde_yaml::Value::Sequence(_) => "a list".to_owned(),
                serde_yaml::Value::Mapping(_) => "a mapping".to_owned(),
                _ => "a tagged value".to_owned(),
            };
            return Err(format!(
                "expected a number of bytes or a quantity such as \"64Mi\", found {found}"
            ));
        }
    };
    if bytes < minimum {
        return Err(format!(
            "{shown} is below the minimum of {} ({minimum} bytes)",
            binary_quantity(minimum)
        ));
    }
    Ok(bytes)
}

/// `bytes` in the largest binary unit that divides it: `1Mi`, `1Ki`, `1000`.
fn binary_quantity(bytes: u64) -> String {
    ["Ei", "Pi", "Ti", "Gi", "Mi", "Ki"]
        .iter()
        .zip((1..=6).rev())
        .find(|&(_, power)| bytes != 0 && bytes.is_multiple_of(1u64 << (10 * power)))
        .map_or_else(
            || bytes.to_string(),
            |(unit, power)| format!("{}{unit}", bytes >> (10 * power)),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities() {
        let ok: &[(&str, u64)] = &[
            ("0", 0),
            ("1048576", 1 << 20),
            ("1Ki", 1 << 10),
            ("64Mi", 64 << 20),
            ("2Gi", 2 << 30),
            ("1Ti", 1 << 40),
            ("1Pi", 1 << 50),
            ("1Ei", 1 << 60),
            ("1.5Gi", 3 << 29),
            ("0.5Ki", 512),
            (".5Ki", 512),
            ("1.Ki", 1024),
            ("128k", 128_000),
            ("100M", 100_000_000),
            ("1G", 1_000_000_000),
            ("1T", 1_000_000_000_000),
            ("1P", 1_000_000_000_000_000),
            ("1E", 1_000_000_000_000_000_000),
            ("129e6", 129_000_000),
            ("1E3", 1_000),
            ("1.5e3", 1_500),
        ];
        for &(text, bytes) in ok {
            assert_eq!(parse_quantity(text), Ok(bytes), "{text:?}");
        }
        let bad: &[(&str, &str)] = &[
            ("", "is not a quantity"),
            ("1..2", "is not a quantity"),
            ("64Q", "is not a quantity"),
            ("64mi", "is not a quantity"),
            ("64 Mi", "is not a quantity"),
            ("-1Mi", "is negative"),
            ("1e", "is not a quantity"),
            ("1e-3", "is not a whole number of bytes"),
            ("0x10", "is not a quantity"),
            ("0.1", "is not a whole number of bytes"),
            ("1.0001Ki", "is not a whole number of bytes"),
            ("1e20", "is too large"),
            ("1e99", "is too large"),
            ("99999999999999999999999999999999999999999", "is too large"),
        ];
        for &(text, reason) in bad {
            let error = parse_quantity(text).unwrap_err().to_string();
            assert!(
                error.contains(reason),
                "{text:?}: {error:?} lacks {reason:?}"
            );
        }
    }

    /// Each found by the differential tests against apimachinery's `ParseQuantity`.
    #[test]
    fn quantities_as_apimachinery_reads_them() {
        let max = i64::MAX as u64;
        let ok: &[(&str, u64)] = &[
            // Signs, and numbers without digits before or after the dot, or at all.
            ("+1", 1),
            ("+1Ki", 1024),
            ("-0", 0),
            ("-0.0", 0),
            ("1.", 1),
            (".", 0),
            ("-.", 0),
            ("+", 0),
            ("Mi", 0),
            ("Ti", 0),
            // Suffixes below one.
            ("1000m", 1),
            ("1000000u", 1),
            ("5000000000n", 5),
            ("n", 0),
            // Signed exponents, read as an int64 cut to an int32.
            ("1000e-3", 1),
            ("1e+3", 1000),
            ("1E+3", 1000),
            ("1e4294967296", 1),
            ("1e4294967299", 1000),
            // Rounded up to a multiple of 10^-9.
            ("0.9999999999", 1),
            ("1.9999999999999999999Ki", 2048),
            // Binary quantities capped at 2^63 - 1.
            ("8Ei", max),
            ("15Ei", max),
            ("16Ei", max),
            ("7.9999999999999999999999Ei", max),
            ("18446744073709551615", u64::MAX),
        ];
        for &(text, bytes) in ok {
            assert_eq!(parse_quantity(text), Ok(bytes), "{text:?}");
        }
        type Refusal = fn(String) -> QuantityError;
        let refused: &[(&str, Refusal)] = &[
            ("-1Mi", QuantityError::Negative),
            ("-0.5", QuantityError::Negative),
            ("-0.0000000001", QuantityError::Negative),
            ("1500m", QuantityError::Fraction),
            ("1e-3", QuantityError::Fraction),
            ("0.0000000001", QuantityError::Fraction),
            ("1e9223372036854775807", QuantityError::Fraction),
            ("1e2147483647", QuantityError::TooLarge),
            // The scale wraps around: 15 × 10^2147483647.
            ("1.5e-2147483648", QuantityError::TooLarge),
            ("18446744073709551616", QuantityError::TooLarge),
            // No digits, where apimachinery needs them.
            ("Pi", QuantityError::Invalid),
            ("e-10", QuantityError::Invalid),
            ("1e9223372036854775808", QuantityError::Invalid),
            ("", QuantityError::Invalid),
        ];
        for &(text, refusal) in refused {
            assert_eq!(
                parse_quantity(text),
                Err(refusal(text.to_owned())),
                "{text:?}"
            );
        }
    }
}
