//! The store-level properties, one function each. Every property reads the apply-ordered
//! history and the final state through [`Judged`]; none knows which flaw a profile has.

use std::collections::BTreeMap;

use serde_json::Value;

use super::contract::{
    boot_outside_the_ttl_domain, filter_excludes_strictly, filter_matches, malformed_input, EntryView,
    MetaView, TTL_MS_DOMAIN,
};
use super::model::{rejected, staleness, t, walk_grants, who, GrantWalk, Judged};
use super::{Expectation, Property, Witness};
use crate::history::{describe_call, Call, FactKind, OpKind, Outcome, Read, StoreClock};
use crate::record_text::{entry_shape, meta_shape};

/// Every store-level property, in report order.
pub const ALL: &[Property] = &[
    Property {
        name: "no_stale_accept",
        expectation: Expectation::Always,
        claim: "No mutation carrying a lease takes effect unless that lease is the run's current, live, unreleased holder.",
        not_checked: "Mutations without a lease (single-writer host decisions) and reads.",
        check: no_stale_accept,
    },
    Property {
        name: "journal_equals_serial_history",
        expectation: Expectation::Always,
        claim: "Each run's journal is exactly its applied appends since its last deletion, seqs strictly increasing, epochs never inverted.",
        not_checked: "Whether the appends were legitimate (no_stale_accept) or what their payloads mean.",
        check: journal_equals_serial_history,
    },
    Property {
        name: "meta_is_last_accepted",
        expectation: Expectation::Always,
        claim: "Each run's meta row is the last applied meta write, and no lower epoch's write lands after a higher epoch's.",
        not_checked: "Whether the row agrees with the journal (engine properties do).",
        check: meta_is_last_accepted,
    },
    Property {
        name: "blobs_replay_serial_history",
        expectation: Expectation::Always,
        claim: "Each blob equals the replay of its applied puts and deletes, and no lower epoch's write lands after a higher epoch's.",
        not_checked: "What the blob bytes mean (checkpoint contents are judged by engine properties).",
        check: blobs_replay_serial_history,
    },
    Property {
        name: "no_cross_run_write",
        expectation: Expectation::Always,
        claim: "A lease only ever guards a mutation of the run it names (a blob's run is its ref's first segment).",
        not_checked: "Unleased mutations.",
        check: no_cross_run_write,
    },
    Property {
        name: "epochs_granted_once_and_increasing",
        expectation: Expectation::Always,
        claim: "Every grant of a run id carries an epoch above every earlier grant of that id, across delete and recreate.",
        not_checked: "Which owner got the grant (lease_exclusive judges overlap).",
        check: epochs_granted_once_and_increasing,
    },
    Property {
        name: "epochs_step_by_one",
        expectation: Expectation::Always,
        claim: "Every grant of a run id carries exactly one above the highest epoch granted to that id before it (1 for its first), across release, expiry, delete and recreate (L2: the previous high-water mark plus 1).",
        not_checked: "A grant at or below that mark (epochs_granted_once_and_increasing judges it); the first grant on record after an acquire of the run that applied with no epoch on record, whose mark is then unknown.",
        check: epochs_step_by_one,
    },
    Property {
        name: "lease_exclusive",
        expectation: Expectation::Always,
        claim: "No acquire succeeds while another grant of the run is live by the acquiring store's clock and neither released nor deleted by its holder.",
        not_checked: "Skew between clocks: liveness is judged by the clock the store itself used.",
        check: lease_exclusive,
    },
    Property {
        name: "expiry_set_only_by_holder",
        expectation: Expectation::Always,
        claim: "A lease row changes only by its grant, its holder's renew, its holder's release, or a legitimate deletion of the run.",
        not_checked: "Changes to rows of runs the changing call did not name (seen only at that run's next commit).",
        check: expiry_set_only_by_holder,
    },
    Property {
        name: "run_ends_within_budget",
        expectation: Expectation::Always,
        claim: "The run reaches its end within the world's call budget (a livelock, where calls are refused at once and virtual time stops advancing, is a failure, not a hang).",
        not_checked: "Busy loops that make no store call (they hang the run like any infinite loop).",
        check: run_ends_within_budget,
    },
    Property {
        name: "every_boot_succeeds",
        expectation: Expectation::Always,
        claim: "Every store construction succeeds, however many processes boot over one fresh file at once; a construction may give up with Busy only after retrying for the contract's 5,000 ms (BOOT_BUSY_TIMEOUT_MS).",
        not_checked: "Boots cut short by a planned crash (outcome unknown); a boot that retried the whole 5,000 ms against a write lock another process held across a stall or pause (the contract's deadline, met); boots given a lease ttl outside L6's domain (ttl_outside_the_domain_refused judges those).",
        check: every_boot_succeeds,
    },
    Property {
        name: "ttl_outside_the_domain_refused",
        expectation: Expectation::Always,
        claim: "A store constructed with a lease ttl outside 1 to 2147483647 ms is refused as a configuration error (L6), and a store constructed with a ttl inside it is never refused as one.",
        not_checked: "Boots cut short by a crash or given up as busy; that the refusal came before the database opened (nothing the history shows tells the two apart once the schema exists).",
        check: ttl_outside_the_domain_refused,
    },
    Property {
        name: "a_refused_ttl_opens_no_database",
        expectation: Expectation::Always,
        claim: "A store construction with a lease ttl outside L6's domain (1 to 2147483647 ms), over a path where no database existed, leaves no database file there: the ttl is refused before the database opens (L6).",
        not_checked: "Constructions over a path that already held a database (nothing there tells an open from none); constructions whose process did not look at the path after (only the `FreshBoot` fact says what was left).",
        check: a_refused_ttl_opens_no_database,
    },
    Property {
        name: "rejected_call_changed_nothing",
        expectation: Expectation::Always,
        claim: "A call that returned an error applied nothing.",
        not_checked: "Calls whose outcome is unknown (they may or may not have applied).",
        check: rejected_call_changed_nothing,
    },
    Property {
        name: "reads_see_serial_history",
        expectation: Expectation::Always,
        claim: "Every successful read (load, get_meta, list_runs, blob get and list) returns exactly the state the applied mutations had built when it returned; list_runs honours `status`, `name` and `tags`, may over-match a `statuses` filter (as the contract allows), and never drops a match; list_runs lists once each in run id order, a blob list in ref order.",
        not_checked: "Reads whose node died in flight.",
        check: reads_see_serial_history,
    },
    Property {
        name: "grant_lasts_the_ttl",
        expectation: Expectation::Always,
        claim: "Every applied acquire and renew sets the lease to expire one ttl after the store's clock read it (between the check's and the commit's reading).",
        not_checked: "Scenarios that do not state their ttl; whether the clock itself is right.",
        check: grant_lasts_the_ttl,
    },
    Property {
        name: "refusals_follow_the_contract",
        expectation: Expectation::Always,
        claim: "Every acquire the store refused as held met a live lease (no grant released or deleted, and the store's clock reading for the check before its expiry), and every write it refused as stale came from a caller the applied history had superseded, released, deleted with its run, or let expire by that reading; and every append refused as a journal order violation (A5) met a stored entry of its run whose seq was at least its own: a store that fences too much strands runs as surely as one that fences too little lets them be corrupted.",
        not_checked: "Refusals in runs whose environment does not observe the store (real multi-process runs); an acquire refused without a clock reading while a grant stood; leases naming another run and lease refusals of calls that carried no lease (refusals_name_their_reason judges both).",
        check: refusals_follow_the_contract,
    },
    Property {
        name: "refusals_name_their_reason",
        expectation: Expectation::Always,
        claim: "Every lease refusal names the reason the fence's order gives, judged against the grants applied before it: `run_mismatch` for a lease of another run (FW2, before any holder check); for its own run `not_held` when no row stood (never granted, released, or deleted with its run), else `stale_epoch` when the row carries another epoch, else `foreign_owner` when another owner, else `expired` when the store's clock reading for the check was at or past the expiry; an acquire is refused only as `held_on_acquire`; a mutation that carries no lease is never refused as held (FW4). A caller that retries on `expired` and gives up on `stale_epoch` acts on that word.",
        not_checked: "Refusals in runs whose environment does not observe the store; a refusal whose lease matches the standing row's epoch and owner but came from an earlier grant of them (a flaw the other properties judge); an `expired` refusal without a clock reading, or a refusal of a live holder (refusals_follow_the_contract judges it).",
        check: refusals_name_their_reason,
    },
    Property {
        name: "failures_are_typed_answers",
        expectation: Expectation::Always,
        claim: "No store call fails as `storage` or `corrupt`: the simulator injects no I/O fault and every stored byte went through the store, so such an answer means the store misused its own database (a statement on a connection already in a transaction, a lock it did not hold) or wrote what it cannot read back. The contract's failures are typed: held or stale leases, order violations, busy, bad input, a crash.",
        not_checked: "Real multi-process runs, where the disk itself may fail; which typed failure a call should have met (the refusal and busy properties judge that).",
        check: failures_are_typed_answers,
    },
    Property {
        name: "reads_never_busy",
        expectation: Expectation::Always,
        claim: "No read (load, get_meta, list_runs, blob get or list) fails as busy: in WAL mode a reader sees the last committed state while another connection holds the write lock, and rulvar's reads are plain SELECTs; runtime busy comes only from a `BEGIN IMMEDIATE` or a write while another connection holds the write lock (docs/store-contract.md 2.3). A store whose reads take the write lock refuses reads whenever anyone writes, and every engine decision that reads first (a resume's prepare, a worker's re-check, a retention's re-read, a deletion's record) fails with it.",
        not_checked: "Real multi-process runs (a reader may meet SQLITE_BUSY_RECOVERY while another process rebuilds the WAL index after a crash); boots; writes, whose busy the contention model owes.",
        check: reads_never_busy,
    },
    Property {
        name: "malformed_input_refused_and_only_it",
        expectation: Expectation::Always,
        claim: "A call whose run id, blob ref, lease owner or journal seq the contract calls malformed (T5's safe segment; a seq above 2^53-1; an empty owner) is refused as invalid input and changes nothing; a well-formed call is never refused as invalid input.",
        not_checked: "Calls cut by a crash or answered busy; payloads (a meta or entry's other fields); leases naming a malformed run.",
        check: malformed_input_refused_and_only_it,
    },
];

fn op_name(c: &Call) -> String {
    describe_call(c)
}

fn no_stale_accept(j: &Judged, out: &mut Vec<Witness>) {
    walk_grants(j, |c, g| {
        if c.op == OpKind::Acquire {
            return;
        }
        if let Some(why) = staleness(c, g) {
            let l = c.lease.as_ref().map_or(0, |l| l.epoch.0);
            out.push(Witness {
                op: Some(c.op.as_str()),
                call: Some(c.id),
                witness: format!(
                    "the {} of {} under epoch {l} took effect at t={} after {why}",
                    op_name(c),
                    who(c),
                    t(Judged::applied_ns(c))
                ),
            });
        }
    });
}

fn short(s: &str) -> String {
    if s.len() > 96 {
        format!("{}…", &s[..96])
    } else {
        s.to_string()
    }
}

