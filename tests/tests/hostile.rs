//! Hostile guests are contained: one host runs the well-behaved `mirror` guest beside guests
//! that loop forever, sleep past their deadline, exhaust their memory or stack, trap, panic, flood their output, write a
//! kind they did not declare and read one they did not declare. Each failure shows in the
//! host's log with the guest and the key, is retried with backoff, and a guest failing again and
//! again is reported; the host stays up and `mirror` keeps reconciling. A module that is not a
//! controller component is refused at startup with a message naming the file and the problem.
//!
//! The mirror guest's convergence time with and without the hostile guests is printed, not
//! asserted: it depends on the machine.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kubewasm_tests::{
    HostProcess, WAIT, control_plane, eventually, guest_wasm, guest_wasm_with, parse_duration,
    run_host_to_exit, with_host,
};
use serde_json::json;

/// Mirror sources created while the hostile guests run (and, for comparison, without them).
const SOURCES: usize = 20;

/// Every hostile guest, each reconciling the ConfigMap `<name>-1` labelled with its name.
const HOSTILE: [&str; 9] = [
    "spin", "sleep", "bomb", "recurse", "trap", "panic", "chatty", "trespass", "snoop",
];

/// Deadline of the `spin` and `sleep` guests: short, so that their loops do not starve the
/// machine and their retries come quickly.
const SPIN_TIMEOUT_MS: u64 = 500;

/// One module entry of a host configuration, for the objects of `namespace`.
fn module(package: &str, namespace: &str, extra: &str) -> String {
    format!(
        "  - path: {}\n    namespaces: [{namespace}]\n{extra}",
        guest_wasm(package).display()
    )
}

/// A host running `mirror` and every hostile guest in `namespace`.
fn hostile_config(namespace: &str) -> String {
    let mut config = format!("modules:\n{}", module("mirror", namespace, ""));
    for guest in HOSTILE {
        let extra = match guest {
            "spin" | "sleep" => format!("    limits: {{timeoutMs: {SPIN_TIMEOUT_MS}}}\n"),
            "bomb" => "    limits: {memoryBytes: 16Mi}\n".to_owned(),
            _ => String::new(),
        };
        config.push_str(&module(guest, namespace, &extra));
    }
    config
}

/// Creates the ConfigMap `name` labelled for the fixture guest `fixture`.
async fn create_source(
    config_maps: &Api<ConfigMap>,
    fixture: &str,
    name: &str,
    value: &str,
) -> Result<()> {
    let source: ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": name, "labels": { "kubewasm.dev/fixture": fixture } },
        "data": { "value": value },
    }))?;
    config_maps
        .create(&PostParams::default(), &source)
        .await
        .with_context(|| format!("creating {name}"))?;
    Ok(())
}

/// Creates [`SOURCES`] mirror sources named `<prefix>-<i>` and returns how long it took until
/// every one was mirrored.
async fn converge(config_maps: &Api<ConfigMap>, prefix: &str) -> Result<Duration> {
    let start = Instant::now();
    for i in 0..SOURCES {
        let name = format!("{prefix}-{i}");
        create_source(config_maps, "mirror", &name, &name).await?;
    }
    eventually("every source to be mirrored", WAIT, || async {
        let mirrored = config_maps.list(&ListParams::default()).await?.items;
        let done = (0..SOURCES).all(|i| {
            let name = format!("{prefix}-{i}");
            mirrored.iter().any(|c| {
                c.metadata.name.as_deref() == Some(&format!("{name}-mirror"))
                    && c.data.as_ref().and_then(|d| d.get("value")) == Some(&name)
            })
        });
        Ok(done.then_some(()))
    })
    .await?;
    Ok(start.elapsed())
}

/// Waits until `mirror` reconciles: the host is up and its informers have listed.
async fn warm_up(config_maps: &Api<ConfigMap>) -> Result<()> {
    create_source(config_maps, "mirror", "warm-up", "warm").await?;
    eventually("the warm-up source to be mirrored", WAIT, || async {
        Ok(config_maps.get_opt("warm-up-mirror").await?.map(|_| ()))
    })
    .await
}

