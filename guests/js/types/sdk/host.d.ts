/// <reference path="../wit/controller.d.ts" />
/**
 * The imports of the `kubewasm:controller` world, as componentize-js binds them from
 * `wit/controller.wit`. The only module of the SDK that reaches the host; the rest wraps it.
 */
export * as cache from "kubewasm:controller/cache@0.2.1";
export * as writes from "kubewasm:controller/writes@0.2.1";
export * as events from "kubewasm:controller/events@0.2.1";
export * as log from "kubewasm:controller/log@0.2.1";