fn journal_equals_serial_history(j: &Judged, out: &mut Vec<Witness>) {
    let r = j.replay();
    let mut runs: Vec<&String> = r.journal.keys().chain(j.fin.entries.keys()).collect();
    runs.sort();
    runs.dedup();
    for run in runs {
        let model: &[&Call] = r.journal.get(run).map_or(&[], |v| v.as_slice());
        let actual: &[String] = j.fin.entries.get(run).map_or(&[], |v| v.as_slice());
        if let Some(i) = (0..model.len().max(actual.len())).find(|&i| {
            model.get(i).and_then(|c| c.args.payload.as_deref()) != actual.get(i).map(|s| s.as_str())
        }) {
            let want = model.get(i).map_or("nothing".to_string(), |c| {
                format!(
                    "{}'s append at t={} ({})",
                    who(c),
                    t(Judged::applied_ns(c)),
                    short(c.args.payload.as_deref().unwrap_or(""))
                )
            });
            let have = actual.get(i).map_or("nothing".to_string(), |s| short(s));
            out.push(Witness {
                op: None,
                call: None,
                witness: format!(
                    "run {run}: journal position {} holds {have} but the applied history has {want} ({} entries stored, {} applied)",
                    i + 1,
                    actual.len(),
                    model.len()
                ),
            });
            continue;
        }
        let mut last_seq: Option<u64> = None;
        let mut last_epoch: Option<(u64, &Call)> = None;
        for (i, c) in model.iter().enumerate() {
            let seq = c.args.seq.unwrap_or(0);
            if let Some(prev) = last_seq {
                if seq <= prev {
                    out.push(Witness {
                        op: Some(c.op.as_str()),
                        call: Some(c.id),
                        witness: format!("run {run}: seq {seq} at position {} follows seq {prev}", i + 1),
                    });
                }
            }
            if j.expect.contiguous_seqs && seq != i as u64 + 1 {
                out.push(Witness {
                    op: None,
                    call: None,
                    witness: format!(
                        "run {run}: position {} holds seq {seq}, not {} (seqs must run 1..N)",
                        i + 1,
                        i + 1
                    ),
                });
                break;
            }
            last_seq = Some(seq);
            if let Some(e) = c.lease.as_ref().map(|l| l.epoch.0) {
                if let Some((pe, pc)) = last_epoch {
                    if e < pe {
                        out.push(Witness {
                            op: Some(c.op.as_str()),
                            call: Some(c.id),
                            witness: format!(
                                "run {run}: epoch inversion, {}'s entry seq {seq} under epoch {e} follows {}'s entry under epoch {pe}",
                                who(c),
                                who(pc)
                            ),
                        });
                    }
                }
                if last_epoch.is_none_or(|(pe, _)| e >= pe) {
                    last_epoch = Some((e, c));
                }
            }
        }
    }
}

/// Lower-epoch writes applied after higher-epoch writes, within one sequence of writes.
#[allow(clippy::type_complexity)]
fn epoch_regressions(writes: &[&Call]) -> Option<(u64, u64, String, String, u64, OpKind, usize)> {
    let mut hi: Option<(u64, &Call)> = None;
    for c in writes {
        let Some(e) = c.lease.as_ref().map(|l| l.epoch.0) else { continue };
        if let Some((he, hc)) = hi {
            if e < he {
                return Some((e, he, who(c), who(hc), Judged::applied_ns(c), c.op, c.id));
            }
        }
        if hi.is_none_or(|(he, _)| e > he) {
            hi = Some((e, c));
        }
    }
    None
}

fn meta_is_last_accepted(j: &Judged, out: &mut Vec<Witness>) {
    let r = j.replay();
    let mut runs: Vec<&String> = r.meta.keys().chain(j.fin.meta.keys()).collect();
    runs.sort();
    runs.dedup();
    for run in runs {
        let writes: &[&Call] = r.meta.get(run).map_or(&[], |v| v.as_slice());
        let want = writes.last().and_then(|c| c.args.payload.as_deref());
        let have = j.fin.meta.get(run).map(|s| s.as_str());
        if want != have {
            out.push(Witness {
                op: None,
                call: None,
                witness: format!(
                    "run {run}: the meta row is {} but the last applied meta write is {}",
                    have.map_or("absent".into(), short),
                    want.map_or("none".into(), short)
                ),
            });
        }
        if let Some((e, he, w, hw, at, op, id)) = epoch_regressions(writes) {
            out.push(Witness {
                op: Some(op.as_str()),
                call: Some(id),
                witness: format!(
                    "run {run}: {w}'s meta write under epoch {e} landed at t={} over {hw}'s write under epoch {he}",
                    t(at)
                ),
            });
        }
    }
}

fn blobs_replay_serial_history(j: &Judged, out: &mut Vec<Witness>) {
    let r = j.replay();
    let mut refs: Vec<&String> = r.blobs.keys().chain(j.fin.blobs.keys()).collect();
    refs.sort();
    refs.dedup();
    for blob_ref in refs {
        let writes: &[&Call] = r.blobs.get(blob_ref).map_or(&[], |v| v.as_slice());
        let want = writes.last().filter(|c| c.op == OpKind::BlobPut).and_then(|c| c.args.bytes.as_deref());
        let have = j.fin.blobs.get(blob_ref).map(|b| b.as_slice());
        if want != have {
            out.push(Witness {
                op: None,
                call: None,
                witness: format!(
                    "blob {blob_ref}: stored {} but the applied history leaves {}",
                    have.map_or("nothing".into(), |b| short(&String::from_utf8_lossy(b))),
                    want.map_or("nothing".into(), |b| short(&String::from_utf8_lossy(b)))
                ),
            });
        }
        if let Some((e, he, w, hw, at, op, id)) = epoch_regressions(writes) {
            out.push(Witness {
                op: Some(op.as_str()),
                call: Some(id),
                witness: format!(
                    "blob {blob_ref}: {w}'s write under epoch {e} landed at t={} over {hw}'s write under epoch {he}",
                    t(at)
                ),
            });
        }
    }
}

fn no_cross_run_write(j: &Judged, out: &mut Vec<Witness>) {
    for c in &j.applied {
        if let Some(l) = &c.lease {
            if l.run_id != c.run_id {
                out.push(Witness {
                    op: Some(c.op.as_str()),
                    call: Some(c.id),
                    witness: format!(
                        "the {} of {} took effect at t={} under the lease of run {} (epoch {})",
                        op_name(c),
                        who(c),
                        t(Judged::applied_ns(c)),
                        l.run_id,
                        l.epoch
                    ),
                });
            }
        }
    }
}

fn epochs_granted_once_and_increasing(j: &Judged, out: &mut Vec<Witness>) {
    let mut high: BTreeMap<&str, (u64, &Call)> = BTreeMap::new();
    for c in j.applied.iter().filter(|c| c.op == OpKind::Acquire) {
        let Some(e) = Judged::granted_epoch(c) else {
            continue;
        };
        if let Some((h, hc)) = high.get(c.run_id.as_str()) {
            if e <= *h {
                out.push(Witness {
                    op: Some(c.op.as_str()),
                    call: Some(c.id),
                    witness: format!(
                        "run {}: {} was granted epoch {e} at t={} although {} had been granted epoch {h} at t={}",
                        c.run_id,
                        who(c),
                        t(Judged::applied_ns(c)),
                        who(hc),
                        t(Judged::applied_ns(hc))
                    ),
                });
                continue;
            }
        }
        high.insert(c.run_id.as_str(), (e, c));
    }
}

fn epochs_step_by_one(j: &Judged, out: &mut Vec<Witness>) {
    // Per run: the high-water mark of its grants so far and the grant that set it; `None`
    // while the mark is unknown (an applied acquire of the run left no epoch on record: the
    // next grant on record is then taken as the mark, unjudged).
    let mut high: BTreeMap<&str, Option<(u64, &Call)>> = BTreeMap::new();
    for c in j.applied.iter().filter(|c| c.op == OpKind::Acquire) {
        let run = c.run_id.as_str();
        let Some(e) = Judged::granted_epoch(c) else {
            high.insert(run, None);
            continue;
        };
        let (expected, before) = match high.get(run) {
            Some(None) => {
                high.insert(run, Some((e, c)));
                continue;
            }
            Some(Some((h, hc))) => (
                h + 1,
                format!(
                    "the highest epoch granted to it before was {h} ({} at t={})",
                    who(hc),
                    t(Judged::applied_ns(hc))
                ),
            ),
            None => (1, "it had never been granted one".to_string()),
        };
        if e > expected {
            out.push(Witness {
                op: Some(c.op.as_str()),
                call: Some(c.id),
                witness: format!(
                    "run {run}: {} was granted epoch {e} at t={}, but {before}: the grant should carry {expected}",
                    who(c),
                    t(Judged::applied_ns(c)),
                ),
            });
        }
        if e >= expected {
            high.insert(run, Some((e, c)));
        }
    }
}

fn lease_exclusive(j: &Judged, out: &mut Vec<Witness>) {
    walk_grants(j, |c, g| {
        if c.op != OpKind::Acquire {
            return;
        }
        let (Some(g), Some(now)) = (g, Judged::checked_ms(c)) else { return };
        if g.ended.is_none() && g.expires_at > now {
            let e = c.granted.as_ref().map_or(0, |l| l.epoch.0);
            out.push(Witness {
                op: Some(c.op.as_str()),
                call: Some(c.id),
                witness: format!(
                    "run {}: {} acquired epoch {e} at t={} while n{} ({})'s epoch {} was live for another {}ms by that store's clock",
                    c.run_id,
                    who(c),
                    t(Judged::applied_ns(c)),
                    g.node,
                    g.owner,
                    g.epoch,
                    g.expires_at - now
                ),
            });
        }
    });
}

fn expiry_set_only_by_holder(j: &Judged, out: &mut Vec<Witness>) {
    let mut last_row: BTreeMap<String, Option<crate::history::LeaseRow>> = BTreeMap::new();
    walk_grants(j, |c, g| {
        let Some(applied) = &c.applied else { return };
        let run = c.run_id.clone();
        let before = last_row.get(&run).cloned().flatten();
        let after = applied.lease_row.clone();
        last_row.insert(run.clone(), after.clone());
        if before == after {
            return;
        }
        let legit = match c.op {
            OpKind::Acquire => true,
            OpKind::Renew => {
                staleness(c, g).is_none()
                    && matches!((&before, &after), (Some(b), Some(a)) if b.owner == a.owner && b.epoch == a.epoch)
            }
            OpKind::Release => staleness(c, g).is_none() && after.is_none(),
            OpKind::Delete => (c.lease.is_none() || staleness(c, g).is_none()) && after.is_none(),
            _ => false,
        };
        if !legit {
            let fmt_row = |r: &Option<crate::history::LeaseRow>| match r {
                Some(r) => format!(
                    "{} epoch {} expiring at +{}ms",
                    r.owner,
                    r.epoch,
                    r.expires_at - crate::time::CLOCK_BASE_MS
                ),
                None => "no row".to_string(),
            };
            out.push(Witness {
                op: Some(c.op.as_str()),
                call: Some(c.id),
                witness: format!(
                    "run {run}: the {} of {} at t={} changed the lease row from {} to {}",
                    op_name(c),
                    who(c),
                    t(applied.at_ns),
                    fmt_row(&before),
                    fmt_row(&after)
                ),
            });
        }
    });
}

