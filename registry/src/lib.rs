//! Interface registry: the typed YAML model of every way Koru can control or observe an IDE, loaded in layers with located diagnostics, plus the route ranking the planner and doctor share.
//!
//! No I/O beyond reading layer files. The daemon decides when to load and what to do
//! with diagnostics; this crate only says what the files mean.

mod alternatives;
mod load;
mod model;
mod routes;
mod spans;

pub use alternatives::expand_alternatives;
pub use load::{
    file_schema, load, Diagnostic, InterfaceEntry, Layer, LayerReport, LayerSource, Loaded, Origin,
    PolicyEntry, Registry, RegistryFile,
};
pub use model::{
    product_matches, AppliesTo, Authority, BlockerCode, Direction, DisplayServer, Family,
    Interface, NotifyEvent, NotifyPolicy, Platform, Policy, ProductPolicy, Recovery,
    RecoveryActionKind, Requires, RouteKind, ScreenMarkers, Step, StepCondition, StepStage,
    TerminalInput, Transport, Verification, VerificationMode,
};
pub use routes::{effective_policy, rank_routes, EffectivePolicy};
pub use spans::Position;

/// The built-in registry, embedded in the binary.
pub const DEFAULT_REGISTRY_YAML: &str = include_str!("../default.yaml");
