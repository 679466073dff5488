//! The end state judged whole: every table the store keeps, not only the journal, meta and
//! blobs. The `leases` table must hold exactly the rows of the runs' last live grants (a
//! release or a deletion leaves none), the `epochs` table exactly the highest epoch ever
//! granted per run id (deletions included: the tombstone), and the schema must exist once
//! any process booted. Each property replays the apply-ordered history through the
//! oracle's own grant walk; none reads a function of the system under test.

use std::collections::BTreeMap;

use super::model::{staleness, t, walk_grants, who, Judged};
use super::{Expectation, Property, Witness};
use crate::history::{describe_call, LeaseRow, OpKind, Outcome};

/// The end-state properties, in report order.
pub const ALL: &[Property] = &[
    Property {
        name: "lease_rows_are_last_live_grants",
        expectation: Expectation::Always,
        claim: "At the end, each run's lease row is its last grant (owner, epoch, and the expiry its last legitimate acquire or renew set) unless its holder released it or a legitimate deletion removed it, and no other row exists.",
        not_checked: "Whether the expiry itself was right (grant_lasts_the_ttl judges each commit).",
        check: lease_rows_are_last_live_grants,
    },
    Property {
        name: "epochs_row_is_high_water",
        expectation: Expectation::Always,
        claim: "At the end, each run id ever granted has an epochs row equal to the highest epoch ever granted to it, across deletions, and no run id that was never granted has one.",
        not_checked: "Stores without an epochs table (the schema of every profile has one).",
        check: epochs_row_is_high_water,
    },
    Property {
        name: "release_and_delete_clear_the_lease",
        expectation: Expectation::Always,
        claim: "A release by the live holder and every applied deletion leave the run with no lease row at their commit.",
        not_checked: "Releases and deletions whose commit the store did not report (no after-commit record).",
        check: release_and_delete_clear_the_lease,
    },
    Property {
        name: "schema_survives",
        expectation: Expectation::Always,
        claim: "Once any process has constructed its store, the database has the store's schema at the end.",
        not_checked: "Runs in which no boot succeeded.",
        check: schema_survives,
    },
    Property {
        name: "database_file_keeps_its_options",
        expectation: Expectation::Always,
        claim: "Once any process has constructed its store, the database file is in WAL mode (the contract's journal mode, docs/store-contract.md 2) and has the page size the stores were asked to create it with: SQLite fixes a file's page size at its first write, so the size must be set before the WAL switch writes the header.",
        not_checked: "Runs in which no boot succeeded; the page size where the world asked for none; synchronous (no power loss is simulated, so it changes nothing a run can observe).",
        check: database_file_keeps_its_options,
    },
];

fn row_text(r: Option<&LeaseRow>) -> String {
    match r {
        Some(r) => format!("{} epoch {} expiring at {}", r.owner, r.epoch, r.expires_at),
        None => "no row".into(),
    }
}

