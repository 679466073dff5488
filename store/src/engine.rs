//! The engine model (in progress).
