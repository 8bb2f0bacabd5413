//! Modules as OCI artifacts on a real registry: `kubewasm push` publishes the CNCF layout for
//! WebAssembly, and `check` and `render` pull by reference as the host does, refusing an
//! artifact of another layout, of another world or over the size limit before its layer is
//! fetched, and a digest the registry does not hold.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use anyhow::{Context, Result, ensure};
use kubewasm_tests::registry::{self, Registry, push_raw, sha256_hex};
use kubewasm_tests::{guest_wasm, host_binary, http_get_with};

/// Runs `kubewasm ARGS` with `stdin` and the environment `env`.
fn kubewasm(args: &[&str], stdin: &str, env: &[(&str, &Path)]) -> Output {
    let mut child = Command::new(host_binary())
        .args(args)
        .envs(env.iter().copied())
        // No Docker config of the machine's: credentials come only from what a test gives.
        .env("DOCKER_CONFIG", "/nonexistent")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running kubewasm");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("writing stdin");
    child.wait_with_output().expect("waiting for kubewasm")
}

fn text(output: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The manifest the registry holds for `repository:reference`, as JSON.
async fn manifest(registry: &Registry, path: &str) -> Result<serde_json::Value> {
    let (status, body) = http_get_with(
        &registry.address(),
        &format!("/v2/{path}"),
        &[("Accept", "application/vnd.oci.image.manifest.v1+json")],
    )
    .await?;
    ensure!(status == 200, "GET {path}: {status} {body}");
    Ok(serde_json::from_str(&body)?)
}

/// Whether the registry's access log shows a fetch of the blob `digest`.
fn fetched(registry: &Registry, digest: &str) -> bool {
    registry
        .log()
        .lines()
        .any(|line| line.contains("GET /v2/") && line.contains("/blobs/") && line.contains(digest))
}

#[tokio::test]
async fn a_pushed_module_is_a_wasm_artifact_that_check_and_render_pull_by_reference() -> Result<()>
{
    let registry = registry::shared();
    let module = guest_wasm("mirror");
    let bytes = std::fs::read(&module)?;
    let reference = registry.reference("artifacts/mirror:v1");

    let pushed = kubewasm(&["push", module.to_str().unwrap(), &reference], "", &[]);
    ensure!(pushed.status.success(), "{}", text(&pushed));
    let pinned = String::from_utf8(pushed.stdout.clone())?.trim().to_owned();
    let (_, digest) = pinned.split_once('@').context("a pinned reference")?;

    let manifest = manifest(registry, "artifacts/mirror/manifests/v1").await?;
    assert_eq!(
        manifest["mediaType"], "application/vnd.oci.image.manifest.v1+json",
        "{manifest}"
    );
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.wasm.config.v0+json"
    );
    let layers = manifest["layers"].as_array().context("layers")?;
    assert_eq!(layers.len(), 1, "{manifest}");
    assert_eq!(layers[0]["mediaType"], "application/wasm");
    assert_eq!(
        layers[0]["digest"],
        format!("sha256:{}", sha256_hex(&bytes))
    );
    let config = manifest["config"]["digest"]
        .as_str()
        .context("config digest")?;
    let (status, config) = http_get_with(
        &registry.address(),
        &format!("/v2/artifacts/mirror/blobs/{config}"),
        &[],
    )
    .await?;
    ensure!(status == 200, "{status}");
    let config: serde_json::Value = serde_json::from_str(&config)?;
    assert_eq!(config["os"], "wasip2");
    assert_eq!(config["architecture"], "wasm");
    assert!(
        config["component"]["exports"]
            .as_array()
            .is_some_and(|e| e.iter().any(|e| e == "kubewasm:controller/guest@0.2.1")),
        "{config}"
    );

    // The tag and the digest name the same module; the store is a fresh folder each time, so
    // both are pulled from the registry.
    for name in [reference.clone(), pinned.clone()] {
        let cache = tempfile::tempdir()?;
        let checked = kubewasm(&["check", &name], "", &[("XDG_CACHE_HOME", cache.path())]);
        ensure!(checked.status.success(), "{}", text(&checked));
        let report = String::from_utf8(checked.stdout)?;
        assert!(report.contains(&pinned), "{report}");
        assert!(report.contains(&sha256_hex(&bytes)), "{report}");
        assert!(
            report.contains("kubewasm:controller/guest@0.2.1"),
            "{report}"
        );
    }
    assert!(digest.starts_with("sha256:"));

    let dir = tempfile::tempdir()?;
    let object = dir.path().join("source.yaml");
    std::fs::write(
        &object,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: n\n  uid: u-1\n  labels: {kubewasm.dev/fixture: mirror}\ndata: {value: hello}\n",
    )?;
    let rendered = kubewasm(
        &["render", &pinned, "--object", object.to_str().unwrap()],
        "",
        &[("XDG_CACHE_HOME", dir.path())],
    );
    ensure!(rendered.status.success(), "{}", text(&rendered));
    let rendered = String::from_utf8(rendered.stdout)?;
    assert!(rendered.contains("a-mirror"), "{rendered}");
    assert!(rendered.contains("hello"), "{rendered}");
    Ok(())
}

