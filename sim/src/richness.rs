//! How much of the reachable abstract-state space a set of runs covered, estimated from the
//! runs themselves: software testing as species discovery (Böhme's STADS). The universe of
//! [`crate::oracle::states`] names every tuple, most of which no run can reach (a fenced
//! store never applies a superseded write), so "reached of the universe" says little. What a
//! user wants to know of a green sweep is how many reachable states it left unseen, and how
//! likely one more run is to find one.
//!
//! The model: each run is a sampling unit, and a state is "incident" in a run when the run
//! reached it (incidence data, not abundance: a state reached twice in one run counts once).
//! From the incidence counts alone:
//!
//! - **estimated reachable states** is the bias-corrected Chao2 estimator,
//!   `S_obs + (m-1)/m * Q1(Q1-1) / (2(Q2+1))`, where `m` is the runs, `Q1` the states
//!   reached by exactly one run and `Q2` by exactly two. It is a lower bound in expectation
//!   (it cannot see states whose chance per run is far below `1/m`), with Chao's log-normal
//!   95% interval, whose lower end is never below the states observed.
//! - **discovery**, Good-Turing's `Q1/m`: how many states no run reached yet the next run
//!   is expected to reach (STADS's residual risk of a green sweep). A run reaches many
//!   states at once (incidence data), so this is an expected count, not a probability: it
//!   exceeds 1 when a few runs left many singletons; the chance that the next run reaches
//!   any new state is at most it (Markov), which is what the text prints, capped at 100%.
//!
//! The estimates assume the runs are exchangeable, which holds for a seed sweep (each seed
//! an independent draw from the scenario's plan distribution), and they bound what THAT
//! distribution reaches: plans it never draws (a guided search's) can reach more. An
//! explore report carries no estimate: a search mutates the entries that reached rare
//! states, so rare states stop being singletons and Chao2 reads near-complete coverage
//! where there is none (measured: 8 singletons in 5,000 runs of `queue`, "99.7% seen").

use serde::{Deserialize, Serialize};

/// A coverage estimate from incidence counts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Richness {
    /// The runs (sampling units).
    pub runs: u64,
    /// States reached by at least one run.
    pub observed: u64,
    /// States reached by exactly one run (Q1) and by exactly two (Q2).
    pub singletons: u64,
    pub doubletons: u64,
    /// Chao2 (bias-corrected): the reachable states estimated, and its 95% interval.
    pub estimated: f64,
    pub estimated_low: f64,
    pub estimated_high: f64,
    /// Good-Turing's Q1/m: the states none reached that one more run is expected to reach
    /// (a count; the chance that it reaches any is at most this).
    pub discovery: f64,
}

impl Richness {
    /// The estimate from, per state reached, the number of runs that reached it (states no
    /// run reached contribute nothing; a count above `runs` is clamped to it).
    pub fn from_counts(counts: impl IntoIterator<Item = u64>, runs: u64) -> Richness {
        let (mut observed, mut q1, mut q2) = (0u64, 0u64, 0u64);
        for c in counts.into_iter().map(|c| c.min(runs)) {
            observed += u64::from(c > 0);
            q1 += u64::from(c == 1);
            q2 += u64::from(c == 2);
        }
        if runs == 0 {
            return Richness::default();
        }
        let m = runs as f64;
        let (s, f1, f2) = (observed as f64, q1 as f64, q2 as f64);
        let k = (m - 1.0) / m;
        let unseen = k * f1 * (f1 - 1.0).max(0.0) / (2.0 * (f2 + 1.0));
        // Chao's variance of the bias-corrected estimator (as EstimateS computes it).
        let var = unseen
            + k * k * f1 * (2.0 * f1 - 1.0).powi(2) / (4.0 * (f2 + 1.0).powi(2))
            + k * k * f1 * f1 * f2 * (f1 - 1.0).powi(2) / (4.0 * (f2 + 1.0).powi(4));
        let (low, high) = if unseen > 0.0 && var > 0.0 {
            let spread = (1.96 * (1.0 + var / (unseen * unseen)).ln().sqrt()).exp();
            (s + unseen / spread, s + unseen * spread)
        } else {
            (s, s)
        };
        Richness {
            runs,
            observed,
            singletons: q1,
            doubletons: q2,
            estimated: s + unseen,
            estimated_low: low,
            estimated_high: high,
            discovery: f1 / m,
        }
    }

    /// The share of the estimated reachable states observed, per mille.
    pub fn covered_per_mille(&self) -> u64 {
        if self.estimated <= 0.0 {
            return 1000;
        }
        ((self.observed as f64 / self.estimated) * 1000.0).round() as u64
    }

