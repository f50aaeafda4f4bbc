//! `koru doctor`: probes which interfaces of the registry work on this machine, explains the ones that do not with the registry's recovery hints, and shows each session's drive paths. It never changes anything.

pub mod build;
pub mod evaluate;
pub mod probe;
pub mod render;
pub mod report;

pub use build::build_report;
pub use evaluate::{evaluate, Inputs};
pub use report::{report_schema, DoctorReport, Status};
