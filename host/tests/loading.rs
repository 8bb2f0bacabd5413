//! Loading modules: modules of the same bytes share one compiled, pre-linked component while one
//! of them is alive.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kubewasm::wasm::limits::CallLimits;
use kubewasm::wasm::module;
use kubewasm::wasm::module_bytes::ModuleBytes;
use kubewasm::wasm::runtime::Runtime;
use kubewasm_testkit::build;

fn podset() -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the host crate is inside the workspace");
    build(workspace.join("examples/podset/rust"))
}

#[tokio::test]
async fn modules_of_the_same_bytes_share_their_compiled_code_while_one_is_alive() {
    let dir = tempfile::tempdir().unwrap();
    let [first, second] = ["first.wasm", "second.wasm"].map(|name| dir.path().join(name));
    std::fs::copy(podset(), &first).unwrap();
    std::fs::copy(&first, &second).unwrap();
    let runtime = Runtime::new().unwrap();
    let limits = CallLimits::default();

    let a = module::load(&runtime, &first, &limits).await.unwrap();
    assert!(!a.from_cache, "the first load compiles");
    let b = module::load(&runtime, &second, &limits).await.unwrap();
    assert!(Arc::ptr_eq(&a.pre, &b.pre), "one component for both");
    assert!(b.from_cache, "the second load compiles nothing");
    assert_eq!(b.origin, second.display().to_string());
    assert_eq!(a.metadata, b.metadata);

    drop((a, b));
    let c = module::load(&runtime, &first, &limits).await.unwrap();
    assert!(
        !c.from_cache,
        "once no module holds it, the component is compiled again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modules_of_the_same_bytes_loaded_at_once_share_one_compiled_component() {
    let bytes = ModuleBytes::new(std::fs::read(podset()).unwrap());
    let runtime = Runtime::new().unwrap();
    let limits = CallLimits::default();
    // As a host starting with many WasmControllers of one image loads them all together.
    let loads = (0..4).map(|index| {
        module::load_bytes(&runtime, format!("object-{index}"), bytes.clone(), &limits)
    });
    let modules = futures::future::try_join_all(loads).await.unwrap();
    for module in &modules[1..] {
        assert!(
            Arc::ptr_eq(&modules[0].pre, &module.pre),
            "one component for all"
        );
    }
    let compiled = modules.iter().filter(|m| !m.from_cache).count();
    assert_eq!(compiled, 1, "one load compiles, the others wait for it");
}
