// The controller of src/index.js over a fake host: every `kubewasm:controller/*` import resolves
// to one module whose functions record their calls in `calls` and answer from `cluster`, a
// namespace of pods and PodSets as the host's cache would hold them.
import assert from "node:assert/strict";
import { register } from "node:module";
import { beforeEach, mock, test } from "node:test";

const fake = `
const call = (name) => (...args) => globalThis.fakeHost.call(name, args);
export const get = call("get"), list = call("list"), listControlled = call("listControlled");
export const apply = call("apply"), applyStatus = call("applyStatus"), patch = call("patch");
export const recordEvent = call("recordEvent"), log = call("log");
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

const UID = "podset-uid";

/** @type {{name: string, args: any[]}[]} */
let calls;
/** @type {any[]} the pods of namespace `ns` */
let pods;
/** @type {any[]} the PodSets of namespace `ns` */
let podsets;

/** @param {any} object */
const nameOf = (object) => object.metadata.name;
const byName = (/** @type {any} */ a, /** @type {any} */ b) =>
  nameOf(a) < nameOf(b) ? -1 : nameOf(a) > nameOf(b) ? 1 : 0;

/**
 * The objects whose labels satisfy `selector`, of which the fake knows equalities only (all the
 * controller sends for a `matchLabels` selector); none or an empty one matches everything.
 * @param {any[]} objects
 * @param {string | undefined} selector
 */
function select(objects, selector) {
  const equalities = (selector ?? "")
    .split(",")
    .filter((requirement) => requirement !== "")
    .map((requirement) => {
      const match = /^([^=!<>() ]+)=([^=,() ]*)$/.exec(requirement);
      assert.ok(match, `the fake host cannot read the selector ${JSON.stringify(selector)}`);
      return [match[1], match[2]];
    });
  return objects.filter((object) =>
    equalities.every(([key, value]) => object.metadata.labels?.[key] === value),
  );
}

const host = {
  /** @param {any} kind @param {string} namespace @param {string} name */
  get(kind, namespace, name) {
    assert.equal(kind.kind, "Pod");
    assert.equal(namespace, "ns");
    const pod = pods.find((pod) => nameOf(pod) === name);
    return pod === undefined ? undefined : JSON.stringify(pod);
  },
  /** @param {any} kind @param {string} namespace @param {string | undefined} selector */
  list(kind, namespace, selector) {
    assert.equal(namespace, "ns");
    const objects = kind.kind === "Pod" ? pods : podsets;
    return select(objects, selector).sort(byName).map((object) => JSON.stringify(object));
  },
  /** @param {any} kind @param {string} namespace @param {string} uid */
  listControlled(kind, namespace, uid) {
    assert.equal(kind.kind, "Pod");
    assert.equal(namespace, "ns");
    return pods
      .filter((pod) =>
        (pod.metadata.ownerReferences ?? []).some((ref) => ref.controller && ref.uid === uid),
      )
      .sort(byName)
      .map((pod) => JSON.stringify(pod));
  },
  /** @param {string} text */
  apply: (text) => text,
  /** @param {string} text */
  applyStatus: (text) => text,
  /** @param {any} _kind @param {string} _namespace @param {string} name */
  patch: (_kind, _namespace, name) => JSON.stringify(pods.find((pod) => nameOf(pod) === name)),
  delete: () => undefined,
  recordEvent: () => undefined,
  log: () => undefined,
};

globalThis.fakeHost = {
  /**
   * @param {string} name
   * @param {any[]} args
   */
  call(name, args) {
    calls.push({ name, args });
    return /** @type {any} */ (host)[name](...args);
  },
};

beforeEach(() => {
  calls = [];
  pods = [];
  podsets = [];
  mock.restoreAll();
});

const { guest } = await import("../src/index.js");
const { ALPHABET } = await import("@kubewasm/guest/names");

/**
 * @param {number} replicas
 * @param {any} [selector]
 */
function podset(replicas, selector = { matchLabels: { app: "web" } }) {
  return {
    apiVersion: "kubewasm.dev/v1alpha1",
    kind: "PodSet",
    metadata: { name: "web", namespace: "ns", uid: UID, generation: 1 },
    spec: {
      replicas,
      selector,
      template: {
        metadata: { labels: { app: "web" } },
        spec: { containers: [{ name: "c", image: "registry.k8s.io/pause:3.10" }] },
      },
    },
  };
}

/**
 * A pending pod of namespace `ns`, controlled by `controller` (a uid) if given.
 * @param {string} name
 * @param {Record<string, string>} labels
 * @param {string} [controller]
 */
function pod(name, labels, controller) {
  /** @type {any} */
  const metadata = { name, namespace: "ns", uid: `uid-${name}`, resourceVersion: "1", labels };
  if (controller !== undefined) {
    metadata.ownerReferences = [
      {
        apiVersion: "kubewasm.dev/v1alpha1",
        kind: "PodSet",
        name: "x",
        uid: controller,
        controller: true,
      },
    ];
  }
  return { apiVersion: "v1", kind: "Pod", metadata, spec: {}, status: { phase: "Pending" } };
}

/** @param {any} object the PodSet */
function reconcile(object) {
  return guest.reconcile({
    key: { namespace: "ns", name: "web" },
    reason: "changed",
    attempt: 1,
    object: JSON.stringify(object),
  });
}

/** The cache reads made, as `[function, ...arguments after the kind]`. */
function reads() {
  return calls
    .filter(({ name }) => name === "get" || name === "list" || name === "listControlled")
    .map(({ name, args: [kind, ...rest] }) => [name, kind.kind, ...rest]);
}

/** @param {string} name */
function writes(name) {
  return calls.filter((call) => call.name === name).map(({ args }) => args);
}

/**
 * Makes `generateName` draw these suffixes, one after the other: each is 5 times one character
 * of the alphabet.
 * @param {string[]} characters
 */
function suffixes(...characters) {
  let draw = 0;
  mock.method(crypto, "getRandomValues", (/** @type {Uint8Array} */ bytes) => {
    bytes.fill(ALPHABET.indexOf(characters[draw++]));
    return bytes;
  });
}

test("reconcile reads the pods it controls and the selector's orphans, not the namespace", () => {
  pods = [
    pod("web-a", { app: "web" }, UID),
    pod("web-b", { app: "web" }, UID),
    pod("web-relabelled", { app: "other" }, UID), // controlled, no longer matching
    pod("orphan", { app: "web" }),
    pod("theirs", { app: "web" }, "other-uid"),
    pod("unrelated", { app: "db" }),
  ];
  assert.deepEqual(reconcile(podset(4)), { tag: "done" });

  assert.deepEqual(reads(), [
    ["listControlled", "Pod", "ns", UID],
    ["list", "Pod", "ns", "app=web"],
  ]);
  // The orphan is adopted; the pods it controls are counted once, whichever list held them.
  assert.deepEqual(writes("patch").map(([, , name]) => name), ["orphan"]);
  assert.deepEqual(writes("apply"), []);
  assert.deepEqual(writes("delete"), []);
  const [[status]] = writes("applyStatus");
  assert.equal(JSON.parse(status).status.replicas, 4);
});

test("controlled pods are counted even when the selector no longer matches them", () => {
  pods = [pod("web-a", { app: "web" }, UID), pod("web-relabelled", { app: "other" }, UID)];
  reconcile(podset(1));
  assert.deepEqual(reads(), [
    ["listControlled", "Pod", "ns", UID],
    ["list", "Pod", "ns", "app=web"],
  ]);
  assert.deepEqual(writes("delete").map(([, , name]) => name), ["web-a"]);
  const [[status]] = writes("applyStatus");
  assert.equal(JSON.parse(status).status.replicas, 1);
});

test("a generated name taken by any pod is never applied onto", () => {
  pods = [
    pod("web-bbbbb", { app: "web" }, UID), // read: taken without asking the cache
    pod("web-ccccc", { app: "db" }), // neither controlled nor selected: found by get
  ];
  suffixes("b", "c", "d");
  reconcile(podset(2));

  assert.deepEqual(reads(), [
    ["listControlled", "Pod", "ns", UID],
    ["list", "Pod", "ns", "app=web"],
    ["get", "Pod", "ns", "web-ccccc"],
    ["get", "Pod", "ns", "web-ddddd"],
  ]);
  assert.deepEqual(writes("apply").map(([text]) => JSON.parse(text).metadata.name), ["web-ddddd"]);
});

test("a selector without a string form reads the namespace, then fails the spec", () => {
  pods = [pod("web-a", { app: "web" }, UID), pod("other", { app: "db" })];
  const invalid = { matchExpressions: [{ key: "app", operator: "Near", values: ["web"] }] };
  assert.throws(
    () => reconcile(podset(1, invalid)),
    (/** @type {any} */ error) => error.payload?.tag === "permanent",
  );
  assert.deepEqual(reads(), [
    ["listControlled", "Pod", "ns", UID],
    ["list", "Pod", "ns", undefined],
  ]);
  const [[status]] = writes("applyStatus");
  const { replicas, conditions } = JSON.parse(status).status;
  assert.equal(replicas, 1);
  assert.equal(conditions[0].reason, "InvalidSpec");
});

test("mapKeys lists the PodSets of the namespace for an orphan", () => {
  podsets = [podset(1)];
  const orphan = JSON.stringify(pod("o", { app: "web" }));
  const keys = guest.mapKeys({ group: "", version: "v1", kind: "Pod" }, orphan);
  assert.deepEqual(keys, [{ namespace: "ns", name: "web" }]);
  assert.deepEqual(reads(), [["list", "PodSet", "ns", undefined]]);
});
