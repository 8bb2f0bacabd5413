//! Durations as written in the configuration: Go's syntax, and whole milliseconds.

use std::time::Duration;

use super::{ConfigError, invalid};

/// A duration in Go's syntax, as Kubernetes components take them: numbers with units
/// (`ns`, `us` or `µs`, `ms`, `s`, `m`, `h`), such as `15s`, `1.5s` or `1m30s`; `0` alone.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    let invalid = || format!("{text:?} is not a duration such as 15s, 500ms or 1m30s");
    if text.is_empty() {
        return Err(invalid());
    }
    let mut rest = text;
    let mut seconds = 0.0;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .ok_or_else(invalid)?;
        let number: f64 = rest[..number_end].parse().map_err(|_| invalid())?;
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(invalid()),
        };
        seconds += number * scale;
        rest = &rest[unit_end..];
    }
    Duration::try_from_secs_f64(seconds).map_err(|_| invalid())
}

/// `value` milliseconds at `field`, at least 1; `default` when absent.
pub(super) fn millis(
    value: Option<u64>,
    default: Duration,
    field: String,
) -> Result<Duration, ConfigError> {
    match value {
        None => Ok(default),
        Some(0) => Err(invalid(field, "0 is not at least 1")),
        Some(ms) => Ok(Duration::from_millis(ms)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_read_in_go_syntax() {
        let ok = |text: &str| parse_duration(text).unwrap();
        assert_eq!(ok("15s"), Duration::from_secs(15));
        assert_eq!(ok("1.5s"), Duration::from_millis(1500));
        assert_eq!(ok("1m30s"), Duration::from_secs(90));
        assert_eq!(ok("500ms"), Duration::from_millis(500));
        assert_eq!(ok("2h"), Duration::from_secs(7200));
        assert_eq!(ok("0"), Duration::ZERO);
        for text in ["", "2", "s", "1x", "-1s", "1..5s", "1e3s"] {
            let error = parse_duration(text).unwrap_err();
            assert!(error.contains("is not a duration"), "{text}: {error}");
        }
    }
}
