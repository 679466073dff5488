//! The actors that drive the system under test inside a simulated process.

pub mod engine;
pub mod soak;