/// The records of the host's text log: a line starting with a timestamp
/// (`2026-01-01T00:00:00.000000Z`) and the lines that continue it, such as a wasm backtrace.
fn records(log: &str) -> Vec<String> {
    let mut records: Vec<String> = Vec::new();
    for line in log.lines() {
        let bytes = line.as_bytes();
        let starts = bytes.len() > 20 && bytes[4] == b'-' && bytes[10] == b'T';
        match records.last_mut() {
            Some(record) if !starts => {
                record.push('\n');
                record.push_str(line);
            }
            _ => records.push(line.to_owned()),
        }
    }
    records
}

/// The value of the field `name` of a log record (`name=value`, as the host's text log writes
/// it), without quotes.
fn field<'a>(record: &'a str, name: &str) -> Option<&'a str> {
    let start = record.rfind(&format!(" {name}="))? + name.len() + 2;
    let value = record[start..].split([' ', '\n']).next()?;
    Some(value.trim_matches('"'))
}

/// Records of the host's log about `guest` that contain every one of `texts`.
fn records_of(log: &str, guest: &str, texts: &[&str]) -> Vec<String> {
    records(log)
        .into_iter()
        .filter(|r| field(r, "guest") == Some(guest) && texts.iter().all(|t| r.contains(t)))
        .collect()
}

/// Waits until the host's log has a line about `guest` with every one of `texts`.
async fn logged(host: &HostProcess, guest: &str, texts: &[&str]) -> Result<()> {
    eventually(
        &format!("a log line of {guest} with {texts:?}"),
        WAIT,
        || async { Ok((!records_of(&host.log(), guest, texts).is_empty()).then_some(())) },
    )
    .await
}

