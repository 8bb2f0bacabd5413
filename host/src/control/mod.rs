//! The control layer: the engine that runs one guest. A change seen by an informer becomes keys
//! (triggers), keys wait in the guest's workqueue, workers hand each key to the guest's current
//! module through the finalizer protocol and execute its writes against the API server, and a
//! tally keeps how reconciles end.

pub mod apply;
pub mod controller;
pub mod events;
pub mod finalizer;
pub mod queue;
pub mod replica;
pub mod tally;
pub mod trigger;