fn lease_rows_are_last_live_grants(j: &Judged, out: &mut Vec<Witness>) {
    if j.fin.missing_schema {
        return;
    }
    // The model's row per run: the last grant, with the expiry its last legitimate acquire
    // or renew committed; `None` once released or deleted.
    let mut model: BTreeMap<String, (Option<LeaseRow>, usize)> = BTreeMap::new();
    walk_grants(j, |c, g| {
        let row_after = c.applied.as_ref().and_then(|a| a.lease_row.clone());
        match c.op {
            OpKind::Acquire => {
                let epoch = Judged::granted_epoch(c);
                if let Some(epoch) = epoch {
                    let expires_at =
                        row_after.as_ref().filter(|r| r.epoch == epoch).map_or(i64::MAX, |r| r.expires_at);
                    let owner = c.args.owner.clone().unwrap_or_default();
                    model.insert(c.run_id.clone(), (Some(LeaseRow { owner, epoch, expires_at }), c.id));
                }
            }
            OpKind::Renew if staleness(c, g).is_none() => {
                if let (Some((Some(r), _)), Some(after)) = (model.get_mut(&c.run_id), row_after) {
                    if after.epoch == r.epoch && after.owner == r.owner {
                        r.expires_at = after.expires_at;
                    }
                }
            }
            OpKind::Release if staleness(c, g).is_none() => {
                model.insert(c.run_id.clone(), (None, c.id));
            }
            OpKind::Delete if c.lease.is_none() || staleness(c, g).is_none() => {
                model.insert(c.run_id.clone(), (None, c.id));
            }
            _ => {}
        }
    });
    let mut runs: Vec<&String> = model.keys().chain(j.fin.leases.keys()).collect();
    runs.sort();
    runs.dedup();
    for run in runs {
        let (want, last) = model.get(run).map_or((None, None), |(r, id)| (r.as_ref(), Some(*id)));
        let have = j.fin.leases.get(run);
        if want == have {
            continue;
        }
        let since = last.and_then(|id| j.history.calls.get(id)).map_or(String::new(), |c| {
            format!(
                " (its last lease call: the {} of {} at t={})",
                describe_call(c),
                who(c),
                t(Judged::applied_ns(c))
            )
        });
        let mut v = Witness::new(format!(
            "run {run}: the final lease row is {} where the applied history leaves {}{since}",
            row_text(have),
            row_text(want)
        ));
        if let Some(c) = last.and_then(|id| j.history.calls.get(id)) {
            v = v.on(c.op, c.id);
        }
        out.push(v);
    }
}

fn epochs_row_is_high_water(j: &Judged, out: &mut Vec<Witness>) {
    if j.fin.missing_schema {
        return;
    }
    let mut high: BTreeMap<&str, (u64, usize)> = BTreeMap::new();
    for c in j.applied.iter().filter(|c| c.op == OpKind::Acquire) {
        let Some(e) = Judged::granted_epoch(c) else {
            continue;
        };
        let h = high.entry(c.run_id.as_str()).or_insert((0, c.id));
        if e >= h.0 {
            *h = (e, c.id);
        }
    }
    let mut runs: Vec<&str> = high.keys().copied().chain(j.fin.epochs.keys().map(|k| k.as_str())).collect();
    runs.sort_unstable();
    runs.dedup();
    for run in runs {
        let want = high.get(run).map(|(e, _)| *e);
        let have = j.fin.epochs.get(run).copied();
        if want == have {
            continue;
        }
        let show = |e: Option<u64>| e.map_or("no row".to_string(), |e| format!("epoch {e}"));
        let mut v = Witness::new(format!(
            "run {run}: the final epochs row holds {} but the highest epoch ever granted is {}",
            show(have),
            show(want)
        ));
        if let Some(c) = high.get(run).and_then(|(_, id)| j.history.calls.get(*id)) {
            v = v.on(c.op, c.id);
        }
        out.push(v);
    }
}

fn release_and_delete_clear_the_lease(j: &Judged, out: &mut Vec<Witness>) {
    walk_grants(j, |c, g| {
        let Some(a) = &c.applied else { return };
        let clears = match c.op {
            OpKind::Release => c.outcome.is_ok() && staleness(c, g).is_none(),
            OpKind::Delete => c.outcome.is_ok() || c.outcome == Outcome::Unknown,
            _ => false,
        };
        if clears && a.lease_row.is_some() {
            out.push(
                Witness::new(format!(
                    "run {}: the {} of {} committed at t={} and left the lease row {}",
                    c.run_id,
                    describe_call(c),
                    who(c),
                    t(a.at_ns),
                    row_text(a.lease_row.as_ref())
                ))
                .on(c.op, c.id),
            );
        }
    });
}

fn schema_survives(j: &Judged, out: &mut Vec<Witness>) {
    if !j.fin.missing_schema {
        return;
    }
    if let Some(c) = first_boot(j) {
        out.push(
            Witness::new(format!(
                "n{} constructed its store at t={} but the database has no schema at the end",
                c.node,
                t(c.invoked_ns)
            ))
            .on(c.op, c.id),
        );
    }
}

/// The first store construction that succeeded.
fn first_boot<'h>(j: &Judged<'h>) -> Option<&'h crate::history::Call> {
    j.history.calls.iter().find(|c| c.op == OpKind::Boot && c.outcome.is_ok())
}

