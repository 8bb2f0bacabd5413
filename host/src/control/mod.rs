//! The control layer: the loop that runs each guest. A change seen by an informer becomes keys
//! (triggers), keys wait in the guest's workqueue, workers hand each key to the guest's current
//! module and execute its writes against the API server, and a tally keeps how reconciles end.
//! The host runs one controller per module on shared informers and reloads modules as their
//! files change; an unloaded guest's finalizer is watched until the guest runs again. Several
//! replicas share the keys of each guest through the sharder.

pub mod access;
pub mod apply;
pub mod controller;
pub mod events;
pub mod finalizer;
pub mod host;
pub mod names;
pub mod objects;
pub mod orphans;
pub mod queue;
pub mod refusal;
pub mod reload;
pub mod replica;
pub mod revisions;
pub mod sources;
pub mod tally;
pub mod trigger;
