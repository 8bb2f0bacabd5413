//! A component exporting `kubewasm:controller/guest@1.0.0`: the right package at a version the
//! host does not implement.

wit_bindgen::generate!({ path: "wit", world: "controller" });

struct OtherWorld;

impl exports::kubewasm::controller::guest::Guest for OtherWorld {
    fn metadata() -> String {
        "other-world".into()
    }
}

// Native builds (`cargo test --workspace`) cannot link the component's export names.
#[cfg(target_arch = "wasm32")]
export!(OtherWorld);