#[tokio::test]
async fn hostile_guests_are_contained_while_mirror_keeps_reconciling() -> Result<()> {
    let plane = control_plane();
    let client = plane.client().await?;

    // Without hostile guests, for comparison.
    let calm = plane.namespace("calm").await?;
    let calm_config = format!("modules:\n{}", module("mirror", calm.name(), ""));
    let calm_maps = Api::<ConfigMap>::namespaced(client.clone(), calm.name());
    let mut alone = Duration::ZERO;
    with_host(calm.name(), &calm_config, async |_| {
        warm_up(&calm_maps).await?;
        alone = converge(&calm_maps, "source").await?;
        Ok(())
    })
    .await?;

    let ns = plane.namespace("hostile").await?;
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), ns.name());
    let mut beside = Duration::ZERO;
    with_host(ns.name(), &hostile_config(ns.name()), async |host| {
        warm_up(&config_maps).await?;
        for guest in HOSTILE {
            create_source(&config_maps, guest, &format!("{guest}-1"), "x").await?;
        }
        // While they fail, and retry at their shortest backoff, mirror converges.
        beside = converge(&config_maps, "source").await?;

        // Every failing guest fails visibly, with its key, and is reported as failing.
        let failures: [(&str, &[&str]); 8] = [
            ("spin", &["deadline of 500ms exceeded"]),
            // Its sleep is a host-side wait that epoch interruption alone never ends.
            ("sleep", &["deadline of 500ms exceeded"]),
            (
                "bomb",
                &["memory limit exceeded", "the limit is 16777216 bytes"],
            ),
            ("recurse", &["trapped"]),
            ("trap", &["trapped", "unreachable"]),
            ("panic", &["trapped"]),
            (
                "trespass",
                &["denied: v1/Secret", "exceeds the limit of 1048576"],
            ),
            ("snoop", &["denied: v1/ServiceAccount"]),
        ];
        for (guest, texts) in failures {
            let key = format!("key={}/{guest}-1", ns.name());
            let mut texts = texts.to_vec();
            texts.extend(["reconcile failed", key.as_str()]);
            logged(host, guest, &texts).await?;
            logged(
                host,
                guest,
                &["guest is failing: 5 reconciles in a row failed"],
            )
            .await?;
        }
        logged(host, "panic", &["panicked at", "stream=\"stderr\""]).await?;
        logged(host, "trespass", &["host call denied"]).await?;
        logged(host, "snoop", &["host call denied"]).await?;
        // The chatty guest is cut at every cap, and its reconciles succeed.
        logged(host, "chatty", &["log output truncated"]).await?;
        logged(
            host,
            "chatty",
            &["stdout truncated", "bytes beyond the limit of 65536"],
        )
        .await?;
        logged(
            host,
            "chatty",
            &["guest output over the rate limit of 100 lines"],
        )
        .await?;

        // Retries back off: each failure of a key waits longer than the one before.
        let log = host.log();
        let trap_key = format!("key={}/trap-1", ns.name());
        let delays: Vec<Duration> = records_of(&log, "trap", &["reconcile failed", &trap_key])
            .iter()
            .filter_map(|r| parse_duration(field(r, "retry_in")?))
            .collect();
        ensure!(
            delays.len() >= 3 && delays.windows(2).all(|w| w[0] < w[1]),
            "backoff grows with every failure: {delays:?}"
        );
        ensure!(
            records_of(&log, "chatty", &["reconcile failed"]).is_empty(),
            "the chatty guest's reconciles succeed"
        );

        // What the trespasser asked for never reached the cluster.
        let secrets = Api::<Secret>::namespaced(client.clone(), ns.name());
        ensure!(secrets.get_opt("trespass-1-loot").await?.is_none());
        ensure!(config_maps.get_opt("trespass-1-huge").await?.is_none());

        // A guest that stops failing is reported as recovered.
        config_maps
            .patch(
                "panic-1",
                &PatchParams::default(),
                &Patch::Merge(json!({ "data": { "calm": "true" } })),
            )
            .await?;
        logged(host, "panic", &["guest recovered after"]).await?;

        // One key failing on its own while another is idle is that key's failure: logged on
        // every retry, but the guest is not failing again.
        create_source(&config_maps, "panic", "panic-2", "x").await?;
        let stuck = format!("key={}/panic-2", ns.name());
        eventually("panic-2 to fail ten times", WAIT, || async {
            let failed = records_of(&host.log(), "panic", &["reconcile failed", &stuck]);
            Ok((failed.len() >= 10).then_some(()))
        })
        .await?;
        let reported = records_of(&host.log(), "panic", &["guest is failing"]).len();
        ensure!(
            reported == 1,
            "one stuck key beside an idle one does not make the guest failing again: {reported} reports"
        );
        Ok(())
    })
    .await?;
    eprintln!(
        "mirror converged on {SOURCES} sources in {alone:.2?} alone and in {beside:.2?} beside \
         {} hostile guests (creating the sources included, polled every 100 ms)",
        HOSTILE.len()
    );
    Ok(())
}

#[tokio::test]
async fn a_guest_reading_secrets_it_is_not_granted_is_refused_at_load() -> Result<()> {
    let ns = control_plane().namespace("snoop").await?;
    let config = format!(
        "modules:\n{}",
        module(
            "snoop",
            ns.name(),
            "    grants:\n      - apiGroups: ['']\n        resources: [configmaps]\n        verbs: ['*']\n"
        )
    );
    let (status, output) = run_host_to_exit("snoop-refused", &config)?;
    ensure!(!status.success(), "the host refuses to start: {output}");
    ensure!(
        output.contains("needs permissions its grants do not give")
            && output.contains("get,list,watch secrets (core) in all namespaces"),
        "the error names the Secrets it is not granted: {output}"
    );
    Ok(())
}

