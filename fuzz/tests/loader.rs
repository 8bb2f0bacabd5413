//! Fuzz target of the module loader: what the host and `kubewasm check` run on a new module
//! (magic bytes, compilation, linking against the world, the `metadata` call, validation).
//!
//! Any bytes are loaded or refused with a [`LoadError`]; nothing panics, aborts or hangs. The
//! inputs are real components (guests of both contract versions and of another world) mutated
//! at the byte and at the section level, truncated or spliced, generated core modules, bare and
//! wrapped in a component, and raw bytes. Under `cargo test` it runs random inputs for a few
//! seconds and prints the slowest load; `fuzz/run loader` runs it coverage-guided.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use arbitrary::Unstructured;
use kubewasm::wasm::limits::CallLimits;
use kubewasm::wasm::module::{LoadError, load_bytes};
use kubewasm::wasm::module_bytes::ModuleBytes;
use kubewasm::wasm::runtime::Runtime;
use kubewasm_fuzz::{Draw, test_time};
use kubewasm_tests::guest_wasm;

/// How long the target runs under `cargo test` by default.
const TEST_TIME: Duration = Duration::from_secs(10);

/// The components mutated: a guest of the current contract, one of the previous contract, and
/// one that implements another world.
const SEEDS: &[&str] = &["trap", "earlier", "impostor"];

struct Loader {
    runtime: Runtime,
    executor: tokio::runtime::Runtime,
    seeds: Vec<Vec<u8>>,
    /// The slowest load so far: its time and size.
    slowest: Mutex<(Duration, usize)>,
    /// How many inputs ended in each outcome.
    outcomes: Mutex<BTreeMap<&'static str, usize>>,
}

fn loader() -> &'static Loader {
    static LOADER: OnceLock<Loader> = OnceLock::new();
    LOADER.get_or_init(|| Loader {
        runtime: Runtime::new().expect("engine"),
        executor: tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("executor"),
        seeds: SEEDS
            .iter()
            .map(|seed| std::fs::read(guest_wasm(seed)).expect("seed component"))
            .collect(),
        slowest: Mutex::new((Duration::ZERO, 0)),
        outcomes: Mutex::default(),
    })
}

/// The top-level sections of a WebAssembly binary, as byte ranges (header and payload), up to
/// the first one that does not parse.
fn sections(bytes: &[u8]) -> Vec<std::ops::Range<usize>> {
    let mut ranges = Vec::new();
    let mut at = 8;
    while at < bytes.len() {
        let start = at;
        at += 1;
        let (mut size, mut shift) = (0usize, 0);
        loop {
            let Some(&b) = bytes.get(at) else {
                return ranges;
            };
            at += 1;
            size |= usize::from(b & 0x7f) << shift;
            shift += 7;
            if b & 0x80 == 0 || shift > 28 {
                break;
            }
        }
        let Some(end) = at.checked_add(size).filter(|&end| end <= bytes.len()) else {
            return ranges;
        };
        at = end;
        ranges.push(start..end);
    }
    ranges
}

/// `module` as the only section of a component: compiled, then refused by the linker.
fn wrap_in_component(module: &[u8]) -> Vec<u8> {
    let mut out = b"\0asm\x0d\x00\x01\x00".to_vec();
    out.push(1); // a core module section
    let mut size = module.len();
    loop {
        let byte = (size & 0x7f) as u8;
        size >>= 7;
        out.push(if size == 0 { byte } else { byte | 0x80 });
        if size == 0 {
            break;
        }
    }
    out.extend_from_slice(module);
    out
}

/// A module made from the fuzzer's bytes.
fn input(bytes: &[u8], seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut draw = Draw::new(bytes);
    let seed = draw.pick(seeds).clone();
    match draw.below(8) {
        // The bytes as they are: a coverage-guided run starts from the components themselves.
        0 => bytes.to_vec(),
        // Bytes changed, inserted or removed.
        1 | 2 => {
            let mut out = seed;
            for _ in 0..draw.below(8) + 1 {
                let at = draw.below(out.len());
                match draw.below(3) {
                    0 => out[at] = draw.byte(),
                    1 => out.insert(at, draw.byte()),
                    _ => {
                        out.remove(at);
                    }
                }
            }
            out
        }
        // Cut short.
        3 => {
            let len = draw.below(seed.len());
            seed[..len].to_vec()
        }
        // A section removed, repeated, or taken from another component.
        4 | 5 => {
            let ranges = sections(&seed);
            let range = draw.pick(&ranges).clone();
            let mut out = seed[..range.start].to_vec();
            match draw.below(3) {
                0 => {}
                1 => out.extend_from_slice(&seed[range.clone()].repeat(2)),
                _ => {
                    let other = draw.pick(seeds);
                    let ranges = sections(other);
                    out.extend_from_slice(&other[draw.pick(&ranges).clone()]);
                }
            }
            out.extend_from_slice(&seed[range.end..]);
            out
        }
        // A generated core module, valid WebAssembly but not a component, bare or wrapped.
        _ => {
            let rest = draw.bytes(4096);
            let module = wasm_smith::Module::new(
                wasm_smith::Config::default(),
                &mut Unstructured::new(&rest),
            )
            .map(|m| m.to_bytes())
            .unwrap_or_default();
            if draw.one_in(2) {
                module
            } else {
                wrap_in_component(&module)
            }
        }
    }
}

#[test]
fn loader_target() {
    // A panic fails the test; the engine is not used after one.
    let shared = std::panic::AssertUnwindSafe(loader());
    bolero::check!()
        .with_test_time(test_time(TEST_TIME))
        .for_each(|bytes: &[u8]| {
            let loader: &Loader = *shared;
            let module = input(bytes, &loader.seeds);
            let size = module.len();
            let start = Instant::now();
            let loaded = loader.executor.block_on(load_bytes(
                &loader.runtime,
                "fuzz.wasm".into(),
                ModuleBytes::new(module),
                &CallLimits::default(),
            ));
            let elapsed = start.elapsed();
            let mut slowest = loader.slowest.lock().unwrap();
            if elapsed > slowest.0 {
                *slowest = (elapsed, size);
            }
            let outcome = match &loaded {
                Ok(_) => "loaded",
                Err(LoadError::Read { .. }) => panic!("bytes in memory are never read"),
                Err(LoadError::Compile { .. }) => "not a valid component",
                Err(LoadError::World { .. }) => "another world",
                Err(LoadError::Metadata { .. }) => "metadata() failed",
                Err(LoadError::Invalid { .. }) => "invalid metadata",
            };
            if let Err(error) = loaded {
                let message = error.to_string();
                assert!(message.starts_with("fuzz.wasm"), "{message}");
            }
            *loader.outcomes.lock().unwrap().entry(outcome).or_default() += 1;
        });
    let (time, size) = *loader().slowest.lock().unwrap();
    eprintln!("slowest load: {time:?} for {size} bytes");
    eprintln!("outcomes: {:?}", loader().outcomes.lock().unwrap());
}