fn run_ends_within_budget(j: &Judged, out: &mut Vec<Witness>) {
    if let Some(why) = &j.history.exhausted {
        out.push(Witness { witness: why.clone(), op: None, call: None });
    }
}

/// rulvar's BOOT_BUSY_TIMEOUT_MS (docs/store-contract.md, "Boot"): the constructor retries
/// the busy family until this much time has passed since it started, then rethrows.
const BOOT_BUSY_DEADLINE_NS: u64 = 5_000 * 1_000_000;

fn every_boot_succeeds(j: &Judged, out: &mut Vec<Witness>) {
    for c in j.history.calls.iter().filter(|c| c.op == OpKind::Boot && rejected(c)) {
        if boot_outside_the_ttl_domain(c) {
            continue;
        }
        let took = c.returned_ns.map(|r| r.saturating_sub(c.invoked_ns));
        // Giving up with Busy once the deadline has passed is the contract's behaviour (the
        // lock was held that long: a process stalled or paused inside a write transaction).
        if c.outcome.is_busy() && took.is_some_and(|ns| ns >= BOOT_BUSY_DEADLINE_NS) {
            continue;
        }
        out.push(Witness {
            op: Some(c.op.as_str()),
            call: Some(c.id),
            witness: format!(
                "n{} failed to construct its store at t={} after {}: {}",
                c.node,
                t(c.invoked_ns),
                took.map_or("an unknown time".to_string(), |ns| format!("{}ms", ns / 1_000_000)),
                c.outcome.short()
            ),
        });
    }
}

fn ttl_outside_the_domain_refused(j: &Judged, out: &mut Vec<Witness>) {
    for c in j.history.calls.iter().filter(|c| c.op == OpKind::Boot) {
        let Some(ttl) = c.args.ttl_ms else { continue };
        let inside = TTL_MS_DOMAIN.contains(&ttl);
        let complaint = match &c.outcome {
            Outcome::Ok { .. } if !inside => "was accepted".to_string(),
            Outcome::Err { code, .. }
                if !inside && code != "config" && code != "busy" && code != "crashed" =>
            {
                format!("was refused as {code}, not as a configuration error")
            }
            Outcome::Err { code, message } if inside && code == "config" => {
                format!("is inside the domain but was refused as a configuration error ({message})")
            }
            _ => continue,
        };
        out.push(Witness {
            op: Some(c.op.as_str()),
            call: Some(c.id),
            witness: format!(
                "n{}'s store construction with a lease ttl of {ttl}ms at t={} {complaint} (L6: 1 to 2147483647 ms)",
                c.node,
                t(c.invoked_ns)
            ),
        });
    }
}

fn a_refused_ttl_opens_no_database(j: &Judged, out: &mut Vec<Witness>) {
    for f in &j.history.facts {
        let FactKind::FreshBoot { ttl_ms, database_left: true } = f.kind else { continue };
        // The boot of that process just before the fact, with that ttl.
        let boot = j.history.calls[..f.invoked_before.min(j.history.calls.len())]
            .iter()
            .rev()
            .find(|c| (c.node, c.incarnation) == (f.node, f.incarnation) && c.op == OpKind::Boot);
        let Some(c) = boot.filter(|c| c.args.ttl_ms == Some(ttl_ms) && boot_outside_the_ttl_domain(c)) else {
            continue;
        };
        out.push(Witness {
            op: Some(c.op.as_str()),
            call: Some(c.id),
            witness: format!(
                "n{}'s store construction with a lease ttl of {ttl_ms}ms at t={} over a path where no database existed returned {} and left a database file there: the ttl was checked after the database opened (L6: refused before it opens)",
                c.node,
                t(c.invoked_ns),
                c.outcome.short(),
            ),
        });
    }
}

fn rejected_call_changed_nothing(j: &Judged, out: &mut Vec<Witness>) {
    for c in j.history.calls.iter().filter(|c| rejected(c) && c.applied.is_some()) {
        out.push(Witness {
            op: Some(c.op.as_str()),
            call: Some(c.id),
            witness: format!(
                "the {} of {} returned {} but committed at t={}",
                op_name(c),
                who(c),
                c.outcome.short(),
                t(Judged::applied_ns(c))
            ),
        });
    }
}

/// The serial state the reads are judged against: each run's entries and meta record as
/// the oracle decoded them from the applied payloads. A read result is compared by its JSON
/// shape, rendered by the harness's own text (`record_text`), never the store's serializer:
/// the contract's round trip (docs/store-contract.md 1.2: A4, meta separation) says a store
/// hands back exactly what was written.
#[derive(Default)]
struct ReadModel {
    journal: BTreeMap<String, Vec<Value>>,
    meta: BTreeMap<String, MetaView>,
    blobs: BTreeMap<String, Vec<u8>>,
}

impl ReadModel {
    fn apply(&mut self, c: &Call) {
        let payload = c.args.payload.as_deref();
        match c.op {
            OpKind::Append => {
                if let Some(e) = payload.and_then(EntryView::parse) {
                    self.journal.entry(c.run_id.clone()).or_default().push(e.raw);
                }
            }
            OpKind::PutMeta => {
                if let Some(m) = payload.and_then(MetaView::parse) {
                    self.meta.insert(c.run_id.clone(), m);
                }
            }
            OpKind::Delete => {
                self.journal.remove(&c.run_id);
                self.meta.remove(&c.run_id);
            }
            OpKind::BlobPut => {
                if let (Some(r), Some(b)) = (&c.args.blob_ref, &c.args.bytes) {
                    self.blobs.insert(r.clone(), b.clone());
                }
            }
            OpKind::BlobDelete => {
                if let Some(r) = &c.args.blob_ref {
                    self.blobs.remove(r);
                }
            }
            _ => {}
        }
    }

    /// The highest seq among `run`'s entries (an entry without a numeric seq has none).
    fn top_seq(&self, run: &str) -> Option<u64> {
        self.journal.get(run)?.iter().filter_map(|e| e.get("seq")?.as_u64()).max()
    }

    /// What is wrong with `read`, in words; `None` when it is exactly the model.
    fn judge(&self, c: &Call, read: &Read) -> Option<String> {
        let run = &c.run_id;
        match read {
            Read::Entries(got) => {
                let want = self.journal.get(run).map_or(&[][..], |v| v.as_slice());
                let got: Vec<Value> = got.iter().map(entry_shape).collect();
                if got.as_slice() == want {
                    return None;
                }
                let at = (0..got.len().max(want.len())).find(|&i| got.get(i) != want.get(i)).unwrap_or(0);
                Some(format!(
                    "returned {} entries where {} were durable (first difference at position {}: {} instead of {})",
                    got.len(),
                    want.len(),
                    at + 1,
                    got.get(at).map_or("nothing".into(), |e| short(&e.to_string())),
                    want.get(at).map_or("nothing".into(), |e| short(&e.to_string()))
                ))
            }
            Read::Meta(got) => {
                let want = self.meta.get(run).map(|m| &m.raw);
                let got = got.as_ref().map(meta_shape);
                (got.as_ref() != want).then(|| {
                    format!(
                        "returned {} where the durable meta is {}",
                        got.as_ref().map_or("no row".into(), |m| short(&m.to_string())),
                        want.map_or("no row".into(), |m| short(&m.to_string()))
                    )
                })
            }
            Read::Blob(got) => {
                let r = c.args.blob_ref.as_deref().unwrap_or("");
                let want = self.blobs.get(r);
                (got.as_ref() != want).then(|| {
                    format!(
                        "returned {} bytes for {r} where {} are durable",
                        got.as_ref().map_or("no".into(), |b| b.len().to_string()),
                        want.map_or("none".into(), |b| b.len().to_string())
                    )
                })
            }
            Read::Refs(got) => {
                // In ref order (the contract's `ORDER BY ref`, byte order: what the twin's
                // exact sorted listing and the soak's JSON comparison demand).
                let prefix = format!("{run}/");
                let want: Vec<String> =
                    self.blobs.keys().filter(|r| r.starts_with(&prefix)).cloned().collect();
                let mut sorted = got.clone();
                sorted.sort();
                if *got == want {
                    None
                } else if sorted == want {
                    Some(format!("listed {got:?}: the durable refs, but not in ref order {want:?}"))
                } else {
                    Some(format!("listed {got:?} where {want:?} are durable"))
                }
            }
            Read::Runs { filter, metas } => {
                // The contract lets a `statuses` filter return a superset; `status` alone,
                // `name` and `tags` must be honoured.
                let listed: Vec<(Value, Option<MetaView>)> = metas
                    .iter()
                    .map(|m| {
                        let v = meta_shape(m);
                        (v.clone(), MetaView::of_value(v))
                    })
                    .collect();
                for (v, view) in &listed {
                    match view {
                        None => {
                            return Some(format!(
                                "listed {} which is not a meta record",
                                short(&v.to_string())
                            ))
                        }
                        Some(m) if filter_excludes_strictly(filter, m) => {
                            return Some(format!(
                                "listed run {} ({}) which the filter excludes",
                                m.run_id, m.status
                            ));
                        }
                        Some(_) => {}
                    }
                }
                for (v, view) in &listed {
                    let Some(m) = view else { continue };
                    if self.meta.get(&m.run_id).map(|d| &d.raw) != Some(v) {
                        return Some(format!(
                            "listed run {} as {} which is not its durable meta ({})",
                            m.run_id,
                            short(&v.to_string()),
                            self.meta.get(&m.run_id).map_or("no row".into(), |d| short(&d.raw.to_string()))
                        ));
                    }
                }
                // Once each, in run id order (the contract's `ORDER BY run_id`).
                let ids: Vec<&str> = metas.iter().map(|m| m.run_id.as_str()).collect();
                if let Some(w) = ids.windows(2).find(|w| w[0] >= w[1]) {
                    return Some(format!(
                        "listed run {} after run {}: not once each in run id order ({ids:?})",
                        w[1], w[0]
                    ));
                }
                let dropped = self
                    .meta
                    .values()
                    .find(|m| filter_matches(filter, m) && !metas.iter().any(|x| x.run_id == m.run_id));
                dropped.map(|m| format!("dropped run {} ({}) which matches the filter", m.run_id, m.status))
            }
        }
    }
}

/// The applied mutations folded into a [`ReadModel`] up to what each call saw (`seen_at`:
/// the mutations applied by the time it returned). Calls must be asked in `seen_at` order.
struct SerialWalk<'h> {
    mutations: Vec<&'h Call>,
    next: usize,
    model: ReadModel,
}