#[tokio::test]
async fn push_refuses_what_is_not_a_component_of_the_contract() -> Result<()> {
    let registry = registry::shared();
    let other = guest_wasm("other-world");
    let dir = tempfile::tempdir()?;
    let core = dir.path().join("core.wasm");
    // A core module: the magic bytes and version 1.
    std::fs::write(&core, b"\0asm\x01\0\0\0")?;
    for (file, tag, expected) in [
        (
            other.as_path(),
            "other",
            "not kubewasm:controller/guest@0.2.1",
        ),
        (core.as_path(), "core", "core module"),
    ] {
        let reference = registry.reference(&format!("artifacts/refused:{tag}"));
        let pushed = kubewasm(&["push", file.to_str().unwrap(), &reference], "", &[]);
        assert!(!pushed.status.success(), "{}", text(&pushed));
        assert!(
            String::from_utf8_lossy(&pushed.stderr).contains(expected),
            "{}",
            text(&pushed)
        );
        let (status, _) = http_get_with(
            &registry.address(),
            &format!("/v2/artifacts/refused/manifests/{tag}"),
            &[],
        )
        .await?;
        assert_eq!(status, 404, "nothing was published for {tag}");
    }
    Ok(())
}

#[tokio::test]
async fn artifacts_of_another_layout_world_or_size_are_refused_before_their_layer_is_fetched()
-> Result<()> {
    let registry = Registry::start();
    let mirror = std::fs::read(guest_wasm("mirror"))?;
    let other = std::fs::read(guest_wasm("other-world"))?;

    // A container image's media types, with a component inside.
    let image = registry.reference("refused/image:v1");
    push_raw(
        &image,
        ("application/vnd.oci.image.config.v1+json", b"{}".to_vec()),
        ("application/vnd.oci.image.layer.v1.tar", mirror.clone()),
    )
    .await?;
    // The right layout, a component of another world, described truthfully by its config.
    let world = registry.reference("refused/world:v1");
    let config = serde_json::json!({
        "architecture": "wasm", "os": "wasip2",
        "layerDigests": [format!("sha256:{}", sha256_hex(&other))],
        "component": { "exports": ["example:other/thing@1.0.0"], "imports": [] },
    });
    push_raw(
        &world,
        (
            "application/vnd.wasm.config.v0+json",
            serde_json::to_vec(&config)?,
        ),
        ("application/wasm", other.clone()),
    )
    .await?;
    // A module of the contract, pushed by kubewasm, then checked under a small size limit.
    let large = registry.reference("refused/large:v1");
    let pushed = kubewasm(
        &["push", guest_wasm("mirror").to_str().unwrap(), &large],
        "",
        &[],
    );
    ensure!(pushed.status.success(), "{}", text(&pushed));

    let cache = tempfile::tempdir()?;
    let env = [("XDG_CACHE_HOME", cache.path())];
    let cases: [(&str, &[&str], &str); 3] = [
        (
            &image,
            &[],
            "is not a WebAssembly component artifact: its config is application/vnd.oci.image.config.v1+json",
        ),
        (
            &world,
            &[],
            "exports example:other/thing@1.0.0, not kubewasm:controller/guest@0.2.1",
        ),
        (
            &large,
            &["--max-module-size", "1Ki"],
            "over the limit of 1024",
        ),
    ];
    for (reference, flags, expected) in cases {
        let mut args = vec!["check", reference];
        args.extend(flags);
        let checked = kubewasm(&args, "", &env);
        assert!(!checked.status.success(), "{}", text(&checked));
        assert!(
            String::from_utf8_lossy(&checked.stderr).contains(expected),
            "{reference}: {}",
            text(&checked)
        );
    }
    // The configs were read, so the log shows blob fetches, and would show the layers'.
    let world_config = sha256_hex(&serde_json::to_vec(&config)?);
    assert!(fetched(&registry, &world_config), "{}", registry.log());
    for layer in [&mirror, &other] {
        let digest = sha256_hex(layer);
        assert!(
            !fetched(&registry, &digest),
            "the layer sha256:{digest} was fetched:\n{}",
            registry.log()
        );
    }
    Ok(())
}

