//! The real machine's clocks and CPU accounting, for real processes only: the one place in
//! `sim` that reads them.
//!
//! - [`mono_ns`]: `CLOCK_MONOTONIC` in ns, read through rustix (the vDSO or a raw syscall,
//!   never libc, so madsim's libc interception cannot touch it). Machine-wide: every process
//!   on the host reads the same clock, so timestamps from different writer processes
//!   compare directly. Never called inside a simulation.
//! - [`cpu_times`]: user+system CPU seconds of this process and of its waited-for children,
//!   parsed from `/proc/self/stat` (no libc call).

/// The machine-wide monotonic clock, in ns (arbitrary origin, the same for every process).
#[allow(clippy::disallowed_methods)] // the real-process runtime reads the real clock here, and only here
pub fn mono_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec.max(0) as u64).saturating_mul(1_000_000_000).saturating_add(t.tv_nsec.max(0) as u64)
}

/// CPU seconds (user + system) of this process, and of its children that have been waited
/// for (`cutime + cstime`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CpuTimes {
    pub own_s: f64,
    pub children_s: f64,
}

impl CpuTimes {
    pub fn total(&self) -> f64 {
        self.own_s + self.children_s
    }

    /// `self - earlier`, field by field.
    pub fn since(&self, earlier: &CpuTimes) -> CpuTimes {
        CpuTimes { own_s: self.own_s - earlier.own_s, children_s: self.children_s - earlier.children_s }
    }
}

/// Parse the text of `/proc/<pid>/stat`: fields 14-17 (utime, stime, cutime, cstime) in
/// clock ticks. The command name (field 2) may hold spaces and parentheses, so fields are
/// counted after its last `)`.
pub fn parse_stat(text: &str, ticks_per_s: u64) -> Option<CpuTimes> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the name: field 3 (state) is f[0], so field n is f[n - 3].
    let tick = |n: usize| f.get(n - 3).and_then(|v| v.parse::<u64>().ok());
    let hz = ticks_per_s.max(1) as f64;
    Some(CpuTimes {
        own_s: (tick(14)? + tick(15)?) as f64 / hz,
        children_s: (tick(16)? + tick(17)?) as f64 / hz,
    })
}

/// This process's CPU times now; zeros where `/proc` is unavailable.
pub fn cpu_times() -> CpuTimes {
    let hz = rustix::param::clock_ticks_per_second();
    std::fs::read_to_string("/proc/self/stat").ok().and_then(|t| parse_stat(&t, hz)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_last_parenthesis() {
        let line = "4242 (a (weird) name) S 1 2 3 4 5 6 7 8 9 10 150 50 300 100 20 0 1 0 99";
        let t = parse_stat(line, 100).unwrap();
        assert_eq!(t, CpuTimes { own_s: 2.0, children_s: 4.0 });
        assert!(parse_stat("no parenthesis here", 100).is_none());
        assert!(parse_stat("1 (x) S 1 2", 100).is_none());
    }

    #[test]
    fn the_monotonic_clock_never_goes_back() {
        let a = mono_ns();
        let b = mono_ns();
        assert!(b >= a && a > 0);
        assert!(cpu_times().own_s >= 0.0);
    }
}