fn database_file_keeps_its_options(j: &Judged, out: &mut Vec<Witness>) {
    if j.fin.missing_schema {
        return;
    }
    let Some(boot) = first_boot(j) else { return };
    let mode = j.fin.journal_mode.as_deref().map(str::to_ascii_lowercase);
    if let Some(mode) = mode.filter(|m| m != "wal") {
        out.push(
            Witness::new(format!(
                "the database file is in journal mode {mode:?} at the end, not WAL (n{} constructed its store at t={})",
                boot.node,
                t(boot.invoked_ns)
            ))
            .on(boot.op, boot.id),
        );
    }
    if let (Some(want), Some(got)) = (j.expect.page_size, j.fin.page_size) {
        if want != got {
            out.push(
                Witness::new(format!(
                    "the database file has {got}-byte pages at the end, though every store was asked to create it with {want}-byte pages (n{} constructed the first at t={})",
                    boot.node,
                    t(boot.invoked_ns)
                ))
                .on(boot.op, boot.id),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    //! Each end-state property fails on a minimal history and passes its lawful twin.

    use store::{Epoch, Lease};

    use super::*;
    use crate::history::FinalState;
    use crate::history::{Call, History};
    use crate::oracle::Expect;

    fn row(owner: &str, epoch: u64, expires_at: i64) -> LeaseRow {
        LeaseRow { owner: owner.into(), epoch, expires_at }
    }

    fn lease(owner: &str, epoch: u64) -> Lease {
        Lease { run_id: "r".into(), owner: owner.into(), epoch: Epoch(epoch) }
    }

    /// A call applied at position `order` with the lease row `after` at its commit.
    fn applied(id: usize, op: OpKind, order: usize, after: Option<LeaseRow>) -> Call {
        let mut c = crate::oracle::testkit::call(id, op);
        c.checked_now_ms = Some(100);
        if let Some(a) = c.applied.as_mut() {
            (a.order, a.store_now_ms, a.lease_row) = (order, 100, after);
        }
        c
    }

    fn acquire(id: usize, owner: &str, epoch: u64) -> Call {
        let mut c = applied(id, OpKind::Acquire, id, Some(row(owner, epoch, 400)));
        c.args.owner = Some(owner.into());
        c.granted = Some(lease(owner, epoch));
        c
    }

    fn release(id: usize, owner: &str, epoch: u64, after: Option<LeaseRow>) -> Call {
        let mut c = applied(id, OpKind::Release, id, after);
        c.lease = Some(lease(owner, epoch));
        c
    }

    fn judge(h: &History, fin: &FinalState, name: &str) -> Vec<crate::oracle::Violation> {
        let j = Judged::build(h, fin, Expect::default());
        let p = ALL.iter().find(|p| p.name == name).expect("property");
        p.judge(&j)
    }

    fn history(calls: Vec<Call>) -> History {
        History { applied_count: calls.len(), calls, ..History::default() }
    }

    #[test]
    fn a_release_that_leaves_the_row_is_caught_at_its_commit_and_at_the_end() {
        let h = history(vec![acquire(0, "a", 1), release(1, "a", 1, Some(row("a", 1, 400)))]);
        let mut fin = FinalState::default();
        fin.leases.insert("r".into(), row("a", 1, 400));
        fin.epochs.insert("r".into(), 1);
        let v = judge(&h, &fin, "release_and_delete_clear_the_lease");
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!((v[0].op, v[0].call), (Some("release"), Some(1)));
        let v = judge(&h, &fin, "lease_rows_are_last_live_grants");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("where the applied history leaves no row"), "{}", v[0].witness);

        // The lawful twin: the release removed the row.
        let h = history(vec![acquire(0, "a", 1), release(1, "a", 1, None)]);
        let mut fin = FinalState::default();
        fin.epochs.insert("r".into(), 1);
        assert!(judge(&h, &fin, "release_and_delete_clear_the_lease").is_empty());
        assert!(judge(&h, &fin, "lease_rows_are_last_live_grants").is_empty());
    }

    #[test]
    fn a_final_row_with_another_expiry_or_owner_is_caught() {
        let h = history(vec![acquire(0, "a", 1)]);
        let mut fin = FinalState::default();
        fin.epochs.insert("r".into(), 1);
        fin.leases.insert("r".into(), row("a", 1, 900));
        assert_eq!(judge(&h, &fin, "lease_rows_are_last_live_grants").len(), 1);
        fin.leases.insert("r".into(), row("b", 1, 400));
        assert_eq!(judge(&h, &fin, "lease_rows_are_last_live_grants").len(), 1);
        fin.leases.insert("r".into(), row("a", 1, 400));
        assert!(judge(&h, &fin, "lease_rows_are_last_live_grants").is_empty());
    }

    #[test]
    fn a_renew_by_the_holder_moves_the_expected_expiry() {
        let mut renew = applied(1, OpKind::Renew, 1, Some(row("a", 1, 700)));
        renew.lease = Some(lease("a", 1));
        let h = history(vec![acquire(0, "a", 1), renew]);
        let mut fin = FinalState::default();
        fin.epochs.insert("r".into(), 1);
        fin.leases.insert("r".into(), row("a", 1, 700));
        assert!(judge(&h, &fin, "lease_rows_are_last_live_grants").is_empty());
        fin.leases.insert("r".into(), row("a", 1, 400));
        assert_eq!(judge(&h, &fin, "lease_rows_are_last_live_grants").len(), 1);
    }

    #[test]
    fn an_epochs_row_that_restarted_or_vanished_is_caught() {
        let mut delete = applied(1, OpKind::Delete, 1, None);
        delete.lease = None;
        let h = history(vec![acquire(0, "a", 3), delete]);
        let mut fin = FinalState::default();
        assert_eq!(judge(&h, &fin, "epochs_row_is_high_water").len(), 1, "no tombstone is caught");
        fin.epochs.insert("r".into(), 2);
        assert_eq!(judge(&h, &fin, "epochs_row_is_high_water").len(), 1, "a lower row is caught");
        fin.epochs.insert("r".into(), 3);
        assert!(judge(&h, &fin, "epochs_row_is_high_water").is_empty());
        fin.epochs.insert("other".into(), 1);
        assert_eq!(judge(&h, &fin, "epochs_row_is_high_water").len(), 1, "a row never granted is caught");
    }

    #[test]
    fn a_lost_schema_after_a_successful_boot_is_caught() {
        let mut boot = applied(0, OpKind::Boot, 0, None);
        boot.applied = None;
        let h = history(vec![boot.clone()]);
        let fin = FinalState { missing_schema: true, ..FinalState::default() };
        assert_eq!(judge(&h, &fin, "schema_survives").len(), 1);
        assert!(judge(&h, &FinalState::default(), "schema_survives").is_empty());
        boot.outcome = Outcome::Err { code: "busy".into(), message: String::new() };
        assert!(judge(&history(vec![boot]), &fin, "schema_survives").is_empty());
    }

    #[test]
    fn a_database_file_with_other_pages_or_journal_mode_is_caught() {
        let name = "database_file_keeps_its_options";
        let mut boot = applied(0, OpKind::Boot, 0, None);
        boot.applied = None;
        let h = history(vec![boot.clone()]);
        let expect = Expect { page_size: Some(1024), ..Expect::default() };
        let judged = |fin: &FinalState| {
            let j = Judged::build(&h, fin, expect);
            ALL.iter().find(|p| p.name == name).expect("property").judge(&j)
        };
        let file = |page: u32, mode: &str| FinalState {
            page_size: Some(page),
            journal_mode: Some(mode.into()),
            ..FinalState::default()
        };
        assert!(judged(&file(1024, "wal")).is_empty());
        let v = judged(&file(4096, "wal"));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("4096-byte pages"), "{}", v[0].witness);
        let v = judged(&file(1024, "delete"));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("not WAL"), "{}", v[0].witness);
        // No boot, or no schema: nothing to judge; no page size asked: only the mode.
        assert!(judge(&history(vec![]), &file(4096, "delete"), name).is_empty());
        let lost = FinalState { missing_schema: true, ..file(4096, "delete") };
        assert!(judged(&lost).is_empty());
        assert!(judge(&h, &file(4096, "wal"), name).is_empty());
    }
}
