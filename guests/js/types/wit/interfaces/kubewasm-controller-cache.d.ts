/// <reference path="./kubewasm-controller-types.d.ts" />
declare module 'kubewasm:controller/cache@0.2.0' {
  /**
   * The object with this name, or `none` if the cache does not hold it.
   */
  export function get(kind: Gvk, namespace: string | undefined, name: string): string | undefined;
  /**
   * Every cached object of this kind, in one namespace or all (`none`), optionally filtered
   * by a label selector. The order is by namespace, then name. A list that would not fit in
   * the guest's memory limit is `invalid`.
   */
  export function list(kind: Gvk, namespace: string | undefined, labelSelector: string | undefined): Array<string>;
  export type Gvk = import('kubewasm:controller/types@0.2.0').Gvk;
  export type Error = import('kubewasm:controller/types@0.2.0').Error;
}