    /// One line for the text reports, e.g. `estimated reachable 519 (95% 496-562, Chao2; 60
    /// states seen once, 36 twice): 90.8% seen; the next run is expected to reach 0.012 new
    /// states (Q1/m: at most a 1.20% chance of any)`.
    pub fn line(&self) -> String {
        let pm = self.covered_per_mille();
        format!(
            "estimated reachable {:.0} (95% {:.0}-{:.0}, Chao2; {} states seen once, {} twice): {}.{}% seen; the next run is expected to reach {:.3} new states (Q1/m: at most a {:.2}% chance of any)",
            self.estimated,
            self.estimated_low,
            self.estimated_high,
            self.singletons,
            self.doubletons,
            pm / 10,
            pm % 10,
            self.discovery,
            self.discovery.min(1.0) * 100.0
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_each_seen_by_many_runs_leave_nothing_unseen() {
        let r = Richness::from_counts([50, 40, 30, 3], 100);
        assert_eq!((r.observed, r.singletons, r.doubletons), (4, 0, 0));
        assert_eq!(r.estimated, 4.0);
        assert_eq!((r.estimated_low, r.estimated_high), (4.0, 4.0));
        assert_eq!(r.discovery, 0.0);
        assert_eq!(r.covered_per_mille(), 1000);
    }

    #[test]
    fn discovery_is_an_expected_count_and_the_printed_chance_is_capped() {
        // 3 runs, 26 states each reached by one run: 26/3 new states expected next run.
        let r = Richness::from_counts(std::iter::repeat_n(1, 26), 3);
        assert!((r.discovery - 26.0 / 3.0).abs() < 1e-12, "{}", r.discovery);
        let line = r.line();
        assert!(line.contains("expected to reach 8.667 new states"), "{line}");
        assert!(line.contains("at most a 100.00% chance of any"), "{line}");
        // Few singletons over many runs: the bound is the count itself.
        let line = Richness::from_counts([1, 50, 60], 100).line();
        assert!(line.contains("0.010 new states (Q1/m: at most a 1.00% chance of any)"), "{line}");
    }

    #[test]
    fn singletons_raise_the_estimate_by_chao2_and_the_interval_brackets_it() {
        // 10 states: 4 seen once, 2 seen twice, 4 seen often, over 100 runs.
        let r = Richness::from_counts([1, 1, 1, 1, 2, 2, 9, 9, 9, 9, 0, 0], 100);
        assert_eq!((r.observed, r.singletons, r.doubletons), (10, 4, 2));
        // 10 + (99/100) * 4*3 / (2*3) = 11.98
        assert!((r.estimated - 11.98).abs() < 1e-9, "{}", r.estimated);
        assert!(r.estimated_low >= 10.0 && r.estimated_low < r.estimated, "{r:?}");
        assert!(r.estimated_high > r.estimated, "{r:?}");
        assert!((r.discovery - 0.04).abs() < 1e-12);
        assert_eq!(r.covered_per_mille(), 835);
    }

    #[test]
    fn no_runs_estimate_nothing_and_counts_are_clamped_to_the_runs() {
        assert_eq!(Richness::from_counts([3, 1], 0), Richness::default());
        let r = Richness::from_counts([7], 1);
        assert_eq!((r.observed, r.singletons), (1, 1));
        // One run: (m-1)/m is zero, so nothing unseen is extrapolated from it.
        assert_eq!(r.estimated, 1.0);
    }

    #[test]
    fn the_estimate_recovers_a_known_population_sampled_at_random() {
        // 200 states, half common (300 per mille per run), half rare (4 per mille): after 500 runs
        // about 86 of the 100 rare ones are seen; Chao2 must land closer to 200 than the
        // observed count and its interval must hold 200.
        use crate::seed::{rng, Draw};
        let mut r = rng(7, "richness", 0);
        let p: Vec<u32> = (0..200).map(|i| if i < 100 { 300 } else { 4 }).collect();
        let runs = 500;
        let mut counts = vec![0u64; p.len()];
        for _ in 0..runs {
            for (c, &pi) in counts.iter_mut().zip(&p) {
                *c += u64::from(r.chance(pi));
            }
        }
        let est = Richness::from_counts(counts, runs);
        assert!(est.observed < 200, "{est:?}");
        assert!((200.0 - est.estimated).abs() < (200.0 - est.observed as f64), "{est:?}");
        assert!(est.estimated_low <= 200.0 && 200.0 <= est.estimated_high, "{est:?}");
    }
}
