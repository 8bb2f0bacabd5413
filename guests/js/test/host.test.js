// The SDK modules that reach the host, over a fake host: every `kubewasm:controller/*` import
// resolves to one module whose functions record their calls in `calls` and answer with
// `answer`.
import assert from "node:assert/strict";
import { register } from "node:module";
import { beforeEach, test } from "node:test";

const fake = `
const call = (name) => (...args) => globalThis.fakeHost.call(name, args);
export const apply = call("apply"), applyStatus = call("applyStatus"), patch = call("patch");
export const get = call("get"), list = call("list"), listControlled = call("listControlled");
export const recordEvent = call("recordEvent");
export const log = call("log");
const remove = call("delete");
export { remove as delete };
`;
const fakeUrl = `data:text/javascript,${encodeURIComponent(fake)}`;
const hooks = `
export async function resolve(specifier, context, next) {
  return specifier.startsWith("kubewasm:controller/")
    ? { url: ${JSON.stringify(fakeUrl)}, shortCircuit: true }
    : next(specifier, context);
}
`;
register(`data:text/javascript,${encodeURIComponent(hooks)}`);

/** @type {{name: string, args: any[]}[]} */
let calls;
/** @type {(name: string, args: any[]) => any} */
let answer;
globalThis.fakeHost = {
  call(name, args) {
    calls.push({ name, args });
    return answer(name, args);
  },
};
beforeEach(() => {
  calls = [];
  answer = (_, [object]) => object;
});

const { apply, applyStatus } = await import("../src/writes.js");
const { defineController } = await import("../src/controller.js");
const cache = await import("../src/cache.js");
const { HostError } = await import("../src/errors.js");
const { Metadata, gvk } = await import("../src/kinds.js");

const configMap = { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c" } };

test("applies are owned and forced, and adopt only when asked", () => {
  assert.deepEqual(apply(configMap), configMap);
  apply(configMap, { owned: false });
  apply(configMap, { adopt: true });
  apply(configMap, { force: false, adopt: true });
  assert.deepEqual(
    calls.map(({ args }) => args[1]),
    [
      { owned: true, force: true, adopt: false },
      { owned: false, force: true, adopt: false },
      { owned: true, force: true, adopt: true },
      { owned: true, force: false, adopt: true },
    ],
  );
  assert.equal(calls[0].args[0], JSON.stringify(configMap));
});

test("status applies are forced only when asked", () => {
  applyStatus(configMap);
  applyStatus(configMap, {});
  applyStatus(configMap, { force: true });
  assert.deepEqual(
    calls.map(({ name, args }) => [name, args[1]]),
    [
      ["applyStatus", { force: false }],
      ["applyStatus", { force: false }],
      ["applyStatus", { force: true }],
    ],
  );
});

test("a refused adoption throws an AlreadyExists host error", () => {
  answer = () => {
    throw {
      payload: { tag: "api", val: { code: 409, reason: "AlreadyExists", message: "not ours" } },
    };
  };
  assert.throws(
    () => apply(configMap),
    (e) => e instanceof HostError && e.isAlreadyExists && e.isConflict && e.isTransient,
  );
});

test("listControlled asks for the objects a uid controls and parses them", () => {
  const pods = gvk("", "v1", "Pod");
  const web = { metadata: { name: "web-1", namespace: "ns" } };
  answer = () => [JSON.stringify(web)];
  assert.deepEqual(cache.listControlled(pods, "ns", "uid-1"), [web]);
  assert.deepEqual(cache.listControlled(pods, undefined, "uid-2"), [web]);
  assert.deepEqual(
    calls.map(({ name, args }) => [name, ...args]),
    [
      ["listControlled", pods, "ns", "uid-1"],
      ["listControlled", pods, undefined, "uid-2"],
    ],
  );
  answer = () => [];
  assert.deepEqual(cache.listControlled(pods, "ns", "uid-3"), []);
});

test("listControlled throws host errors and malformed JSON as HostErrors", () => {
  const pods = gvk("", "v1", "Pod");
  answer = () => {
    throw { payload: { tag: "denied", val: "pods are not declared" } };
  };
  assert.throws(
    () => cache.listControlled(pods, "ns", "uid"),
    (e) => e instanceof HostError && e.kind === "denied" && !e.isTransient,
  );
  answer = () => ["{"];
  assert.throws(
    () => cache.listControlled(pods, "ns", "uid"),
    (e) => e instanceof HostError && e.kind === "json",
  );
});

test("the declaration reconciles on every update unless it says otherwise", () => {
  const kind = gvk("", "v1", "ConfigMap");
  const reconcile = () => undefined;
  const declared = (metadata) => defineController({ metadata, reconcile }).metadata().reconcileOn;
  const every = { generation: false, labels: false, annotations: false, any: true };
  assert.deepEqual(declared(new Metadata("x", kind)), every);
  assert.deepEqual(declared(() => new Metadata("x", kind).reconcileOn("generation", "labels")), {
    generation: true,
    labels: true,
    annotations: false,
    any: false,
  });
  const record = new Metadata("x", kind).toWit();
  assert.deepEqual(declared({ ...record, reconcileOn: undefined }), { any: true });
  assert.deepEqual(declared({ ...record, reconcileOn: { annotations: true } }), {
    annotations: true,
  });
  assert.equal(calls.length, 0);
});
