/// <reference path="./kubewasm-controller-types.d.ts" />
declare module 'kubewasm:controller/writes@0.2.1' {
  /**
   * Server-side apply of `object` (JSON with `apiVersion`, `kind`, `metadata.name`; the
   * namespace defaults to the reconciled object's). Returns the object as the API server
   * holds it afterwards. An apply that would change nothing is not sent.
   */
  export function apply(object: string, options: ApplyOptions): string;
  /**
   * Server-side apply of the `status` subresource, with the same rules as `apply`: it is
   * forced only if the guest asks.
   */
  export function applyStatus(object: string, options: StatusOptions): string;
  /**
   * Deletes an object; background propagation. Deleting an object that is already gone
   * returns an `api` error with code 404.
   */
  export { _delete as delete };
  function _delete(kind: Gvk, namespace: string | undefined, name: string, preconditions: Preconditions): void;
  /**
   * Patches an object and returns it as the API server holds it afterwards.
   */
  export function patch(kind: Gvk, namespace: string | undefined, name: string, patchType: PatchType, patch: string): string;
  export type Gvk = import('kubewasm:controller/types@0.2.1').Gvk;
  export type Error = import('kubewasm:controller/types@0.2.1').Error;
  /**
   * Options of a server-side apply.
   */
  export interface ApplyOptions {
    /**
     * Make the object being reconciled the controller owner of the applied object
     * (`ownerReferences` with `controller: true` and `blockOwnerDeletion: true`).
     */
    owned: boolean,
    /**
     * Take over fields another manager owns instead of failing with a conflict.
     */
    force: boolean,
    /**
     * With `owned`: take control of an existing object that has no controller owner.
     * Without it, an owned apply to an existing object that the reconciled object does not
     * control fails with an `api` error of code 409 and reason `AlreadyExists`, and nothing
     * is sent. An object controlled by another owner, or being deleted, is not taken over,
     * nor is anything while the reconciled object is being deleted. The existing object is
     * looked up in the host's cache, which may lag a creation by someone else.
     */
    adopt: boolean,
  }
  /**
   * Options of a server-side apply of the `status` subresource.
   */
  export interface StatusOptions {
    /**
     * Take over status fields another manager owns instead of failing with a conflict.
     */
    force: boolean,
  }
  /**
   * Preconditions of a delete.
   */
  export interface Preconditions {
    uid?: string,
    resourceVersion?: string,
  }
  /**
   * How a patch is encoded.
   * # Variants
   * 
   * ## `"merge"`
   * 
   * RFC 7386 JSON merge patch.
   * ## `"json"`
   * 
   * RFC 6902 JSON patch.
   */
  export type PatchType = 'merge' | 'json';
}
