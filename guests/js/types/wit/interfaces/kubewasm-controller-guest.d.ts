/// <reference path="./kubewasm-controller-types.d.ts" />
declare module 'kubewasm:controller/guest@0.2.1' {
  /**
   * Declares what the guest watches and owns. Must not depend on anything but the module.
   */
  export function metadata(): ControllerMetadata;
  /**
   * Brings the world in line with the primary object named by the request.
   */
  export function reconcile(request: Request): Outcome;
  /**
   * Cleans up before a primary object that carries the guest's finalizer is deleted. The
   * host removes the finalizer once this returns `done`.
   */
  export function finalize(request: Request): Outcome;
  /**
   * Maps a changed object of a kind watched with `mapping::guest` to primary keys.
   */
  export function mapKeys(kind: Gvk, object: string): Array<ObjectKey>;
  export type Gvk = import('kubewasm:controller/types@0.2.1').Gvk;
  export type ControllerMetadata = import('kubewasm:controller/types@0.2.1').ControllerMetadata;
  export type Request = import('kubewasm:controller/types@0.2.1').Request;
  export type Outcome = import('kubewasm:controller/types@0.2.1').Outcome;
  export type ReconcileError = import('kubewasm:controller/types@0.2.1').ReconcileError;
  export type ObjectKey = import('kubewasm:controller/types@0.2.1').ObjectKey;
}