/// Files that are not controller components, each with what the host says about it.
fn broken_modules(dir: &Path) -> Result<Vec<(PathBuf, &'static str)>> {
    std::fs::create_dir_all(dir)?;
    let good = std::fs::read(guest_wasm("mirror"))?;
    let truncated = dir.join("truncated.wasm");
    std::fs::write(&truncated, &good[..good.len() / 2])?;
    let text = dir.join("text.wasm");
    std::fs::write(&text, "this is not WebAssembly\n")?;
    // The smallest valid core module: a module, but not a component.
    let core = dir.join("core.wasm");
    std::fs::write(&core, b"\0asm\x01\0\0\0")?;
    let not_a_component = "is not a valid WebAssembly component";
    Ok(vec![
        (
            guest_wasm("impostor"),
            "does not match the `kubewasm:controller` world",
        ),
        (truncated, not_a_component),
        (
            text,
            "is not a valid WebAssembly component: not a WebAssembly binary",
        ),
        (core, not_a_component),
    ])
}

#[tokio::test]
async fn a_host_that_exits_fails_the_test_running_it_at_once() -> Result<()> {
    // Refused at start: the host exits before it reaches the cluster.
    let config = "modules:\n  - path: missing.wasm\n    maxConcurrency: 0\n";
    let result = with_host("exits", config, async |_| {
        eventually("what never happens", WAIT, || async { Ok(None::<()>) }).await
    })
    .await;
    let error = result.err().context("the test ran to its end")?;
    ensure!(
        error.to_string() == "the host exited during the test",
        "{error:#}"
    );
    Ok(())
}

#[tokio::test]
async fn a_module_that_is_not_a_controller_component_stops_the_host_at_startup() -> Result<()> {
    let ns = control_plane().namespace("broken").await?;
    let dir = tempfile::Builder::new()
        .prefix("kubewasm-broken-")
        .tempdir()?;
    for (i, (path, problem)) in broken_modules(dir.path())?.into_iter().enumerate() {
        let config = format!(
            "modules:\n{}  - path: {}\n",
            module("mirror", ns.name(), ""),
            path.display()
        );
        let (status, output) = run_host_to_exit(&format!("broken-{i}"), &config)?;
        ensure!(
            !status.success(),
            "the host refuses {}: {output}",
            path.display()
        );
        ensure!(
            output.contains(&path.display().to_string()) && output.contains(problem),
            "the error names {} and says it {problem:?}: {output}",
            path.display()
        );
    }
    Ok(())
}

#[test]
fn render_stops_a_sleeping_guest_at_its_deadline() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let object = dir.path().join("sleep-1.yaml");
    std::fs::write(
        &object,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sleep-1\n  namespace: default\n  labels: {kubewasm.dev/fixture: sleep}\n",
    )?;
    let (host, sleep) = (kubewasm_tests::host_binary(), guest_wasm("sleep"));
    let start = Instant::now();
    let output = std::process::Command::new(host)
        .arg("render")
        .arg(sleep)
        .arg("--object")
        .arg(&object)
        .output()?;
    let took = start.elapsed();
    let stdout = String::from_utf8_lossy(&output.stdout);
    ensure!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    ensure!(
        stdout.contains("outcome: timeout") && stdout.contains("deadline of 10s exceeded"),
        "{stdout}"
    );
    // The guest asks to sleep for 60 s: the answer must come at the 10 s deadline, not after it.
    ensure!(
        took < Duration::from_secs(40),
        "render answered after {took:?}"
    );
    Ok(())
}

#[test]
fn a_module_sleeping_in_metadata_is_refused_at_its_deadline() -> Result<()> {
    let (host, sleep) = (
        kubewasm_tests::host_binary(),
        guest_wasm_with("sleep", &["metadata"]),
    );
    let start = Instant::now();
    let output = std::process::Command::new(host)
        .arg("check")
        .arg(sleep)
        .output()?;
    let took = start.elapsed();
    let stderr = String::from_utf8_lossy(&output.stderr);
    ensure!(!output.status.success(), "the module was accepted");
    ensure!(
        stderr.contains("calling metadata() failed: deadline of 10s exceeded"),
        "{stderr}"
    );
    ensure!(
        took < Duration::from_secs(40),
        "check answered after {took:?}"
    );
    Ok(())
}