impl<'h> SerialWalk<'h> {
    fn new(j: &Judged<'h>) -> SerialWalk<'h> {
        let mut mutations: Vec<&Call> = j.applied.iter().copied().filter(|c| c.applied.is_some()).collect();
        mutations.sort_by_key(|c| c.applied.as_ref().map_or(usize::MAX, |a| a.order));
        SerialWalk { mutations, next: 0, model: ReadModel::default() }
    }

    /// The serial state `c` saw.
    fn seen_by(&mut self, c: &Call) -> &ReadModel {
        let seen = c.seen_at.unwrap_or(0);
        while self
            .mutations
            .get(self.next)
            .is_some_and(|m| m.applied.as_ref().is_some_and(|a| a.order < seen))
        {
            self.model.apply(self.mutations[self.next]);
            self.next += 1;
        }
        &self.model
    }
}

fn reads_see_serial_history(j: &Judged, out: &mut Vec<Witness>) {
    let mut reads: Vec<&Call> = j
        .history
        .calls
        .iter()
        .filter(|c| c.read.is_some() && c.outcome.is_ok() && c.seen_at.is_some())
        .collect();
    if reads.is_empty() {
        return;
    }
    reads.sort_by_key(|c| (c.seen_at, c.id));
    let mut walk = SerialWalk::new(j);
    for c in reads {
        let model = walk.seen_by(c);
        let Some(read) = &c.read else { continue };
        if let Some(why) = model.judge(c, read) {
            out.push(
                Witness::new(format!(
                    "{} by {} at t={} {why}",
                    op_name(c),
                    who(c),
                    t(c.returned_ns.unwrap_or(0))
                ))
                .on(c.op, c.id),
            );
        }
    }
}

/// Whether applied mutation `a` had taken effect when call `c` returned: by its apply position
/// against what `c` saw (`seen_at`), or, for a mutation with no position, by its instant.
fn took_effect_before(a: &Call, c: &Call) -> bool {
    let (seen, returned) = (c.seen_at.unwrap_or(0), c.returned_ns.unwrap_or(u64::MAX));
    a.applied.as_ref().map_or(Judged::applied_ns(a) <= returned, |x| x.order < seen)
}

/// Refusals judged against the grants the mutations applied before each refusal built. A
/// refusal returns from its check with no await in between, so the check saw exactly the
/// mutations applied by the time the call returned (`seen_at`), and compared the expiry with
/// the store's last clock reading (`store_clock`).
fn refusals_follow_the_contract(j: &Judged, out: &mut Vec<Witness>) {
    order_refusals_follow_the_journal(j, out);
    let mut refused: Vec<&Call> = j
        .history
        .calls
        .iter()
        .filter(|c| matches!(&c.outcome, Outcome::Err { code, .. } if code == "lease_held"))
        .filter(|c| c.store_clock != StoreClock::NotObserved && c.seen_at.is_some())
        .filter(|c| c.op == OpKind::Acquire || c.lease.as_ref().is_some_and(|l| l.run_id == c.run_id))
        .collect();
    refused.sort_by_key(|c| (c.seen_at, c.returned_ns, c.id));
    // One witness per (run, standing grant, operation): a store that keeps refusing past an
    // expiry refuses every retry the same way, and the first says it.
    let mut said: std::collections::BTreeSet<(&str, Option<usize>, OpKind)> = Default::default();
    let mut walk = GrantWalk::default();
    let mut applied = j.applied.iter().peekable();
    for c in refused {
        let returned = c.returned_ns.unwrap_or(u64::MAX);
        while let Some(a) = applied.next_if(|a| took_effect_before(a, c)) {
            walk.apply(a);
        }
        let clock = match c.store_clock {
            StoreClock::Read(ms) => Some(ms),
            _ => None,
        };
        let at = t(returned);
        if c.op == OpKind::Acquire {
            let standing = walk.of(&c.run_id).filter(|g| g.ended.is_none());
            let why = match (standing, clock) {
                (None, _) => Some(match walk.of(&c.run_id) {
                    Some(g) => format!("epoch {} had ended ({})", g.epoch, g.ended.map_or("", |e| e.1)),
                    None => "no lease of the run had been granted".to_string(),
                }),
                (Some(g), Some(now)) if now >= g.expires_at => Some(format!(
                    "n{} ({})'s epoch {} had expired {}ms before, by the clock reading of the check",
                    g.node,
                    g.owner,
                    g.epoch,
                    now - g.expires_at
                )),
                _ => None,
            };
            if let Some(why) = why {
                if !said.insert((c.run_id.as_str(), walk.of(&c.run_id).map(|g| g.call), c.op)) {
                    continue;
                }
                out.push(Witness {
                    op: Some(c.op.as_str()),
                    call: Some(c.id),
                    witness: format!(
                        "run {}: the acquire of {} at t={at} was refused as held although {why}",
                        c.run_id,
                        who(c)
                    ),
                });
            }
            continue;
        }
        let g = walk.before(c);
        if staleness(c, g).is_some() {
            continue;
        }
        let Some(g) = g else { continue };
        let live = match clock {
            Some(now) if now < g.expires_at => format!(
                "its epoch {} was live for another {}ms by the clock reading of the check",
                g.epoch,
                g.expires_at - now
            ),
            Some(_) => continue,
            // Refused without reading the clock: not for expiry, and the lease's identity
            // (epoch, owner, grant) was the run's standing one.
            None => format!("its epoch {} was the run's standing grant and the store read no clock", g.epoch),
        };
        if !said.insert((c.run_id.as_str(), Some(g.call), c.op)) {
            continue;
        }
        let l = c.lease.as_ref().map_or(0, |l| l.epoch.0);
        out.push(Witness {
            op: Some(c.op.as_str()),
            call: Some(c.id),
            witness: format!(
                "run {}: the {} of {} under epoch {l} was refused as stale at t={at} although {live}",
                c.run_id,
                op_name(c),
                who(c)
            ),
        });
    }
}

/// The reason each lease refusal names, against the one the grants applied by the time it
/// returned give (the same `seen_at` walk as [`refusals_follow_the_contract`]). One witness per
/// (run, operation, reason expected, reason told).
fn refusals_name_their_reason(j: &Judged, out: &mut Vec<Witness>) {
    if !j.history.observes_store_clock {
        return;
    }
    let mut refused: Vec<(&Call, &str)> = j
        .history
        .calls
        .iter()
        .filter(|c| c.store_clock != StoreClock::NotObserved && c.seen_at.is_some())
        .filter_map(|c| Some((c, c.outcome.lease_refusal_reason()?)))
        .collect();
    refused.sort_by_key(|(c, _)| (c.seen_at, c.returned_ns, c.id));
    let mut said: std::collections::BTreeSet<(&str, OpKind, &str, &str)> = Default::default();
    let mut walk = GrantWalk::default();
    let mut applied = j.applied.iter().peekable();
    for (c, told) in refused {
        let returned = c.returned_ns.unwrap_or(u64::MAX);
        while let Some(a) = applied.next_if(|a| took_effect_before(a, c)) {
            walk.apply(a);
        }
        if c.lease.is_none() && c.op != OpKind::Acquire {
            // FW4: without a lease a mutation is unfenced; no lease row can refuse it.
            if said.insert((c.run_id.as_str(), c.op, "", told)) {
                out.push(Witness {
                    op: Some(c.op.as_str()),
                    call: Some(c.id),
                    witness: format!(
                        "run {}: the {} of {} at t={} carried no lease and was refused as held (`{told}`): an unleased mutation is unfenced (FW4)",
                        c.run_id,
                        op_name(c),
                        who(c),
                        t(returned)
                    ),
                });
            }
            continue;
        }
        let Some((expected, why)) = expected_refusal(c, walk.before(c)) else { continue };
        if told == expected || !said.insert((c.run_id.as_str(), c.op, expected, told)) {
            continue;
        }
        out.push(Witness {
            op: Some(c.op.as_str()),
            call: Some(c.id),
            witness: format!(
                "run {}: the {} of {} at t={} was refused as `{told}`, but {why}: the contract's reason is `{expected}`",
                c.run_id,
                op_name(c),
                who(c),
                t(returned)
            ),
        });
    }
}

/// The reason the fence's order gives for refusing `c` with `g` the standing grant of its
/// lease's run, and why in words; `None` where the history cannot tell (see the property).
fn expected_refusal(c: &Call, g: Option<&super::model::Grant>) -> Option<(&'static str, String)> {
    if c.op == OpKind::Acquire {
        return Some(("held_on_acquire", "an acquire is refused only because a live lease stood".into()));
    }
    let lease = c.lease.as_ref()?;
    if lease.run_id != c.run_id {
        return Some(("run_mismatch", format!("its lease names run {}", lease.run_id)));
    }
    let Some(g) = g else {
        return Some(("not_held", "no lease of the run had been granted".into()));
    };
    if let Some((at, how)) = g.ended {
        return Some(("not_held", format!("epoch {}'s row was gone ({how} at t={})", g.epoch, t(at))));
    }
    if g.epoch != lease.epoch.0 {
        return Some((
            "stale_epoch",
            format!(
                "the row carried epoch {} (n{}, {}) and the lease {}",
                g.epoch, g.node, g.owner, lease.epoch.0
            ),
        ));
    }
    if g.owner != lease.owner {
        return Some(("foreign_owner", format!("epoch {}'s row belongs to {}", g.epoch, g.owner)));
    }
    if c.lease_grant.is_some_and(|id| id != g.call) {
        return None;
    }
    match c.store_clock {
        StoreClock::Read(now) if now >= g.expires_at => Some((
            "expired",
            format!("its row was {}ms past its expiry by the clock reading of the check", now - g.expires_at),
        )),
        _ => None,
    }
}

/// A5 refusals judged against the journal the applied mutations had built when the append
/// returned (`seen_at`, as for the lease refusals and the reads: the reads' [`SerialWalk`]):
/// its run must have held an entry with a seq at least the refused one's (a stored entry
/// without a seq never blocks; a delete empties the run's journal). A refusal whose lease the
/// grants applied by then had already made stale is judged first: the fence check precedes
/// the probe, so the contract refuses it as held, not as out of order. One witness per run.
/// Judged only where the environment
/// serializes the store's calls (the simulated one, which also observes its clock): in a
/// real multi-process run, what was applied by the instant a call returned is known only to
/// the precision of the merged logs.
fn order_refusals_follow_the_journal(j: &Judged, out: &mut Vec<Witness>) {
    if !j.history.observes_store_clock {
        return;
    }
    let mut refused: Vec<&Call> = j
        .history
        .calls
        .iter()
        .filter(|c| c.op == OpKind::Append && c.seen_at.is_some())
        .filter(|c| matches!(&c.outcome, Outcome::Err { code, .. } if code == "journal_order_violation"))
        .collect();
    refused.sort_by_key(|c| (c.seen_at, c.id));
    let mut said: std::collections::BTreeSet<&str> = Default::default();
    let mut walk = SerialWalk::new(j);
    let mut grants = GrantWalk::default();
    let mut applied = j.applied.iter().peekable();
    for c in refused {
        while let Some(a) = applied.next_if(|a| took_effect_before(a, c)) {
            grants.apply(a);
        }
        let seq = c.args.seq.map_or("no seq".to_string(), |s| format!("seq {s}"));
        // The fence check precedes the A5 probe (contract 2.5): a stale lease behind the tail
        // is refused as held, whatever its seq. Expiry counts only where the check read the
        // clock; a superseded, released or deleted grant needs no clock.
        let same_run = c.lease.as_ref().is_some_and(|l| l.run_id == c.run_id);
        if let Some(stale) = staleness(c, grants.before(c)).filter(|_| same_run) {
            if said.insert(c.run_id.as_str()) {
                out.push(Witness {
                    op: Some(c.op.as_str()),
                    call: Some(c.id),
                    witness: format!(
                        "run {}: the append of {seq} by {} at t={} was refused as a journal order violation although its lease was stale ({stale}); the fence check comes first, so the contract refuses it as held",
                        c.run_id,
                        who(c),
                        t(c.returned_ns.unwrap_or(0))
                    ),
                });
            }
            continue;
        }
        let stored = walk.seen_by(c).top_seq(&c.run_id);
        let justified = matches!((c.args.seq, stored), (Some(s), Some(m)) if m >= s);
        if justified || !said.insert(c.run_id.as_str()) {
            continue;
        }
        let held = stored.map_or("no entry with a seq".to_string(), |m| format!("entries up to seq {m}"));
        out.push(Witness {
            op: Some(c.op.as_str()),
            call: Some(c.id),
            witness: format!(
                "run {}: the append of {seq} by {} at t={} was refused as a journal order violation although the run's journal held {held}",
                c.run_id,
                who(c),
                t(c.returned_ns.unwrap_or(0))
            ),
        });
    }
}

/// One witness per (operation, failure code): a store that misuses its database once tends to
/// do so on every call of that shape.
fn failures_are_typed_answers(j: &Judged, out: &mut Vec<Witness>) {
    if !j.history.observes_store_clock {
        return;
    }
    let mut said: std::collections::BTreeSet<(OpKind, &str)> = Default::default();
    for c in &j.history.calls {
        let Outcome::Err { code, message } = &c.outcome else { continue };
        if !matches!(code.as_str(), "storage" | "corrupt") || !said.insert((c.op, code.as_str())) {
            continue;
        }
        out.push(Witness {
            op: Some(c.op.as_str()),
            call: Some(c.id),
            witness: format!(
                "{} by {} at t={} failed as {code}: {message}",
                describe_call(c),
                who(c),
                t(c.returned_ns.unwrap_or(c.invoked_ns))
            ),
        });
    }
}

/// One witness per read operation: a read that takes the write lock meets every writer.
fn reads_never_busy(j: &Judged, out: &mut Vec<Witness>) {
    let mut said: std::collections::BTreeSet<OpKind> = Default::default();
    let reads = [OpKind::Load, OpKind::GetMeta, OpKind::ListRuns, OpKind::BlobGet, OpKind::BlobList];
    for c in &j.history.calls {
        if !reads.contains(&c.op) || !c.outcome.is_busy() || c.store_clock == StoreClock::NotObserved {
            continue;
        }
        if !said.insert(c.op) {
            continue;
        }
        out.push(Witness {
            op: Some(c.op.as_str()),
            call: Some(c.id),
            witness: format!(
                "{} by {} at t={} failed as busy: a read never waits on, nor is refused by, another connection's write lock",
                describe_call(c),
                who(c),
                t(c.returned_ns.unwrap_or(c.invoked_ns))
            ),
        });
    }
}

/// One witness per (operation, what was wrong): the same mistake repeats on every call of
/// that shape. Judged by the oracle's own rule ([`malformed_input`]), not the store's.
fn malformed_input_refused_and_only_it(j: &Judged, out: &mut Vec<Witness>) {
    let mut said: std::collections::BTreeSet<(OpKind, &str)> = Default::default();
    for c in &j.history.calls {
        let malformed = malformed_input(c.op, &c.run_id, &c.args);
        let complaint = match (&c.outcome, malformed) {
            (Outcome::Unknown, _) => continue,
            (Outcome::Err { code, .. }, _) if code == "busy" || code == "crashed" => continue,
            (Outcome::Err { code, .. }, Some(_)) if code == "invalid_input" => continue,
            (Outcome::Ok { .. }, Some(what)) => (what, format!("was accepted with a malformed {what}")),
            (Outcome::Err { code, .. }, Some(what)) => {
                (what, format!("has a malformed {what} but was refused as {code}, not as invalid input"))
            }
            (Outcome::Err { code, message }, None) if code == "invalid_input" => {
                ("well-formed", format!("is well formed but was refused as invalid input ({message})"))
            }
            _ => continue,
        };
        if !said.insert((c.op, complaint.0)) {
            continue;
        }
        out.push(Witness {
            op: Some(c.op.as_str()),
            call: Some(c.id),
            witness: format!(
                "{} by {} at t={} {}",
                describe_call(c),
                who(c),
                t(c.returned_ns.unwrap_or(c.invoked_ns)),
                complaint.1
            ),
        });
    }
    // Changed nothing: a malformed call the store applied anyway is in the apply order.
    for &c in &j.applied {
        if let Some(what) = malformed_input(c.op, &c.run_id, &c.args) {
            if said.insert((c.op, "applied")) {
                out.push(Witness {
                    op: Some(c.op.as_str()),
                    call: Some(c.id),
                    witness: format!(
                        "{} by {} took effect with a malformed {what}",
                        describe_call(c),
                        who(c)
                    ),
                });
            }
        }
    }
}

fn grant_lasts_the_ttl(j: &Judged, out: &mut Vec<Witness>) {
    let Some(ttl) = j.expect.ttl_ms else { return };
    let ttl = ttl as i64;
    for &c in &j.applied {
        if !matches!(c.op, OpKind::Acquire | OpKind::Renew) {
            continue;
        }
        let (Some(a), Some(checked)) = (&c.applied, c.checked_now_ms) else { continue };
        let Some(row) = &a.lease_row else { continue };
        // Only judge the row this call wrote (its own grant or lease).
        let epoch = c.granted.as_ref().or(c.lease.as_ref()).map(|l| l.epoch.0);
        if epoch != Some(row.epoch) {
            continue;
        }
        let (lo, hi) = (checked + ttl, a.store_now_ms + ttl);
        if row.expires_at < lo || row.expires_at > hi {
            out.push(
                Witness::new(format!(
                        "{} by {} at t={} set expires_at={} but the store's clock read {}..{} with a ttl of {ttl}ms (want {lo}..{hi})",
                        op_name(c),
                        who(c),
                        t(Judged::applied_ns(c)),
                        row.expires_at,
                        checked,
                        a.store_now_ms
                    ),
                )
                .on(c.op, c.id),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    //! The read, ttl, journal, meta and cross-run properties shown able to fail on minimal
    //! histories.
    use crate::oracle::testkit::meta_record;

    use serde_json::json;
    use store::{Epoch, JournalEntry, Lease, RunFilter, RunStatus};

    use super::*;
    use crate::history::FinalState;
    use crate::history::{Applied, Args, History, LeaseRow, Outcome};
    use crate::oracle::Expect;

    fn call(id: usize, op: OpKind, args: Args, applied: Option<usize>, seen_at: usize) -> Call {
        let mut c = crate::oracle::testkit::call(id, op);
        (c.args, c.invoked_ns, c.returned_ns) = (args, id as u64, Some(id as u64));
        (c.checked_now_ms, c.seen_at) = (Some(100), Some(seen_at));
        c.applied = applied.map(|order| Applied {
            order,
            at_ns: id as u64,
            store_now_ms: 100,
            lease_row: None,
            site_epoch: None,
        });
        c
    }

    /// An entry value as a store would return it (built as data, no store code runs).
    fn entry(seq: u64, kind: &str, status: &str, value: Value) -> JournalEntry {
        crate::record_text::bare_entry(seq, kind, status, value)
    }

    /// The payload text a writer sends for `v` (its serialized shape).
    fn text<T: serde::Serialize>(v: &T) -> String {
        serde_json::to_string(v).expect("serializable")
    }

    fn judge(h: &History, ttl: Option<u64>, name: &str) -> Vec<crate::oracle::Violation> {
        judge_over(h, &FinalState::default(), ttl, name)
    }

    fn judge_over(
        h: &History,
        fin: &FinalState,
        ttl: Option<u64>,
        name: &str,
    ) -> Vec<crate::oracle::Violation> {
        let j = Judged::build(h, fin, Expect { ttl_ms: ttl, ..Default::default() });
        let p = ALL.iter().find(|p| p.name == name).expect("property");
        p.judge(&j)
    }

    #[test]
    fn a_busy_read_is_caught_and_a_busy_write_is_not() {
        // One call that failed busy, not applied, in an environment that observes (or not)
        // the store.
        let busy = |op: OpKind, clock: StoreClock| {
            let mut c = crate::oracle::testkit::call(0, op);
            c.outcome = Outcome::Err { code: "busy".into(), message: "database is locked".into() };
            c.applied = None;
            c.store_clock = clock;
            History { calls: vec![c], ..History::default() }
        };
        for op in [OpKind::Load, OpKind::GetMeta, OpKind::ListRuns, OpKind::BlobGet, OpKind::BlobList] {
            let v = judge(&busy(op, StoreClock::NotRead), None, "reads_never_busy");
            assert_eq!(v.len(), 1, "{op:?}: {v:?}");
            assert!(v[0].witness.contains("failed as busy"), "{}", v[0].witness);
            // A real multi-process run may meet a WAL recovery: not judged.
            assert!(judge(&busy(op, StoreClock::NotObserved), None, "reads_never_busy").is_empty());
        }
        for op in [OpKind::Append, OpKind::PutMeta, OpKind::Acquire] {
            assert!(judge(&busy(op, StoreClock::NotRead), None, "reads_never_busy").is_empty(), "{op:?}");
        }
    }

    #[test]
    fn an_epoch_that_skips_the_high_water_mark_is_caught() {
        use crate::oracle::testkit::engine::HistoryBuilder;
        let steps = |epochs: &[(&str, u64)]| {
            let mut h = HistoryBuilder::engine_run();
            for (i, (run, e)) in epochs.iter().enumerate() {
                h.acquire(0, &format!("w{i}"), run, *e);
            }
            judge_over(&h.h, &h.fin, None, "epochs_step_by_one")
        };
        assert!(steps(&[("r", 1), ("s", 1), ("r", 2), ("r", 3), ("s", 2)]).is_empty());
        let v = steps(&[("r", 1), ("r", 2), ("s", 3)]);
        assert_eq!(v.len(), 1, "a first grant above 1: {v:?}");
        assert!(v[0].witness.contains("never been granted one"), "{}", v[0].witness);
        let v = steps(&[("r", 1), ("r", 3), ("r", 4)]);
        assert_eq!(v.len(), 1, "a skipped epoch, then steps of one from the new mark: {v:?}");
        assert!(v[0].witness.contains("should carry 2"), "{}", v[0].witness);
        // A grant at or below the mark is the other property's; the mark stays.
        assert!(steps(&[("r", 1), ("r", 2), ("r", 1), ("r", 3)]).is_empty());
        // An applied acquire with no epoch on record: the next grant is taken as the mark.
        let mut h = HistoryBuilder::engine_run();
        h.acquire(0, "a", "r", 1);
        h.push(0, OpKind::Acquire, "r", None, Args { owner: Some("b".into()), ..Args::default() }, None);
        h.acquire(0, "c", "r", 3);
        h.acquire(0, "d", "r", 4);
        assert!(judge_over(&h.h, &h.fin, None, "epochs_step_by_one").is_empty());
        h.acquire(0, "e", "r", 6);
        assert_eq!(judge_over(&h.h, &h.fin, None, "epochs_step_by_one").len(), 1);
    }

    /// Run `r` granted to `a` (epoch 1, expiring at 400 ms by the store's clock) at apply
    /// position 0, then `call` refused as held or stale after it.
    fn refused_after_a_grant(mut refused: Call, clock: StoreClock) -> History {
        let mut grant =
            call(0, OpKind::Acquire, Args { owner: Some("a".into()), ..Args::default() }, Some(0), 1);
        grant.granted = Some(Lease { run_id: "r".into(), owner: "a".into(), epoch: Epoch(1) });
        if let Some(a) = grant.applied.as_mut() {
            a.lease_row = Some(LeaseRow { owner: "a".into(), epoch: 1, expires_at: 400 });
        }
        refused.outcome = Outcome::Err { code: "lease_held".into(), message: String::new() };
        (refused.applied, refused.checked_now_ms, refused.store_clock) = (None, None, clock);
        History {
            applied_count: 1,
            observes_store_clock: true,
            calls: vec![grant, refused],
            ..History::default()
        }
    }

    /// The refusal property's verdict on `refused`, refused after the grant above.
    fn refusals(refused: &Call, clock: StoreClock) -> Vec<crate::oracle::Violation> {
        judge(&refused_after_a_grant(refused.clone(), clock), None, "refusals_follow_the_contract")
    }

    #[test]
    fn an_acquire_refused_as_held_needs_a_live_lease_at_the_checks_clock_reading() {
        let acquire = call(1, OpKind::Acquire, Args { owner: Some("b".into()), ..Args::default() }, None, 1);
        // At 399 ms the grant is live: the refusal is the contract.
        assert!(refusals(&acquire, StoreClock::Read(399)).is_empty());
        // At its expiry instant the lease is over (a fenced write is refused then too).
        let v = refusals(&acquire, StoreClock::Read(400));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("had expired 0ms before"), "{}", v[0].witness);
        // Released before it (apply position 1): nothing stood.
        let late = call(2, OpKind::Acquire, Args { owner: Some("b".into()), ..Args::default() }, None, 2);
        let mut h = refused_after_a_grant(late, StoreClock::Read(10));
        let mut release = call(1, OpKind::Release, Args::default(), Some(1), 2);
        release.lease = Some(Lease { run_id: "r".into(), owner: "a".into(), epoch: Epoch(1) });
        release.checked_now_ms = Some(5);
        h.calls.insert(1, release);
        h.applied_count = 2;
        let v = judge(&h, None, "refusals_follow_the_contract");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("had ended (released)"), "{}", v[0].witness);
        // Not observed (a real run): not judged.
        let mut h = refused_after_a_grant(acquire, StoreClock::NotObserved);
        h.observes_store_clock = false;
        assert!(judge(&h, None, "refusals_follow_the_contract").is_empty());
    }

    #[test]
    fn a_refusal_must_name_the_reason_the_fence_order_gives() {
        let told = |lease: Option<Lease>, op: OpKind, run: &str, clock: StoreClock, reason: &str| {
            let mut c = call(1, op, Args::default(), None, 1);
            (c.lease, c.run_id) = (lease, run.into());
            let mut h = refused_after_a_grant(c, clock);
            h.calls[1].outcome = Outcome::Err {
                code: "lease_held".into(),
                message: format!("lease held: {reason} (run {run})"),
            };
            judge(&h, None, "refusals_name_their_reason")
        };
        let lease = |owner: &str, epoch: u64, run: &str| {
            Some(Lease { run_id: run.into(), owner: owner.into(), epoch: Epoch(epoch) })
        };
        // The holder's own lease at or past its expiry: `expired`, and only that.
        assert!(told(lease("a", 1, "r"), OpKind::Renew, "r", StoreClock::Read(400), "expired").is_empty());
        let v = told(lease("a", 1, "r"), OpKind::Renew, "r", StoreClock::Read(400), "stale_epoch");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("the contract's reason is `expired`"), "{}", v[0].witness);
        // Another epoch: `stale_epoch`, even when the row has expired too (epoch before expiry).
        assert!(
            told(lease("a", 2, "r"), OpKind::Append, "r", StoreClock::Read(900), "stale_epoch").is_empty()
        );
        assert_eq!(told(lease("a", 2, "r"), OpKind::Append, "r", StoreClock::Read(900), "expired").len(), 1);
        // The same epoch under another owner: `foreign_owner` (owner before expiry).
        assert!(
            told(lease("z", 1, "r"), OpKind::Append, "r", StoreClock::Read(900), "foreign_owner").is_empty()
        );
        assert_eq!(
            told(lease("z", 1, "r"), OpKind::Append, "r", StoreClock::Read(10), "stale_epoch").len(),
            1
        );
        // A lease of another run: `run_mismatch` before any holder check.
        assert!(
            told(lease("a", 1, "q"), OpKind::Append, "r", StoreClock::Read(10), "run_mismatch").is_empty()
        );
        assert_eq!(told(lease("a", 1, "q"), OpKind::Append, "r", StoreClock::Read(10), "not_held").len(), 1);
        // No grant of the run at all: `not_held`.
        assert!(told(lease("a", 1, "s"), OpKind::Append, "s", StoreClock::Read(10), "not_held").is_empty());
        assert_eq!(
            told(lease("a", 1, "s"), OpKind::Append, "s", StoreClock::Read(10), "stale_epoch").len(),
            1
        );
        // An acquire is refused only as held.
        assert!(told(None, OpKind::Acquire, "r", StoreClock::Read(10), "held_on_acquire").is_empty());
        assert_eq!(told(None, OpKind::Acquire, "r", StoreClock::Read(10), "expired").len(), 1);
        // An unleased mutation is unfenced: no reason will do.
        let v = told(None, OpKind::Delete, "r", StoreClock::Read(10), "held_on_acquire");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("unfenced (FW4)"), "{}", v[0].witness);
        // A live holder refused, or no clock read: the reason is not judged here.
        assert!(told(lease("a", 1, "r"), OpKind::Renew, "r", StoreClock::Read(10), "expired").is_empty());
        assert!(told(lease("a", 1, "r"), OpKind::Renew, "r", StoreClock::NotRead, "expired").is_empty());
        // Released: the row is gone, `not_held` whatever the clock says.
        let mut c = call(2, OpKind::Renew, Args::default(), None, 2);
        c.lease = lease("a", 1, "r");
        let mut h = refused_after_a_grant(c, StoreClock::Read(900));
        h.calls[1].outcome =
            Outcome::Err { code: "lease_held".into(), message: "lease held: expired (run r)".into() };
        let mut release = call(1, OpKind::Release, Args::default(), Some(1), 2);
        release.lease = lease("a", 1, "r");
        release.checked_now_ms = Some(5);
        h.calls.insert(1, release);
        h.applied_count = 2;
        let v = judge(&h, None, "refusals_name_their_reason");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("row was gone (released"), "{}", v[0].witness);
    }

    #[test]
    fn malformed_input_must_be_refused_as_such_and_well_formed_input_must_not() {
        let verdict = |op: OpKind, run: &str, args: Args, outcome: Outcome, applied: bool| {
            let mut c = call(0, op, args, applied.then_some(0), 0);
            c.run_id = run.into();
            c.outcome = outcome;
            let h = History { applied_count: usize::from(applied), calls: vec![c], ..History::default() };
            judge(&h, None, "malformed_input_refused_and_only_it")
        };
        let ok = || Outcome::Ok { detail: String::new() };
        let err = |code: &str| Outcome::Err { code: code.into(), message: "m".into() };
        let seq = |s| Args { seq: Some(s), ..Args::default() };
        let limit = (1u64 << 53) - 1;
        // The seq limit itself is well formed, one above it is not.
        assert!(verdict(OpKind::Append, "r", seq(limit), ok(), true).is_empty());
        assert!(verdict(OpKind::Append, "r", seq(limit + 1), err("invalid_input"), false).is_empty());
        let v = verdict(OpKind::Append, "r", seq(limit), err("invalid_input"), false);
        assert!(v.len() == 1 && v[0].witness.contains("well formed"), "{v:?}");
        let v = verdict(OpKind::Append, "r", seq(limit + 1), ok(), true);
        assert_eq!(v.len(), 2, "accepted and applied: {v:?}");
        // Run ids, refs and owners by T5's safe segment.
        for bad in ["", ".", "..", "a/b", "a b", "é"] {
            assert!(
                verdict(OpKind::Load, bad, Args::default(), err("invalid_input"), false).is_empty(),
                "{bad}"
            );
            assert_eq!(verdict(OpKind::GetMeta, bad, Args::default(), ok(), false).len(), 1, "{bad}");
        }
        let blob = |r: &str| Args { blob_ref: Some(r.into()), ..Args::default() };
        assert!(verdict(OpKind::BlobPut, "r", blob("r/ckpt/1"), ok(), true).is_empty());
        assert_eq!(verdict(OpKind::BlobGet, "r", blob("r//x"), err("lease_held"), false).len(), 1);
        let owner = |o: &str| Args { owner: Some(o.into()), ..Args::default() };
        assert_eq!(verdict(OpKind::Acquire, "r", owner(""), ok(), true).len(), 2);
        assert!(verdict(OpKind::Acquire, "r", owner("w"), err("lease_held"), false).is_empty());
        // A record that names a field twice (only a Rust `extra` map can build one).
        let payload = |p: &str| Args { payload: Some(p.into()), ..Args::default() };
        let twice = r#"{"runId":"r","status":"running","status":"ok"}"#;
        let once = r#"{"runId":"r","status":"running","nested":{"status":"ok"}}"#;
        assert!(verdict(OpKind::PutMeta, "r", payload(twice), err("invalid_input"), false).is_empty());
        assert!(verdict(OpKind::PutMeta, "r", payload(once), ok(), true).is_empty());
        let v = verdict(OpKind::PutMeta, "r", payload(twice), ok(), true);
        assert!(v.len() == 2 && v[0].witness.contains("malformed run meta"), "{v:?}");
        let entry = |p: &str| Args { seq: Some(3), payload: Some(p.into()), ..Args::default() };
        let v = verdict(
            OpKind::Append,
            "r",
            entry(r#"{"seq":3,"kind":"k","value":1,"\u0076alue":2}"#),
            ok(),
            true,
        );
        assert!(v.len() == 2 && v[0].witness.contains("malformed journal entry"), "{v:?}");
        // Busy or a crash says nothing about the input.
        assert!(verdict(OpKind::Load, "..", Args::default(), err("busy"), false).is_empty());
        assert!(verdict(OpKind::Load, "..", Args::default(), Outcome::Unknown, false).is_empty());
    }

    #[test]
    fn a_storage_or_corrupt_failure_is_caught_and_typed_refusals_are_not() {
        let failed = |code: &str| {
            let mut c = call(0, OpKind::Append, Args::default(), None, 0);
            c.outcome = Outcome::Err {
                code: code.into(),
                message: "cannot start a transaction within a transaction".into(),
            };
            History { observes_store_clock: true, calls: vec![c], ..History::default() }
        };
        for code in ["lease_held", "busy", "journal_order_violation", "invalid_input", "config", "crashed"] {
            assert!(judge(&failed(code), None, "failures_are_typed_answers").is_empty(), "{code}");
        }
        for code in ["storage", "corrupt"] {
            let v = judge(&failed(code), None, "failures_are_typed_answers");
            assert_eq!(v.len(), 1, "{code}: {v:?}");
            assert!(v[0].witness.contains(&format!("failed as {code}")), "{}", v[0].witness);
        }
        // A real multi-process run's disk may fail: not judged there.
        let mut h = failed("storage");
        h.observes_store_clock = false;
        assert!(judge(&h, None, "failures_are_typed_answers").is_empty());
    }

    #[test]
    fn a_write_refused_as_stale_needs_a_superseded_or_expired_caller() {
        let mut append = call(1, OpKind::Append, Args::default(), None, 1);
        append.lease = Some(Lease { run_id: "r".into(), owner: "a".into(), epoch: Epoch(1) });
        // The holder, 100 ms before its expiry by the check's reading: over-fenced.
        let v = refusals(&append, StoreClock::Read(300));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("live for another 100ms"), "{}", v[0].witness);
        // Refused with no clock read while its identity stood: over-fenced too.
        assert_eq!(refusals(&append, StoreClock::NotRead).len(), 1);
        // Expired by the reading: the contract's refusal.
        assert!(refusals(&append, StoreClock::Read(400)).is_empty());
        // Another epoch, or a lease naming another run: not over-fenced / not judged here.
        let mut stale = append.clone();
        stale.lease = Some(Lease { run_id: "r".into(), owner: "a".into(), epoch: Epoch(7) });
        assert!(refusals(&stale, StoreClock::NotRead).is_empty());
        let mut other = append;
        other.lease = Some(Lease { run_id: "q".into(), owner: "a".into(), epoch: Epoch(1) });
        assert!(refusals(&other, StoreClock::NotRead).is_empty());
    }

    #[test]
    fn an_append_refused_as_out_of_order_needs_a_stored_seq_at_least_its_own() {
        // Run r holds seqs 0 and 1 (apply positions 0 and 1); run q holds seq 5.
        let append = |id, run: &str, seq, applied| {
            let payload = Some(text(&entry(seq, "agent", "running", json!({}))));
            let mut c =
                call(id, OpKind::Append, Args { seq: Some(seq), payload, ..Args::default() }, applied, id);
            c.run_id = run.into();
            c
        };
        let refused = |id, run: &str, seq: Option<u64>| {
            let mut c = append(id, run, 0, None);
            c.args.seq = seq;
            c.outcome = Outcome::Err { code: "journal_order_violation".into(), message: String::new() };
            c
        };
        let verdict = |last: Call| {
            let calls = vec![
                append(0, "r", 0, Some(0)),
                append(1, "r", 1, Some(1)),
                append(2, "q", 5, Some(2)),
                last,
            ];
            let h = History { applied_count: 3, calls, observes_store_clock: true, ..History::default() };
            judge(&h, None, "refusals_follow_the_contract")
        };
        // Seq 1 again, or seq 0: A5 refuses, as the contract says.
        assert!(verdict(refused(3, "r", Some(1))).is_empty());
        assert!(verdict(refused(3, "r", Some(0))).is_empty());
        // Seq 2 is past the stored tail: refusing it over-fences (q's seq 5 is another run's).
        let v = verdict(refused(3, "r", Some(2)));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("held entries up to seq 1"), "{}", v[0].witness);
        // A run with no entries, and an entry without a seq: never blocked.
        assert_eq!(verdict(refused(3, "s", Some(0))).len(), 1);
        assert_eq!(verdict(refused(3, "r", None)).len(), 1);
        // A delete empties the journal: seq 0 is lawful again after it.
        let mut delete = call(3, OpKind::Delete, Args::default(), Some(3), 3);
        delete.run_id = "r".into();
        let calls = vec![
            append(0, "r", 0, Some(0)),
            append(1, "r", 1, Some(1)),
            append(2, "q", 5, Some(2)),
            delete,
            refused(4, "r", Some(0)),
        ];
        let mut h = History { applied_count: 4, calls, observes_store_clock: true, ..History::default() };
        assert_eq!(judge(&h, None, "refusals_follow_the_contract").len(), 1);
        // A real multi-process run: the apply order at a call's return is not exact there.
        h.observes_store_clock = false;
        assert!(judge(&h, None, "refusals_follow_the_contract").is_empty());
    }

    #[test]
    fn a_stale_append_behind_the_tail_must_be_refused_as_held_not_out_of_order() {
        // a holds epoch 1 (expiring at 400 ms) from apply position 0; b takes epoch 2 at
        // position 1 and appends seq 0 at position 2; then an append of seq 0 is refused.
        let lease =
            |owner: &str, epoch| Some(Lease { run_id: "r".into(), owner: owner.into(), epoch: Epoch(epoch) });
        let grant = |id, owner: &str, epoch| {
            let mut g = call(
                id,
                OpKind::Acquire,
                Args { owner: Some(owner.into()), ..Args::default() },
                Some(id),
                id,
            );
            g.granted = lease(owner, epoch);
            if let Some(a) = g.applied.as_mut() {
                a.lease_row = Some(LeaseRow { owner: owner.into(), epoch, expires_at: 400 });
            }
            g
        };
        let append = |id, owner: &str, epoch, applied| {
            let payload = Some(text(&entry(0, "agent", "running", json!({}))));
            let mut c =
                call(id, OpKind::Append, Args { seq: Some(0), payload, ..Args::default() }, applied, id);
            c.lease = lease(owner, epoch);
            c
        };
        let verdict = |refused: Call, code: &str, clock: Option<i64>, takeover: bool| {
            let mut last = refused;
            (last.outcome, last.checked_now_ms) =
                (Outcome::Err { code: code.into(), message: String::new() }, clock);
            last.store_clock = clock.map_or(StoreClock::NotRead, StoreClock::Read);
            let mut calls = vec![grant(0, "a", 1)];
            if takeover {
                calls.extend([grant(1, "b", 2), append(2, "b", 2, Some(2))]);
            } else {
                calls.push(append(1, "a", 1, Some(1)));
            }
            let applied_count = calls.len();
            calls.push(last);
            let h = History { applied_count, calls, observes_store_clock: true, ..History::default() };
            judge(&h, None, "refusals_follow_the_contract")
        };
        // The superseded a behind b's tail, refused as out of order with no clock read: the
        // fence check was skipped or came second.
        let v = verdict(append(3, "a", 1, None), "journal_order_violation", None, true);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("epoch 2 had been granted to n"), "{}", v[0].witness);
        assert!(v[0].witness.contains("refuses it as held"), "{}", v[0].witness);
        // The same refusal as held is the contract; b, the holder, behind its own tail is A5's.
        assert!(verdict(append(3, "a", 1, None), "lease_held", Some(100), true).is_empty());
        assert!(verdict(append(3, "b", 2, None), "journal_order_violation", Some(100), true).is_empty());
        // a's own tail: out of order while live by the check's clock, held once expired.
        assert!(verdict(append(2, "a", 1, None), "journal_order_violation", Some(399), false).is_empty());
        let v = verdict(append(2, "a", 1, None), "journal_order_violation", Some(400), false);
        assert!(v.len() == 1 && v[0].witness.contains("had expired"), "{v:?}");
        // No clock read: expiry is not judged (the identity stood).
        assert!(verdict(append(2, "a", 1, None), "journal_order_violation", None, false).is_empty());
    }

    #[test]
    fn a_boot_may_give_up_with_busy_only_after_the_contracts_deadline() {
        let mut h = History::default();
        let mut boot = call(0, OpKind::Boot, Args::default(), None, 0);
        boot.outcome = Outcome::Err { code: "busy".into(), message: String::new() };
        (boot.invoked_ns, boot.returned_ns) = (0, Some(4_999 * 1_000_000));
        h.calls.push(boot);
        let v = judge(&h, None, "every_boot_succeeds");
        assert_eq!(v.len(), 1, "a Busy before 5,000 ms of retrying is the boot-race defect: {v:?}");
        assert!(v[0].witness.contains("after 4999ms: err busy"), "{}", v[0].witness);
        // The deadline met: the lock was held that long, and the contract says rethrow.
        h.calls[0].returned_ns = Some(5_000 * 1_000_000);
        assert!(judge(&h, None, "every_boot_succeeds").is_empty());
        // Another error is never excused, however late.
        h.calls[0].outcome = Outcome::Err { code: "sql".into(), message: String::new() };
        assert_eq!(judge(&h, None, "every_boot_succeeds").len(), 1);
    }

    #[test]
    fn a_ttl_outside_the_domain_is_refused_as_configuration_and_only_it() {
        let boot = |id: usize, ttl: i64, outcome: Outcome| {
            let mut c = call(id, OpKind::Boot, Args { ttl_ms: Some(ttl), ..Args::default() }, None, 0);
            c.outcome = outcome;
            c
        };
        let config = || Outcome::Err { code: "config".into(), message: "lease ttl".into() };
        let ok = || Outcome::Ok { detail: String::new() };
        let calls = vec![boot(0, 0, config()), boot(1, 2_147_483_647, ok()), boot(2, -1, config())];
        let mut h = History { calls, ..History::default() };
        assert!(judge(&h, None, "ttl_outside_the_domain_refused").is_empty());
        // A refused bad ttl is the contract's answer, not a failed boot.
        assert!(judge(&h, None, "every_boot_succeeds").is_empty());
        // Accepted outside the domain; refused as config inside it; refused as something else.
        h.calls[0].outcome = ok();
        h.calls[1].outcome = config();
        h.calls[2].outcome = Outcome::Err { code: "invalid_input".into(), message: String::new() };
        let v = judge(&h, None, "ttl_outside_the_domain_refused");
        let said: Vec<&str> = v.iter().map(|w| w.witness.as_str()).collect();
        assert_eq!(v.len(), 3, "{said:?}");
        assert!(said[0].contains("ttl of 0ms") && said[0].contains("was accepted"), "{}", said[0]);
        assert!(said[1].contains("2147483647ms") && said[1].contains("inside the domain"), "{}", said[1]);
        assert!(said[2].contains("as invalid_input, not as a configuration error"), "{}", said[2]);
        // Busy and a crash say nothing about the ttl.
        h.calls[2].outcome = Outcome::Err { code: "busy".into(), message: String::new() };
        assert_eq!(judge(&h, None, "ttl_outside_the_domain_refused").len(), 2);
    }

    #[test]
    fn a_refused_ttl_that_left_a_database_is_caught() {
        let boot = |id: usize, node: u32, ttl: i64| {
            let mut c = call(id, OpKind::Boot, Args { ttl_ms: Some(ttl), ..Args::default() }, None, 0);
            (c.node, c.outcome) = (node, Outcome::Err { code: "config".into(), message: "lease ttl".into() });
            c
        };
        let fresh = |node: u32, after: usize, ttl_ms: i64, database_left: bool| crate::history::Fact {
            at_ns: after as u64,
            applied_before: 0,
            node,
            incarnation: 0,
            owner: String::new(),
            invoked_before: after,
            kind: FactKind::FreshBoot { ttl_ms, database_left },
        };
        let judged = |facts: Vec<crate::history::Fact>| {
            let calls = vec![boot(0, 0, 0), boot(1, 1, -1), boot(2, 0, 1)];
            judge(&History { calls, facts, ..History::default() }, None, "a_refused_ttl_opens_no_database")
        };
        assert!(judged(vec![fresh(0, 1, 0, false)]).is_empty(), "nothing left");
        let v = judged(vec![fresh(0, 2, 0, true)]);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("ttl of 0ms") && v[0].witness.contains("left a database file"));
        // The fact belongs to node 1's boot of -1 (node 0's boot of 0 is not its process).
        assert_eq!(judged(vec![fresh(1, 2, -1, true)]).len(), 1);
        // The process's last boot had another ttl, or one inside the domain: not judged.
        assert!(judged(vec![fresh(0, 3, 0, true)]).is_empty());
        assert!(judged(vec![fresh(0, 3, 1, true)]).is_empty());
    }

    #[test]
    fn a_load_that_misses_a_durable_entry_is_caught() {
        let e1 = entry(1, "agent", "running", json!({}));
        let e2 = entry(2, "agent", "ok", json!("v"));
        let mut h = History::default();
        for (i, e) in [&e1, &e2].into_iter().enumerate() {
            let args = Args { seq: Some(e.seq.0), payload: Some(text(e)), ..Args::default() };
            h.calls.push(call(i, OpKind::Append, args, Some(i), i + 1));
        }
        h.applied_count = 2;
        let mut first = call(2, OpKind::Load, Args::default(), None, 1);
        first.read = Some(Read::Entries(vec![e1.clone()]));
        let mut second = call(3, OpKind::Load, Args::default(), None, 2);
        second.read = Some(Read::Entries(vec![e1.clone(), e2.clone()]));
        h.calls.push(first);
        h.calls.push(second);
        assert!(judge(&h, None, "reads_see_serial_history").is_empty());
        h.calls[3].read = Some(Read::Entries(vec![e1.clone()]));
        let v = judge(&h, None, "reads_see_serial_history");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("1 entries where 2 were durable"), "{}", v[0].witness);
    }

    #[test]
    fn a_list_that_drops_a_match_or_breaks_a_strict_filter_is_caught() {
        let running = meta_record("r", RunStatus::Running);
        let mut h = History::default();
        let args = Args { payload: Some(text(&running)), ..Args::default() };
        h.calls.push(call(0, OpKind::PutMeta, args, Some(0), 1));
        h.applied_count = 1;
        let mut list = call(1, OpKind::ListRuns, Args::default(), None, 1);
        let only_ok = RunFilter { status: Some(RunStatus::Ok), ..RunFilter::default() };
        list.read = Some(Read::Runs { filter: only_ok, metas: vec![running.clone()] });
        h.calls.push(list);
        assert_eq!(judge(&h, None, "reads_see_serial_history").len(), 1, "status alone must be honoured");
        let only_ok_of_many = RunFilter { statuses: Some(vec![RunStatus::Ok]), ..RunFilter::default() };
        h.calls[1].read = Some(Read::Runs { filter: only_ok_of_many, metas: vec![running.clone()] });
        assert!(judge(&h, None, "reads_see_serial_history").is_empty(), "statuses may over-match");
        let named = RunFilter { name: Some("other".into()), ..RunFilter::default() };
        h.calls[1].read = Some(Read::Runs { filter: named, metas: vec![running.clone()] });
        assert_eq!(judge(&h, None, "reads_see_serial_history").len(), 1, "name must be honoured");
        let resumable = RunFilter {
            statuses: Some(vec![RunStatus::Running, RunStatus::Suspended]),
            ..RunFilter::default()
        };
        h.calls[1].read = Some(Read::Runs { filter: resumable, metas: vec![] });
        assert_eq!(judge(&h, None, "reads_see_serial_history").len(), 1);
    }

    #[test]
    fn a_list_out_of_order_or_listing_twice_is_caught() {
        let (a, b) = (meta_record("a", RunStatus::Running), meta_record("b", RunStatus::Ok));
        let mut h = History::default();
        for (i, m) in [&a, &b].into_iter().enumerate() {
            let mut put =
                call(i, OpKind::PutMeta, Args { payload: Some(text(m)), ..Args::default() }, Some(i), i + 1);
            put.run_id = m.run_id.clone();
            h.calls.push(put);
        }
        for (i, r) in ["r/ckpt/10", "r/ckpt/9"].into_iter().enumerate() {
            let args = Args { blob_ref: Some(r.into()), bytes: Some(vec![1]), ..Args::default() };
            h.calls.push(call(2 + i, OpKind::BlobPut, args, Some(2 + i), 3 + i));
        }
        h.applied_count = 4;
        let mut list = call(4, OpKind::ListRuns, Args::default(), None, 4);
        list.read = Some(Read::Runs { filter: RunFilter::default(), metas: vec![a.clone(), b.clone()] });
        h.calls.push(list);
        let mut refs = call(5, OpKind::BlobList, Args::default(), None, 4);
        refs.read = Some(Read::Refs(vec!["r/ckpt/10".into(), "r/ckpt/9".into()]));
        h.calls.push(refs);
        assert!(judge(&h, None, "reads_see_serial_history").is_empty());
        // First-put order is not ref order once "ckpt/10" sorts before "ckpt/9" (or the other way).
        h.calls[5].read = Some(Read::Refs(vec!["r/ckpt/9".into(), "r/ckpt/10".into()]));
        let v = judge(&h, None, "reads_see_serial_history");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("not in ref order"), "{}", v[0].witness);
        h.calls[5].read = Some(Read::Refs(vec!["r/ckpt/10".into(), "r/ckpt/9".into()]));
        h.calls[4].read =
            Some(Read::Runs { filter: RunFilter::default(), metas: vec![b.clone(), a.clone()] });
        assert_eq!(judge(&h, None, "reads_see_serial_history").len(), 1, "run id order");
        h.calls[4].read =
            Some(Read::Runs { filter: RunFilter::default(), metas: vec![a.clone(), a.clone(), b.clone()] });
        let v = judge(&h, None, "reads_see_serial_history");
        assert!(v.len() == 1 && v[0].witness.contains("once each"), "{v:?}");
    }

    #[test]
    fn a_renew_that_does_not_extend_is_caught() {
        let lease = Lease { run_id: "r".into(), owner: "o".into(), epoch: Epoch(1) };
        let mut h = History::default();
        let mut renew = call(0, OpKind::Renew, Args::default(), Some(0), 1);
        renew.lease = Some(lease.clone());
        renew.applied.as_mut().unwrap().lease_row =
            Some(LeaseRow { owner: "o".into(), epoch: 1, expires_at: 400 });
        h.calls.push(renew);
        h.applied_count = 1;
        assert!(judge(&h, Some(300), "grant_lasts_the_ttl").is_empty());
        assert!(judge(&h, None, "grant_lasts_the_ttl").is_empty(), "no stated ttl: not judged");
        h.calls[0].applied.as_mut().unwrap().lease_row.as_mut().unwrap().expires_at = 350;
        assert_eq!(judge(&h, Some(300), "grant_lasts_the_ttl").len(), 1);
    }

    fn append(id: usize, seq: u64, tag: &str) -> (Call, String) {
        let e = json!({"seq": seq, "kind": "soak", "status": "ok", "key": "", "value": { "tag": tag }})
            .to_string();
        let args = Args { seq: Some(seq), payload: Some(e.clone()), ..Args::default() };
        (call(id, OpKind::Append, args, Some(id), id + 1), e)
    }

    #[test]
    fn an_append_at_the_tail_seq_is_caught() {
        let mut h = History::default();
        let mut fin = FinalState::default();
        for (id, seq) in [(0, 1), (1, 2)] {
            let (c, stored) = append(id, seq, &format!("a{id}"));
            h.calls.push(c);
            fin.entries.entry("r".into()).or_default().push(stored);
        }
        h.applied_count = 2;
        assert!(judge_over(&h, &fin, None, "journal_equals_serial_history").is_empty());
        // The store let a second entry at seq 2 in: stored and applied, so only the order is wrong.
        let (c, stored) = append(2, 2, "dup");
        h.calls.push(c);
        fin.entries.entry("r".into()).or_default().push(stored);
        h.applied_count = 3;
        let v = judge_over(&h, &fin, None, "journal_equals_serial_history");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("seq 2 at position 3 follows seq 2"), "{}", v[0].witness);
        assert_eq!(v[0].op, Some("append"));
    }

    #[test]
    fn a_meta_write_under_another_runs_lease_is_caught_and_a_refused_one_is_not() {
        let mut h = History::default();
        let meta = json!({"runId": "other", "status": "running"}).to_string();
        let args = Args { payload: Some(meta), ..Args::default() };
        let mut c = call(0, OpKind::PutMeta, args, None, 0);
        c.run_id = "other".into();
        c.lease = Some(Lease { run_id: "r".into(), owner: "o".into(), epoch: Epoch(1) });
        c.outcome = Outcome::Err { code: "lease_held".into(), message: "run mismatch".into() };
        h.calls.push(c);
        assert!(judge(&h, None, "no_cross_run_write").is_empty(), "refused: nothing to judge");
        let c = &mut h.calls[0];
        c.outcome = Outcome::Ok { detail: String::new() };
        c.applied =
            Some(Applied { order: 0, at_ns: 0, store_now_ms: 100, lease_row: None, site_epoch: None });
        h.applied_count = 1;
        let v = judge(&h, None, "no_cross_run_write");
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!(v[0].op, Some("put_meta"));
    }

    #[test]
    fn a_delete_that_died_halfway_and_left_its_first_statement_is_caught() {
        // One entry and a meta row applied; a delete whose node died in flight (not applied).
        let mut h = History::default();
        let mut fin = FinalState::default();
        let (c, stored) = append(0, 1, "a");
        h.calls.push(c);
        let meta = json!({"runId": "r", "status": "running"}).to_string();
        let args = Args { payload: Some(meta.clone()), ..Args::default() };
        h.calls.push(call(1, OpKind::PutMeta, args, Some(1), 2));
        let mut del = call(2, OpKind::Delete, Args::default(), None, 2);
        del.outcome = Outcome::Unknown;
        del.returned_ns = None;
        del.seen_at = None;
        h.calls.push(del);
        h.applied_count = 2;
        fin.meta.insert("r".into(), meta);
        // A delete that is one transaction rolled back: everything is still there.
        fin.entries.insert("r".into(), vec![stored]);
        assert!(judge_over(&h, &fin, None, "journal_equals_serial_history").is_empty());
        assert!(judge_over(&h, &fin, None, "meta_is_last_accepted").is_empty());
        // Its entries statement survived the crash: the journal lost an applied append.
        fin.entries.clear();
        assert_eq!(judge_over(&h, &fin, None, "journal_equals_serial_history").len(), 1);
        // And its meta statement too.
        fin.meta.clear();
        assert_eq!(judge_over(&h, &fin, None, "meta_is_last_accepted").len(), 1);
    }
}