#[tokio::test]
async fn a_digest_the_registry_does_not_hold_is_refused() -> Result<()> {
    let registry = registry::shared();
    let module = guest_wasm("mirror");
    let reference = registry.reference("artifacts/pinned:v1");
    let pushed = kubewasm(&["push", module.to_str().unwrap(), &reference], "", &[]);
    ensure!(pushed.status.success(), "{}", text(&pushed));
    let pinned = String::from_utf8(pushed.stdout)?.trim().to_owned();
    // One hex digit changed: a digest of nothing the registry holds.
    let last = pinned.chars().last().context("a digest")?;
    let wrong = format!(
        "{}{}",
        &pinned[..pinned.len() - 1],
        if last == '0' { '1' } else { '0' }
    );
    let cache = tempfile::tempdir()?;
    let checked = kubewasm(&["check", &wrong], "", &[("XDG_CACHE_HOME", cache.path())]);
    assert!(!checked.status.success(), "{}", text(&checked));
    assert!(
        String::from_utf8_lossy(&checked.stderr).contains("not found"),
        "{}",
        text(&checked)
    );
    Ok(())
}

#[tokio::test]
async fn a_registry_that_needs_credentials_takes_them_from_stdin_and_the_docker_config()
-> Result<()> {
    let registry = Registry::start_with_auth("pusher", "s3cret");
    let module = guest_wasm("mirror");
    let reference = registry.reference("private/mirror:v1");

    let anonymous = kubewasm(&["push", module.to_str().unwrap(), &reference], "", &[]);
    assert!(!anonymous.status.success(), "{}", text(&anonymous));
    assert!(
        String::from_utf8_lossy(&anonymous.stderr).contains("refused access"),
        "{}",
        text(&anonymous)
    );

    let pushed = kubewasm(
        &[
            "push",
            module.to_str().unwrap(),
            &reference,
            "--username",
            "pusher",
        ],
        "s3cret\n",
        &[],
    );
    ensure!(pushed.status.success(), "{}", text(&pushed));

    let cache = tempfile::tempdir()?;
    let anonymous = kubewasm(
        &["check", &reference],
        "",
        &[("XDG_CACHE_HOME", cache.path())],
    );
    assert!(!anonymous.status.success(), "{}", text(&anonymous));
    assert!(
        String::from_utf8_lossy(&anonymous.stderr).contains("refused access"),
        "{}",
        text(&anonymous)
    );

    let docker = tempfile::tempdir()?;
    let auth = registry::basic_authorization("pusher", "s3cret");
    let auth = auth.trim_start_matches("Basic ");
    std::fs::write(
        docker.path().join("config.json"),
        format!(
            r#"{{"auths":{{"http://{}":{{"auth":"{auth}"}}}}}}"#,
            registry.address()
        ),
    )?;
    let mut command = Command::new(host_binary());
    let checked = command
        .args(["check", &reference])
        .env("DOCKER_CONFIG", docker.path())
        .env("XDG_CACHE_HOME", cache.path())
        .output()?;
    ensure!(checked.status.success(), "{}", text(&checked));
    Ok(())
}
