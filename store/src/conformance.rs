//! The conformance suite (in progress).
