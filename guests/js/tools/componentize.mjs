// Builds a JavaScript guest into a component of the `controller` world.
//
//   node componentize.mjs ENTRY OUT.wasm
//
// ENTRY is the module exporting `guest`. It is bundled with the SDK (`@kubewasm/guest` resolves
// to this checkout's `guests/js/src`) into OUT.bundle.js, which componentize-js turns into
// OUT.wasm with StarlingMonkey's `http` and `fetch-event` features off: the host provides WASI
// without wasi:http. The component is rebuilt only when the bundle, the WIT or the toolchain
// changed (OUT.wasm.sha256 records the inputs it was built from), and is checked to import no
// interface the host lacks. Run by `build-guest`, which links guests/js/node_modules to the
// toolchain.

import { createHash } from "node:crypto";
import { access, readFile, readdir, rename, rm, writeFile } from "node:fs/promises";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { componentize } from "@bytecodealliance/componentize-js";
import { componentWit } from "@bytecodealliance/jco";
import { build } from "esbuild";

const sdk = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const wit = resolve(sdk, "../../wit");
/** StarlingMonkey features the host cannot serve: it links no wasi:http. */
const DISABLED = ["http", "fetch-event"];
/** Interfaces a component may import: the host links the controller world and WASI 0.2. */
const ALLOWED_IMPORTS = /^(kubewasm:controller\/|wasi:(io|clocks|random|cli|filesystem|sockets)\/)/;

const [entry, out] = process.argv.slice(2).map((path) => resolve(path));
if (!entry || !out) {
  console.error("usage: node componentize.mjs ENTRY OUT.wasm");
  process.exit(2);
}

const bundle = out.replace(/\.wasm$/, "") + ".bundle.js";
await build({
  entryPoints: [entry],
  outfile: bundle,
  // Paths in the bundle's comments are relative to this folder, not to the caller's.
  absWorkingDir: sdk,
  bundle: true,
  format: "esm",
  platform: "neutral",
  mainFields: ["module", "main"],
  alias: { "@kubewasm/guest": join(sdk, "src") },
  external: ["kubewasm:*"],
  legalComments: "none",
  logLevel: "warning",
});

const digest = createHash("sha256");
digest.update(await readFile(bundle));
// Every file under wit/, the folders of older contracts included.
const witFiles = (await readdir(wit, { recursive: true, withFileTypes: true }))
  .filter((entry) => entry.isFile())
  .map((entry) => join(entry.parentPath ?? entry.path, entry.name))
  .sort();
for (const path of witFiles) {
  digest.update(relative(wit, path)).update(await readFile(path));
}
digest.update(await readFile(join(sdk, "package-lock.json")));
digest.update(JSON.stringify(DISABLED));
const inputs = digest.digest("hex");
const stamp = `${out}.sha256`;
const built = await readFile(stamp, "utf8").catch(() => "");
if (
  built === inputs &&
  (await access(out).then(
    () => true,
    () => false,
  ))
) {
  console.error(`${out} is up to date`);
  process.exit(0);
}

const started = Date.now();
// componentize-js maps the folder of the source into the component by its path relative to the
// working directory, and breaks when that is `/`.
process.chdir(dirname(bundle));
const { component } = await componentize({
  sourcePath: bundle,
  witPath: wit,
  worldName: "controller",
  disableFeatures: DISABLED,
});
const imports = [...(await componentWit(component)).matchAll(/^\s*import ([^;]+);/gm)].map(
  ([, name]) => name,
);
const unsupported = imports.filter((name) => !ALLOWED_IMPORTS.test(name));
if (unsupported.length > 0) {
  console.error(`the component imports what the host does not provide: ${unsupported.join(", ")}`);
  process.exit(1);
}
await rm(stamp, { force: true });
await writeFile(`${out}.tmp`, component);
await rename(`${out}.tmp`, out);
await writeFile(stamp, inputs);
const seconds = ((Date.now() - started) / 1000).toFixed(1);
console.error(`built ${out} (${(component.length / 2 ** 20).toFixed(1)} MiB) in ${seconds} s`);
