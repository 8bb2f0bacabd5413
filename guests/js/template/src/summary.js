// Pure functions of the objects the guest reads: unit-tested natively with `node --test`.

import * as meta from "@kubewasm/guest/meta";

/**
 * What the guest logs about a ConfigMap: its resourceVersion and how many data keys it has.
 * @param {any} configMap
 */
export function summary(configMap) {
  return {
    resourceVersion: meta.resourceVersion(configMap) ?? "",
    dataKeys: String(Object.keys(configMap.data ?? {}).length),
  };
}
