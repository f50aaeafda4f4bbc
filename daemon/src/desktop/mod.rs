//! The desktop's D-Bus services as the daemon and doctor use them: the session and system bus connections (`bus`), whether the screen is locked (`lock`), desktop notifications (`notifications`), the portal's remote input and clipboard (`portal`). A base room: it knows D-Bus and nothing else of the daemon.

pub mod bus;
pub mod lock;
pub mod notifications;
pub mod portal;

pub use bus::{Bus, BusError, Buses, Call, Provider};
pub use lock::{LockDetector, LockReport, LockSource};
