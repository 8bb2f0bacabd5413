// Generates the TypeScript declarations of the SDK in guests/js/types/:
//   types/wit/    the WIT interfaces as componentize-js binds them, from wit/controller.wit (jco)
//   types/sdk/    the SDK's modules, from their JSDoc (tsc, which also type-checks them strictly)
//
//   node types.mjs [--check]
//
// With --check the declarations are generated in a temporary folder and compared with the
// committed ones: it fails, naming the files that differ, when they are not current.

import { execFileSync } from "node:child_process";
import { mkdtemp, readFile, readdir, rm, mkdir, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { $init, generateTypes } from "@bytecodealliance/jco-transpile/component";

const sdk = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const committed = join(sdk, "types");
const check = process.argv.includes("--check");
const out = check ? await mkdtemp(join(tmpdir(), "kubewasm-js-types-")) : committed;

try {
  await rm(join(out, "wit"), { recursive: true, force: true });
  await rm(join(out, "sdk"), { recursive: true, force: true });
  await $init;
  const wit = await readFile(join(sdk, "../../wit/controller.wit"), "utf8");
  const generated = generateTypes("controller", {
    wit: { tag: "source", val: wit },
    world: "controller",
    guest: true,
    features: { tag: "list", val: [] },
  });
  for (const [name, bytes] of generated) {
    const path = join(out, "wit", name);
    await mkdir(dirname(path), { recursive: true });
    await writeFile(path, bytes);
  }
  const tsc = join(sdk, "node_modules/.bin/tsc");
  const tsconfig = join(sdk, "tsconfig.json");
  execFileSync(tsc, ["-p", tsconfig, "--outDir", join(out, "sdk")], { stdio: "inherit" });
  // The host bindings are ambient modules: point a consumer's compiler at their declarations.
  const reference = '/// <reference path="../wit/controller.d.ts" />\n';
  for (const [name, text] of await files(join(out, "sdk"))) {
    if (text.includes('"kubewasm:controller/')) {
      await writeFile(join(out, "sdk", name), reference + text);
    }
  }
  if (check) {
    const stale = await differences(committed, out);
    if (stale.length > 0) {
      console.error(
        `guests/js/types is not current (${stale.join(", ")}): run node guests/js/tools/types.mjs`,
      );
      process.exitCode = 1;
    }
  }
} finally {
  if (check) {
    await rm(out, { recursive: true, force: true });
  }
}

/**
 * The files under `a` or `b` (relative paths) that are missing from one or differ.
 * @param {string} a
 * @param {string} b
 */
async function differences(a, b) {
  const [left, right] = await Promise.all([files(a), files(b)]);
  const names = [...new Set([...left.keys(), ...right.keys()])].sort();
  return names.filter((name) => left.get(name) !== right.get(name));
}

/**
 * Every file under `root`, by relative path, with its text.
 * @param {string} root
 */
async function files(root) {
  const found = new Map();
  const entries = await readdir(root, { recursive: true, withFileTypes: true }).catch(() => []);
  for (const entry of entries) {
    if (entry.isFile()) {
      const path = join(entry.parentPath ?? entry.path, entry.name);
      found.set(path.slice(root.length + 1), await readFile(path, "utf8"));
    }
  }
  return found;
}
