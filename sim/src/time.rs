//! Virtual time: the run's elapsed virtual ns, each node's clock reading on top of it, and
//! the one way the simulator prints an instant.
//!
//! Clock model: every node reads madsim's virtual time through its own clock, a fixed skew
//! plus a drift in parts per million (both from the plan), on top of a fixed base date. The
//! store judges lease expiry by that clock, exactly as rulvar's stores judge it by the
//! client's `Date.now`. Outside a simulation `now_ns` reads 0.

use crate::plan::ClockSpec;

/// The store clock's base: 2024-01-01T00:00:00Z in ms. Fixed, so traces never depend on
/// madsim's own choice of a start date.
pub const CLOCK_BASE_MS: i64 = 1_704_067_200_000;

/// Virtual time since the run started, in ns.
pub fn now_ns() -> u64 {
    madsim::time::TimeHandle::try_current().map_or(0, |t| t.elapsed().as_nanos() as u64)
}

/// A node's clock reading (ms) at a virtual instant.
pub fn clock_at(clock: ClockSpec, at_ns: u64) -> i64 {
    let elapsed_ms = (at_ns / 1_000_000) as i64;
    let drifted = elapsed_ms + elapsed_ms * clock.drift_ppm / 1_000_000;
    CLOCK_BASE_MS + drifted + clock.skew_ms
}

/// A virtual instant as seconds with ms: `1.912s`.
pub fn secs(ns: u64) -> String {
    format!("{}.{:03}s", ns / 1_000_000_000, (ns / 1_000_000) % 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_applies_skew_and_drift_on_the_base() {
        let plain = ClockSpec { skew_ms: 0, drift_ppm: 0 };
        assert_eq!(clock_at(plain, 0), CLOCK_BASE_MS);
        assert_eq!(clock_at(plain, 2_500_000_000), CLOCK_BASE_MS + 2_500);
        let skewed = ClockSpec { skew_ms: -40, drift_ppm: 1_000 };
        assert_eq!(clock_at(skewed, 10_000_000_000), CLOCK_BASE_MS + 10_000 + 10 - 40);
    }

    #[test]
    fn secs_prints_whole_ms() {
        assert_eq!(secs(0), "0.000s");
        assert_eq!(secs(1_912_345_678), "1.912s");
        assert_eq!(secs(61_000_999_999), "61.000s");
    }
}
