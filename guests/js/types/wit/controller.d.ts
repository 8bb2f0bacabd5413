/// <reference path="./interfaces/kubewasm-controller-cache.d.ts" />
/// <reference path="./interfaces/kubewasm-controller-events.d.ts" />
/// <reference path="./interfaces/kubewasm-controller-guest.d.ts" />
/// <reference path="./interfaces/kubewasm-controller-log.d.ts" />
/// <reference path="./interfaces/kubewasm-controller-types.d.ts" />
/// <reference path="./interfaces/kubewasm-controller-writes.d.ts" />
declare module 'kubewasm:controller/controller@0.2.1' {
  export type * as KubewasmControllerCache021 from 'kubewasm:controller/cache@0.2.1'; // import kubewasm:controller/cache@0.2.1
  export type * as KubewasmControllerEvents021 from 'kubewasm:controller/events@0.2.1'; // import kubewasm:controller/events@0.2.1
  export type * as KubewasmControllerLog021 from 'kubewasm:controller/log@0.2.1'; // import kubewasm:controller/log@0.2.1
  export type * as KubewasmControllerTypes021 from 'kubewasm:controller/types@0.2.1'; // import kubewasm:controller/types@0.2.1
  export type * as KubewasmControllerWrites021 from 'kubewasm:controller/writes@0.2.1'; // import kubewasm:controller/writes@0.2.1
  export * as guest from 'kubewasm:controller/guest@0.2.1'; // export kubewasm:controller/guest@0.2.1
}
