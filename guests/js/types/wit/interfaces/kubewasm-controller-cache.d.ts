/// <reference path="./kubewasm-controller-types.d.ts" />
declare module 'kubewasm:controller/cache@0.2.1' {
  /**
   * The object with this name, or `none` if the cache does not hold it.
   */
  export function get(kind: Gvk, namespace: string | undefined, name: string): string | undefined;
  /**
   * Every cached object of this kind, in one namespace or all (`none`), optionally filtered
   * by a label selector. The order is by namespace, then name. A selector with an equality
   * (`key=value`, `key==value` or `key in (value)`) is served from the host's index of that
   * label key, so it costs the objects with that label value, not the namespace; the host
   * indexes the first 8 label keys selected on per cached kind and selection, and scans for
   * any other. A list that would not fit in the guest's memory limit is `invalid`.
   */
  export function list(kind: Gvk, namespace: string | undefined, labelSelector: string | undefined): Array<string>;
  /**
   * Every cached object of this kind, in one namespace or all (`none`), whose controller
   * reference (the entry of `metadata.ownerReferences` with `controller: true`) has this uid:
   * the objects the owner with this uid controls. The order is by namespace, then name. Served
   * from an index, so it costs the objects found, not the namespace. Objects that merely list
   * the owner among other owners are not included. A list that would not fit in the guest's
   * memory limit is `invalid`. Since 0.2.1.
   */
  export function listControlled(kind: Gvk, namespace: string | undefined, controllerUid: string): Array<string>;
  export type Gvk = import('kubewasm:controller/types@0.2.1').Gvk;
  export type Error = import('kubewasm:controller/types@0.2.1').Error;
}
