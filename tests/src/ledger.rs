//! The `ledger` test guest's record in a host's log: when each reconcile started and ended.

use anyhow::{Context, Result, ensure};

/// One reconcile of one source, by the wall clock in nanoseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// `<namespace>/<name>` of the source.
    pub source: String,
    /// When the reconcile started.
    pub start: u128,
    /// When it ended; `None` if the log ends first (the host was killed in it).
    pub end: Option<u128>,
}

impl Run {
    /// Whether the reconcile was running at `at`; one that never ended runs on.
    pub fn spans(&self, at: u128) -> bool {
        self.start <= at && self.end.is_none_or(|end| at <= end)
    }
}

/// The value after `prefix` in the whitespace-separated words of `line` (the first of a guest's
/// fields follows `fields=`).
pub fn word(line: &str, prefix: &str) -> Option<String> {
    line.split_whitespace()
        .map(|w| w.strip_prefix("fields=").unwrap_or(w))
        .find_map(|w| w.strip_prefix(prefix))
        .map(|w| w.trim_matches('"').to_owned())
}

/// Every reconcile `log` records, in the order they ended, then those that never ended. Fails
/// if one source is started twice without an end between, or ended without a start: the host
/// handed one key to two workers at once, or the log lost lines.
pub fn runs(log: &str) -> Result<Vec<Run>> {
    let mut runs = Vec::new();
    let mut open: Vec<(String, u128)> = Vec::new();
    for line in log.lines().filter(|l| l.contains(" ledger ")) {
        let (Some(event), Some(source), Some(at)) = (
            word(line, "event="),
            word(line, "source="),
            word(line, "at=").and_then(|a| a.parse::<u128>().ok()),
        ) else {
            continue;
        };
        let opened = open.iter().position(|(s, _)| *s == source);
        if event == "start" {
            ensure!(opened.is_none(), "{source} started twice at once");
            open.push((source, at));
        } else {
            let (source, start) =
                open.swap_remove(opened.with_context(|| format!("{source} ended unstarted"))?);
            runs.push(Run {
                source,
                start,
                end: Some(at),
            });
        }
    }
    open.sort_by_key(|(_, start)| *start);
    runs.extend(open.into_iter().map(|(source, start)| Run {
        source,
        start,
        end: None,
    }));
    Ok(runs)
}
