//! Test fixture: a component exporting its own minimal world instead of
//! `kubewasm:controller/guest`; the host refuses to load it.

/// Bindings of `wit/world.wit`.
#[allow(unsafe_code, missing_docs)]
mod bindings {
    wit_bindgen::generate!({ path: "wit", world: "impostor" });
}

/// The component's export.
pub struct Impostor;

impl bindings::Guest for Impostor {
    fn greet(name: String) -> String {
        format!("hello, {name}")
    }
}

// Native builds (`cargo test --workspace`) cannot link the component's export names.
#[cfg(target_arch = "wasm32")]
#[allow(unsafe_code)]
const _: () = {
    bindings::export!(Impostor with_types_in bindings);
};
