//! Test fixture: for every ConfigMap labelled `kubewasm.dev/fixture=ledger`, keeps an owned
//! ConfigMap `<name>-ledger` whose `data.value` equals the source's, and logs `ledger` with
//! `event=start` and `event=end`, the key and the wall clock in nanoseconds (`at`) when each
//! reconcile starts and ends, so that a test reading the logs of several hosts can tell
//! whether two of them ever reconciled one key at once. Each reconcile keeps its CPU busy for
//! at least 20 ms, so that overlaps, if any, are wide enough to be seen; a source whose
//! `data.holdMs` names milliseconds has its reconciles last that long, asleep for the rest.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kubewasm_guest::apply;
use kubewasm_guest::prelude::*;
use serde_json::json;

/// The shortest reconcile, busy.
const HOLD: Duration = Duration::from_millis(20);

/// The fixture controller.
pub struct Ledger;

fn now() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

fn record(event: &str, key: &str, at: Duration) {
    kubewasm_guest::log::info(
        "ledger",
        &[
            ("event", event),
            ("source", key),
            ("at", &at.as_nanos().to_string()),
        ],
    );
}

impl Controller for Ledger {
    fn metadata() -> Metadata {
        let config_map = Gvk::new("", "v1", "ConfigMap");
        Metadata::new(
            "ledger",
            Selection::new(config_map.clone()).with_label_selector("kubewasm.dev/fixture=ledger"),
        )
        .owns(config_map)
        .max_concurrency(2)
    }

    fn reconcile(req: Request) -> Result<Action, ReconcileError> {
        let key = format!(
            "{}/{}",
            req.key.namespace.as_deref().unwrap_or(""),
            req.name()
        );
        let held = Instant::now();
        record("start", &key, now());
        let result = mirror(&req);
        while held.elapsed() < HOLD {
            std::hint::spin_loop();
        }
        let hold = req.object.as_ref().and_then(|source| {
            source["data"]["holdMs"]
                .as_str()
                .and_then(|ms| ms.parse().ok())
                .map(Duration::from_millis)
        });
        if let Some(rest) = hold.and_then(|hold| hold.checked_sub(held.elapsed())) {
            std::thread::sleep(rest);
        }
        record("end", &key, now());
        result
    }
}

fn mirror(req: &Request) -> Result<Action, ReconcileError> {
    let Some(source) = &req.object else {
        return Ok(Action::Done);
    };
    let value = source["data"]["value"].as_str().unwrap_or_default();
    let child = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": { "name": format!("{}-ledger", req.name()) },
        "data": { "value": value },
    });
    apply(&child, ApplyOptions::default())
        .map_err(|e| ReconcileError::from(e).context("applying the child"))?;
    Ok(Action::Done)
}

kubewasm_guest::export_controller!(Ledger);
