//! The meta family: a run's meta record as the engine keeps it. Its `segments` counter
//! never goes back and every boot bumps it, a terminal meta never runs ahead of its
//! journal, the recorded fields a resume copies stay as the run recorded them, a segment
//! writes one record (its boot and its settle differ only in status and time), a resumed
//! segment records no labels, a resume boots the segment after the one it read, and a resume
//! passed another workflow than the one the meta names writes nothing.
//!
//! Each property is judged from the apply-ordered history and the engine facts, under the
//! holder and generation rules of [`super`].

use std::collections::BTreeMap;

use super::super::contract::{audit, EntryView, MetaView, Verdict};
use super::super::model::{t, who, Judged};
use super::super::{Expectation, Property, Witness};
use super::*;
use crate::history::{Call, FactKind, OpKind, Read};

pub const A_META_WRITE_CARRIES_ITS_WRITERS_NOW: Property = Property {
        name: "a_meta_write_carries_its_writers_now",
        expectation: Expectation::Always,
        claim: "Every leased meta write of an engine run stamps `updatedAt` with its writer's clock at the write (docs/engine-model.md 1.3: the record is written with `updatedAt: now`; 7.2: a repair writes `{...meta, status, updatedAt: now}`): no earlier than the clock reading of the acquire that granted the writer's lease, no later than the reading of the write's own fence check, both by the writer's own clock.",
        not_checked: "Unleased meta writes (a host's own single-writer records); writes whose `updatedAt` is absent or not an ISO-8601 UTC instant with milliseconds (`YYYY-MM-DDTHH:MM:SS.mmmZ`); writes whose grant or check the history holds no clock reading for.",
        check: a_meta_write_carries_its_writers_now,
};

/// Milliseconds since the epoch of an ISO-8601 UTC instant `YYYY-MM-DDTHH:MM:SS.mmmZ` (the
/// proleptic Gregorian calendar); `None` for any other shape.
pub(super) fn iso_ms(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 24 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    if b[19] != b'.' || b[23] != b'Z' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        s.get(r).filter(|d| d.bytes().all(|c| c.is_ascii_digit())).and_then(|d| d.parse().ok())
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec, ms) = (num(11..13)?, num(14..16)?, num(17..19)?, num(20..23)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 59 {
        return None;
    }
    // Days since 1970-01-01: count from March so the leap day ends the year.
    let (y, m) = if mo <= 2 { (y - 1, mo + 9) } else { (y, mo - 3) };
    let era_days = y * 365 + y / 4 - y / 100 + y / 400;
    let days = era_days + (153 * m + 2) / 5 + d - 1 - 719_468;
    Some(((days * 24 + h) * 60 + mi) * 60_000 + sec * 1000 + ms)
}

fn a_meta_write_carries_its_writers_now(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    let ix = j.index();
    for &c in j.applied.iter().filter(|c| c.op == OpKind::PutMeta && runs.contains(c.run_id.as_str())) {
        let Some(lease) = c.lease.as_ref().filter(|l| l.run_id == c.run_id) else { continue };
        // The acquire that granted the writer's lease: the last one of its epoch applied
        // before the write, by the writer's own process.
        let Some(grant) = ix
            .recorded_before(&c.run_id, order(c))
            .iter()
            .rev()
            .copied()
            .find(|a| a.op == OpKind::Acquire && Judged::granted_epoch(a) == Some(lease.epoch.0))
        else {
            continue;
        };
        if grant.node != c.node || grant.incarnation != c.incarnation {
            continue;
        }
        let Some(stamp) =
            meta_of(c).and_then(|m| m.raw.get("updatedAt").and_then(|v| v.as_str()).map(str::to_string))
        else {
            continue;
        };
        let Some(at) = iso_ms(&stamp) else { continue };
        let (Some(granted), Some(checked)) = (Judged::checked_ms(grant), Judged::checked_ms(c)) else {
            continue;
        };
        let why = if at < granted {
            format!("{}ms before the acquire that granted its lease read the clock", granted - at)
        } else if at > checked {
            format!("{}ms after the write's own fence check read the clock", at - checked)
        } else {
            continue;
        };
        out.push(Witness {
            witness: format!(
                "{}'s meta write of run {} at t={} stamped updatedAt {stamp}, {why}: a meta write carries its writer's now",
                who(c),
                c.run_id,
                t(Judged::applied_ns(c))
            ),
            op: Some(c.op.as_str()),
            call: Some(c.id),
        });
    }
}

pub const SEGMENTS_NEVER_REGRESS: Property = Property {
        name: "segments_never_regress",
        expectation: Expectation::Always,
        claim: "Within one generation of a run, the segments counter of successive applied meta writes never decreases.",
        not_checked: "Whether the counter was bumped at all (a crash before the boot meta write leaves it).",
        check: segments_never_regress,
};

fn segments_never_regress(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    let mut last: BTreeMap<&str, (u64, &Call)> = BTreeMap::new();
    for &c in j.applied.iter().filter(|c| runs.contains(c.run_id.as_str())) {
        match c.op {
            OpKind::Delete => {
                last.remove(c.run_id.as_str());
            }
            OpKind::PutMeta => {
                let Some(m) = meta_of(c) else { continue };
                let Some(seg) = m.segments else { continue };
                if let Some(&(prev, pc)) = last.get(c.run_id.as_str()) {
                    if seg < prev {
                        out.push(Witness {
                            witness: format!(
                                "run {}: {}'s meta write ({}) at t={} set segments={seg} after {}'s write at t={} had set segments={prev}",
                                c.run_id,
                                who(c),
                                m.status,
                                t(Judged::applied_ns(c)),
                                who(pc),
                                t(Judged::applied_ns(pc))
                            ),
                            op: Some(c.op.as_str()),
                            call: Some(c.id),
                        });
                    }
                }
                if last.get(c.run_id.as_str()).is_none_or(|&(prev, _)| seg >= prev) {
                    last.insert(c.run_id.as_str(), (seg, c));
                }
            }
            _ => {}
        }
    }
}

pub const EVERY_BOOT_BUMPS_SEGMENTS: Property = Property {
        name: "every_boot_bumps_segments",
        expectation: Expectation::Always,
        claim: "The first meta write of a run under a new lease (a segment's boot write) sets segments above every earlier write's, so no two segments share a counter base.",
        not_checked: "Meta writes that carry no lease (engines before the lease was threaded into meta).",
        check: every_boot_bumps_segments,
};

fn every_boot_bumps_segments(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    // Per run: the highest segments written so far, and the epoch of the last leased write.
    let mut seen: BTreeMap<&str, (u64, Option<u64>)> = BTreeMap::new();
    for &c in j.applied.iter().filter(|c| runs.contains(c.run_id.as_str())) {
        match c.op {
            OpKind::Delete => {
                seen.remove(c.run_id.as_str());
            }
            OpKind::PutMeta => {
                let Some(m) = meta_of(c) else { continue };
                let Some(seg) = m.segments else { continue };
                let Some(epoch) = c.lease.as_ref().map(|l| l.epoch.0) else { continue };
                if super::super::repair::is_repair(j, c) {
                    continue; // an audit repair rewrites the status, not a segment's boot
                }
                let entry = seen.entry(c.run_id.as_str()).or_insert((0, None));
                if entry.1.is_some_and(|e| e != epoch) && seg <= entry.0 {
                    out.push(Witness {
                        witness: format!(
                            "run {}: {}'s first meta write under epoch {epoch} ({}) at t={} set segments={seg}, not above the {} already written",
                            c.run_id,
                            who(c),
                            m.status,
                            t(Judged::applied_ns(c)),
                            entry.0
                        ),
                        op: Some(c.op.as_str()),
                        call: Some(c.id),
                    });
                }
                *entry = (entry.0.max(seg), Some(epoch));
            }
            _ => {}
        }
    }
}

pub const JOURNAL_NEVER_BEHIND_META: Property = Property {
        name: "journal_never_behind_meta",
        expectation: Expectation::Always,
        claim: "Every applied terminal meta write leaves the run consistent with its journal by the reconciler's table (the settle precedes the meta, and no terminal meta lands over live journal work).",
        not_checked: "Non-terminal meta writes (a meta-behind residue after a crash is legal and repairable).",
        check: journal_never_behind_meta,
};

fn journal_never_behind_meta(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    let mut journal: BTreeMap<&str, Vec<EntryView>> = BTreeMap::new();
    for &c in j.applied.iter().filter(|c| runs.contains(c.run_id.as_str())) {
        match c.op {
            OpKind::Delete => {
                journal.remove(c.run_id.as_str());
            }
            OpKind::Append => {
                if let Some(e) = entry_of(c) {
                    journal.entry(c.run_id.as_str()).or_default().push(e);
                }
            }
            OpKind::PutMeta => {
                let Some(m) = meta_of(c) else { continue };
                if !m.status.is_terminal() {
                    continue;
                }
                let entries = journal.get(c.run_id.as_str()).map_or(&[][..], |v| v.as_slice());
                let audit = audit(Some(m.status), entries);
                if audit.verdict != Verdict::Consistent {
                    out.push(Witness {
                        witness: format!(
                            "run {}: {}'s meta write ({}) at t={} left the run {:?} by the reconciler: {}",
                            c.run_id,
                            who(c),
                            m.status,
                            t(Judged::applied_ns(c)),
                            audit.verdict,
                            audit.reason
                        ),
                        op: Some(c.op.as_str()),
                        call: Some(c.id),
                    });
                }
            }
            _ => {}
        }
    }
}

/// The fields rulvar's resume carries verbatim from the recorded meta
/// (docs/engine-model.md 1.2 step 9; `genesis` also in 1.3): named here from the contract,
/// not from the engine model.
const RECORDED_FIELDS: [&str; 11] = [
    "genesis",
    "argsProvided",
    "argsHash",
    "budgetUsd",
    "maxInFlightExposureUsd",
    "strictPricing",
    "budgetPolicy",
    "scope",
    "scopeNormalize",
    "configFingerprint",
    "execKeyDerivation",
];

pub const A_RESUME_KEEPS_THE_RUNS_WORKFLOW: Property = Property {
        name: "a_resume_keeps_the_runs_workflow",
        expectation: Expectation::Always,
        claim: "An explicit resume passed a workflow other than the one the run's meta names (as the resume's own first meta read returned it) is refused before any write: it makes no mutation of the run, and its caller is told a failure, not a settle (docs/engine-model.md 1.2: the binding checks run before any lease is acquired).",
        not_checked: "Resumes whose first meta read found no meta or no workflow name (a deleted run is brought back under the workflow passed in); resumes a crash ended; what the refusal says.",
        check: a_resume_keeps_the_runs_workflow,
};

fn a_resume_keeps_the_runs_workflow(j: &Judged, out: &mut Vec<Witness>) {
    for Resume { fact: f, run_id, workflow, end, mine } in resumes(j) {
        // Only a resume that returned (a settle or a failure) is judged.
        let Some(end) = end else { continue };
        let Some(read) = mine.iter().find(|c| c.op == OpKind::GetMeta) else { continue };
        let Some(Read::Meta(Some(m))) = &read.read else { continue };
        let Some(named) = m.workflow_name.as_ref().filter(|n| *n != workflow) else { continue };
        let wrote: Vec<&Call> =
            mine.iter().copied().filter(|c| c.op.is_mutation() && c.applied.is_some()).collect();
        if let Some(first) = wrote.first() {
            out.push(Witness {
                witness: format!(
                    "run {run_id}: {}'s resume under workflow {workflow:?} read a meta naming {named:?} at t={}, and went on to write: {} ({} mutation(s), the first at t={})",
                    f.owner,
                    t(read.returned_ns.unwrap_or(read.invoked_ns)),
                    first.op.as_str(),
                    wrote.len(),
                    t(Judged::applied_ns(first)),
                ),
                op: Some(first.op.as_str()),
                call: Some(first.id),
            });
        } else if matches!(end.kind, FactKind::Settled { .. }) {
            out.push(Witness {
                witness: format!(
                    "run {run_id}: {}'s resume under workflow {workflow:?} read a meta naming {named:?} at t={}, and returned a settle at t={} instead of a refusal",
                    f.owner,
                    t(read.returned_ns.unwrap_or(read.invoked_ns)),
                    t(end.at_ns),
                ),
                op: Some(read.op.as_str()),
                call: Some(read.id),
            });
        }
    }
}

pub const A_RESUME_BOOTS_THE_NEXT_SEGMENT: Property = Property {
    name: "a_resume_boots_the_next_segment",
    expectation: Expectation::Always,
    claim: "A host's explicit resume boots the segment after the one its meta read recorded: its boot meta write records segments = the counter of the last meta it read before it (1 when that meta had none, or when there was no meta: a resume that recreates a deleted run) + 1 (docs/engine-model.md 1.2 and 1.3: segmentsBefore = meta.segments, or 1 when missing or not positive).",
    not_checked: "Resumes that read no meta before their boot write (refused or crashed first); the worker's drives (`every_boot_bumps_segments` judges every boot against the writes before it).",
    check: a_resume_boots_the_next_segment,
};

fn a_resume_boots_the_next_segment(j: &Judged, out: &mut Vec<Witness>) {
    for Resume { fact: f, run_id, mine, .. } in resumes(j) {
        let Some(boot) = mine.iter().find(|c| c.op == OpKind::PutMeta) else { continue };
        let Some(Read::Meta(read)) =
            mine.iter().rfind(|c| c.op == OpKind::GetMeta && c.id < boot.id).and_then(|c| c.read.as_ref())
        else {
            continue;
        };
        let before = read.as_ref().and_then(|m| m.segments).filter(|s| *s > 0).unwrap_or(1);
        let Some(wrote) = meta_of(boot).and_then(|m| m.segments) else { continue };
        if wrote != before + 1 {
            out.push(
                Witness::new(format!(
                    "run {run_id}: {}'s resume read {} and its boot meta write at t={} records segments {wrote}, where the next segment is {}",
                    f.owner,
                    match read {
                        Some(m) => format!("a meta with segments {:?}", m.segments),
                        None => "no meta".to_string(),
                    },
                    t(boot.invoked_ns),
                    before + 1
                ))
                .on(boot.op, boot.id),
            );
        }
    }
}

pub const A_RESUME_OF_A_MISSING_RUN_BOOTS: Property = Property {
    name: "a_resume_of_a_missing_run_boots",
    expectation: Expectation::Always,
    claim: "A host's explicit resume that found no meta for its run (every meta read it made, before its acquire and under the lease it was granted, returned none) writes the run's meta under that lease before giving it back: with no meta there is nothing to refuse for (no workflow to mismatch, no generation a deletion record could name, nothing that vanished since the prepare), so a resume recreates the run (docs/engine-model.md 1.2; a crash before the first meta write, or a deleted run retried by id).",
    not_checked: "Resumes refused at the acquire, or one of whose calls failed or never returned (a crash); resumes during which another identity wrote the run between their first read and their release (a run created meanwhile is booted from as it is); resumes that read a meta.",
    check: a_resume_of_a_missing_run_boots,
};

fn a_resume_of_a_missing_run_boots(j: &Judged, out: &mut Vec<Witness>) {
    for Resume { fact: f, run_id, mine, .. } in resumes(j) {
        let Some(acquire) = mine.iter().find(|c| c.op == OpKind::Acquire) else { continue };
        let Some(lease) = acquire.granted.as_ref().filter(|_| acquire.outcome.is_ok()) else { continue };
        let Some(release) = mine.iter().find(|c| c.op == OpKind::Release && c.lease.as_ref() == Some(lease))
        else {
            continue;
        };
        let window: Vec<&Call> = mine.iter().copied().filter(|c| c.id <= release.id).collect();
        if window.iter().any(|c| !c.outcome.is_ok() || c.returned_ns.is_none()) {
            continue;
        }
        let reads: Vec<&Call> = window.iter().copied().filter(|c| c.op == OpKind::GetMeta).collect();
        let none = |c: &&Call| matches!(c.read, Some(Read::Meta(None)));
        if !reads.iter().any(|c| c.id > acquire.id) || !reads.iter().all(none) {
            continue;
        }
        if window.iter().any(|c| c.op == OpKind::PutMeta) {
            continue;
        }
        // Another identity's mutation of the run between the first read and the release.
        let from = reads[0].seen_at.unwrap_or(0);
        let until = order(release);
        let disturbed = j.applied.iter().any(|d| {
            d.run_id == *run_id && (from..until).contains(&order(d)) && !window.iter().any(|w| w.id == d.id)
        });
        if disturbed {
            continue;
        }
        out.push(
            Witness::new(format!(
                "run {run_id}: {}'s resume found no meta (read {} time(s), the last under epoch {} at t={}) and gave its lease back at t={} without booting the run",
                f.owner,
                reads.len(),
                lease.epoch.0,
                t(reads[reads.len() - 1].invoked_ns),
                t(release.invoked_ns),
            ))
            .on(release.op, release.id),
        );
    }
}

pub const RECORDED_FIELDS_CARRIED: Property = Property {
        name: "recorded_fields_carried",
        expectation: Expectation::Always,
        claim: "Within one generation of a run, every applied meta write carries the recorded fields (genesis, argsHash, budgetUsd and the rest a resume copies verbatim) exactly as the generation's first applied meta write has them: present with the same value, or absent.",
        not_checked: "Whether the first write recorded what the run was started with (only that nothing later drops or changes it); name and tags, which a resume drops by the contract.",
        check: recorded_fields_carried,
};

fn recorded_fields_carried(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    // Per run: the generation's first applied meta write, and its recorded fields.
    let mut first: BTreeMap<&str, (&Call, Vec<Option<serde_json::Value>>)> = BTreeMap::new();
    let recorded = |m: &MetaView| -> Vec<Option<serde_json::Value>> {
        RECORDED_FIELDS.iter().map(|f| m.raw.get(*f).cloned()).collect()
    };
    for &c in j.applied.iter().filter(|c| runs.contains(c.run_id.as_str())) {
        match c.op {
            OpKind::Delete => {
                first.remove(c.run_id.as_str());
            }
            OpKind::PutMeta => {
                let Some(m) = meta_of(c) else { continue };
                let fields = recorded(&m);
                let Some((fc, want)) = first.get(c.run_id.as_str()) else {
                    first.insert(c.run_id.as_str(), (c, fields));
                    continue;
                };
                let show = |v: &Option<serde_json::Value>| {
                    v.as_ref().map_or("absent".to_string(), |v| v.to_string())
                };
                if let Some(i) = (0..RECORDED_FIELDS.len()).find(|&i| fields[i] != want[i]) {
                    out.push(Witness {
                        witness: format!(
                            "run {}: {}'s meta write ({}) at t={} has {} {}, but the generation's first meta write, {}'s at t={}, recorded {}",
                            c.run_id,
                            who(c),
                            m.status,
                            t(Judged::applied_ns(c)),
                            RECORDED_FIELDS[i],
                            show(&fields[i]),
                            who(fc),
                            t(Judged::applied_ns(fc)),
                            show(&want[i])
                        ),
                        op: Some(c.op.as_str()),
                        call: Some(c.id),
                    });
                }
            }
            _ => {}
        }
    }
}

pub const A_SEGMENT_WRITES_ONE_RECORD: Property = Property {
        name: "a_segment_writes_one_record",
        expectation: Expectation::Always,
        claim: "Every meta write one segment makes (one process, under one lease of the run) carries the same record apart from `status` and `updatedAt`: its boot and its settle agree on name, tags, segments, genesis, workflow and every recorded field (docs/engine-model.md 1.3: the record is written whole every time, from the segment's own options).",
        not_checked: "Meta writes made without a lease (each may be its own segment); what the record says (the other meta properties judge the counter and the recorded fields across segments).",
        check: a_segment_writes_one_record,
};

/// The fields a segment's meta writes may differ in.
const PER_WRITE_FIELDS: [&str; 2] = ["status", "updatedAt"];

fn a_segment_writes_one_record(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    // Per (process, run, epoch): the segment's first meta write and its record.
    type Record = serde_json::Map<String, serde_json::Value>;
    let mut first: BTreeMap<(u32, u32, &str, u64), (&Call, Record)> = BTreeMap::new();
    for c in &j.history.calls {
        if c.op != OpKind::PutMeta || !runs.contains(c.run_id.as_str()) {
            continue;
        }
        let (Some(lease), Some(m)) = (c.lease.as_ref(), meta_of(c)) else { continue };
        let Some(mut record) = m.raw.as_object().cloned() else { continue };
        for f in PER_WRITE_FIELDS {
            record.remove(f);
        }
        let key = (c.node, c.incarnation, c.run_id.as_str(), lease.epoch.0);
        let Some((fc, want)) = first.get(&key) else {
            first.insert(key, (c, record));
            continue;
        };
        let fields: std::collections::BTreeSet<&String> = want.keys().chain(record.keys()).collect();
        let differs: Vec<String> = fields
            .into_iter()
            .filter(|f| want.get(*f) != record.get(*f))
            .map(|f| {
                let show = |v: Option<&serde_json::Value>| v.map_or("absent".to_string(), |v| v.to_string());
                format!("{f} {} (before: {})", show(record.get(f)), show(want.get(f)))
            })
            .collect();
        if !differs.is_empty() {
            out.push(Witness {
                witness: format!(
                    "run {}: {}'s meta write ({}) at t={} under epoch {} has {}, unlike the same segment's first meta write at t={}",
                    c.run_id,
                    who(c),
                    m.status,
                    t(c.invoked_ns),
                    lease.epoch.0,
                    differs.join(", "),
                    t(fc.invoked_ns),
                ),
                op: Some(c.op.as_str()),
                call: Some(c.id),
            });
        }
    }
}

pub const A_RUN_CARRIES_ITS_LABELS: Property = Property {
        name: "a_run_carries_its_labels",
        expectation: Expectation::Always,
        claim: "A run its host starts with a name and tags (`engine.run(wf, {name, tags})`, a `Labelled` fact) is booted with exactly those: the first meta write the host's segment makes for it records that name and those tags (docs/engine-model.md 1.3). Later writes must carry them on (`recorded_fields_carried`, `a_segment_writes_one_record`).",
        not_checked: "Starts that never reached their boot meta write (refused, crashed before it); runs started without labels.",
        check: a_run_carries_its_labels,
};

fn a_run_carries_its_labels(j: &Judged, out: &mut Vec<Witness>) {
    let calls = &j.history.calls;
    for f in &j.history.facts {
        let FactKind::Labelled { run_id, name, tags } = &f.kind else { continue };
        let host = f.owner.as_str();
        let boot = calls[f.invoked_before.min(calls.len())..].iter().find(|c| {
            c.op == OpKind::PutMeta
                && c.run_id == *run_id
                && (c.node, c.incarnation) == (f.node, f.incarnation)
                && (c.lease.as_ref().is_some_and(|l| l.owner == host)
                    || c.args.actor.as_deref() == Some(host))
        });
        let Some(boot) = boot else { continue };
        // A later start of the same run by the same host is its own attempt.
        let restarted = j.history.facts.iter().any(|g| {
            (g.node, g.incarnation, g.owner.as_str()) == (f.node, f.incarnation, host)
                && g.invoked_before > f.invoked_before
                && g.invoked_before <= boot.id
                && matches!(&g.kind, FactKind::Labelled { run_id: r, .. } if r == run_id)
        });
        let Some(m) = meta_of(boot) else { continue };
        if restarted || (m.name.as_ref() == name.as_ref() && m.tags.as_ref() == tags.as_ref()) {
            continue;
        }
        let show = |n: Option<&String>, tags: Option<&Vec<String>>| {
            format!(
                "name {} and tags {}",
                n.map_or("absent".to_string(), |n| format!("{n:?}")),
                tags.map_or("absent".to_string(), |tags| format!("{tags:?}"))
            )
        };
        out.push(Witness {
            witness: format!(
                "run {run_id}: {host} started it with {}, but its boot meta write at t={} records {}",
                show(name.as_ref(), tags.as_ref()),
                t(boot.invoked_ns),
                show(m.name.as_ref(), m.tags.as_ref())
            ),
            op: Some(boot.op.as_str()),
            call: Some(boot.id),
        });
    }
}

pub const A_RESUMED_SEGMENT_RECORDS_NO_LABELS: Property = Property {
    name: "a_resumed_segment_records_no_labels",
    expectation: Expectation::Always,
    claim: "A resumed segment's meta records neither a name nor tags: a resume passes no run options and the boot record is written whole from the segment's own options, so the labels a run was started with end at its first resume (docs/engine-model.md 1.3). Every applied meta write of an engine run whose segments counter is 2 or more, a resume's record, carries no `name` and no `tags`.",
    not_checked: "Meta writes with no segments counter; whether a resume wrote anything at all.",
    check: a_resumed_segment_records_no_labels,
};

fn a_resumed_segment_records_no_labels(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    for &c in j.applied.iter().filter(|c| c.op == OpKind::PutMeta && runs.contains(c.run_id.as_str())) {
        let Some(m) = meta_of(c) else { continue };
        if m.segments.is_none_or(|s| s < 2) || (m.name.is_none() && m.tags.is_none()) {
            continue;
        }
        out.push(
            Witness::new(format!(
                "run {}: {}'s meta write at t={} records segment {} with name {} and tags {}: a resume passes no run options, so a resumed segment's record carries no labels",
                c.run_id,
                who(c),
                t(Judged::applied_ns(c)),
                m.segments.unwrap_or_default(),
                m.name.as_ref().map_or("absent".to_string(), |n| format!("{n:?}")),
                m.tags.as_ref().map_or("absent".to_string(), |tags| format!("{tags:?}"))
            ))
            .on(c.op, c.id),
        );
    }
}

#[cfg(test)]
mod tests {

    use store::RunStatus;

    use crate::history::{Args, FactKind, OpKind};
    use crate::oracle::testkit::engine::*;

    #[test]
    fn iso_instants_read_back_as_milliseconds() {
        use super::iso_ms;
        assert_eq!(iso_ms("1970-01-01T00:00:00.000Z"), Some(0));
        assert_eq!(iso_ms("2023-11-14T22:13:20.123Z"), Some(1_700_000_000_123));
        assert_eq!(iso_ms("2000-02-29T00:00:00.000Z"), Some(951_782_400_000));
        assert_eq!(iso_ms("2000-03-01T00:00:00.000Z"), Some(951_868_800_000));
        for bad in ["2023-11-14T22:13:20Z", "2023-13-14T22:13:20.123Z", "2023-11-14 22:13:20.123Z", "x", ""] {
            assert_eq!(iso_ms(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_meta_write_stamped_outside_its_writers_tenure_is_caught() {
        let p = "a_meta_write_carries_its_writers_now";
        // The acquire reads the clock at 1 ms, the meta write's check at 2 ms.
        let run = |stamp: &str| {
            let mut h = HistoryBuilder::engine_run();
            let a = h.acquire(0, "a", "r", 1);
            h.meta_with(0, Some(&a), "r", RunStatus::Running, 1, serde_json::json!({"updatedAt": stamp}));
            h.judge(p)
        };
        assert!(run("1970-01-01T00:00:00.001Z").is_empty());
        assert!(run("1970-01-01T00:00:00.002Z").is_empty());
        let v = run("1970-01-01T00:00:00.000Z");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("1ms before the acquire"), "{}", v[0].witness);
        let v = run("1970-01-01T00:00:00.003Z");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("after the write's own fence check"), "{}", v[0].witness);
        // Not an instant the oracle reads: not judged.
        assert!(run("yesterday").is_empty());
    }

    /// Run `r` (workflow `happy`) settled ok, then a host's resume of it under `passed`: its
    /// meta read returns `seen` (`Some(name)`: a meta naming that workflow; `None`: no meta),
    /// then (`writes`) it acquires and writes the meta, then it returns `settled` or failed.
    fn resumed(passed: &str, seen: Option<&str>, writes: bool, settled: bool) -> HistoryBuilder {
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "host", "r", 1);
        h.meta(0, Some(&a), "r", RunStatus::Ok, 1);
        h.fact(0, "host", FactKind::Resumed { run_id: "r".into(), workflow: passed.into() });
        h.push(0, OpKind::GetMeta, "r", None, Args::default(), None);
        h.h.applied_count -= 1;
        let meta = seen.map(|w| {
            let mut m = crate::oracle::testkit::meta_record("r", RunStatus::Ok);
            m.workflow_name = Some(w.into());
            m
        });
        let read = h.h.calls.last_mut().expect("pushed");
        (read.applied, read.read) = (None, Some(crate::history::Read::Meta(meta)));
        if writes {
            let b = h.acquire(0, "host", "r", 2);
            h.meta(0, Some(&b), "r", RunStatus::Running, 2);
        }
        for c in h.h.calls.iter_mut().skip(2) {
            c.args.actor = Some("host".into());
        }
        let end = if settled {
            FactKind::Settled { run_id: "r".into(), status: "ok".into(), value: None, segment: 2 }
        } else {
            FactKind::Failed { run_id: "r".into(), what: "retry".into(), error: "config".into() }
        };
        h.fact(0, "host", end);
        h
    }

    #[test]
    fn a_resume_under_another_workflow_that_writes_or_settles_is_caught() {
        let p = "a_resume_keeps_the_runs_workflow";
        // Refused before any write: the contract.
        assert!(resumed("limit", Some("happy"), false, false).judge(p).is_empty());
        // It acquired and booted the run under the other workflow.
        let v = resumed("limit", Some("happy"), true, false).judge(p);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("read a meta naming \"happy\""), "{}", v[0].witness);
        assert!(v[0].witness.contains("2 mutation(s)"), "{}", v[0].witness);
        // Wrote nothing, yet told its caller the run settled.
        let v = resumed("limit", Some("happy"), false, true).judge(p);
        assert!(v.len() == 1 && v[0].witness.contains("instead of a refusal"), "{v:?}");
        // The run's own workflow, and a run whose meta is gone: free to write and settle.
        assert!(resumed("happy", Some("happy"), true, true).judge(p).is_empty());
        assert!(resumed("limit", None, true, true).judge(p).is_empty());
        // A resume a crash ended (no return) is not judged.
        let mut h = resumed("limit", Some("happy"), true, false);
        h.h.facts.pop();
        assert!(h.judge(p).is_empty());
    }

    #[test]
    fn a_segment_whose_settle_drops_its_labels_is_caught() {
        let p = "a_segment_writes_one_record";
        let labels = serde_json::json!({"name": "happy-kept", "tags": ["queue"], "genesis": "g1"});
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.meta_with(0, Some(&a), "r", RunStatus::Running, 1, labels.clone());
        h.meta_with(0, Some(&a), "r", RunStatus::Suspended, 1, labels.clone());
        // The next segment, a resume, drops name and tags (the contract lets it) in all its
        // writes; a write without a lease is its own.
        let b = h.acquire(1, "b", "r", 2);
        h.meta_with(1, Some(&b), "r", RunStatus::Running, 2, serde_json::json!({"genesis": "g1"}));
        h.meta_with(1, Some(&b), "r", RunStatus::Ok, 2, serde_json::json!({"genesis": "g1"}));
        h.meta(1, None, "r", RunStatus::Ok, 2);
        assert!(h.judge(p).is_empty(), "{:?}", h.judge(p));
        // A segment whose settle drops the labels its boot wrote.
        let c = h.acquire(2, "c", "r", 3);
        h.meta_with(2, Some(&c), "r", RunStatus::Running, 3, labels);
        h.meta_with(2, Some(&c), "r", RunStatus::Ok, 3, serde_json::json!({"genesis": "g1"}));
        let v = h.judge(p);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("name absent (before: \"happy-kept\")"), "{}", v[0].witness);
        assert!(v[0].witness.contains("tags absent"), "{}", v[0].witness);
        // The same epoch on another process is another writer (a zombie's lease object).
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.meta_with(0, Some(&a), "r", RunStatus::Running, 1, serde_json::json!({"name": "x"}));
        h.meta_with(1, Some(&a), "r", RunStatus::Ok, 1, serde_json::json!({"name": "y"}));
        assert!(h.judge(p).is_empty());
        // A segment that bumps its counter between boot and settle is caught too.
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.meta(0, Some(&a), "r", RunStatus::Running, 1);
        h.meta(0, Some(&a), "r", RunStatus::Ok, 2);
        let v = h.judge(p);
        assert!(v.len() == 1 && v[0].witness.contains("segments 2 (before: 1)"), "{v:?}");
    }

    #[test]
    fn segments_regression_is_caught_and_a_bump_is_not() {
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.meta(0, Some(&a), "r", RunStatus::Running, 1);
        let b = h.acquire(1, "b", "r", 2);
        h.meta(1, Some(&b), "r", RunStatus::Running, 2);
        assert!(h.judge("segments_never_regress").is_empty());
        h.meta(0, None, "r", RunStatus::Error, 1);
        let v = h.judge("segments_never_regress");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("segments=1"), "{}", v[0].witness);
    }

    #[test]
    fn a_resume_that_drops_a_recorded_field_is_caught() {
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        let rec = serde_json::json!({"genesis": "g1", "budgetUsd": 3, "name": "label"});
        h.meta_with(0, Some(&a), "r", RunStatus::Running, 1, rec.clone());
        let b = h.acquire(1, "b", "r", 2);
        // A resume drops `name` (the contract lets it) and keeps the recorded fields.
        h.meta_with(
            1,
            Some(&b),
            "r",
            RunStatus::Running,
            2,
            serde_json::json!({"genesis": "g1", "budgetUsd": 3}),
        );
        assert!(h.judge("recorded_fields_carried").is_empty());
        h.meta_with(1, Some(&b), "r", RunStatus::Ok, 2, serde_json::json!({"genesis": "g1"}));
        let v = h.judge("recorded_fields_carried");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("budgetUsd absent"), "{}", v[0].witness);
        assert!(v[0].witness.contains("recorded 3"), "{}", v[0].witness);
    }

    #[test]
    fn a_new_generation_records_afresh() {
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.meta_with(
            0,
            Some(&a),
            "r",
            RunStatus::Running,
            1,
            serde_json::json!({"genesis": "g1", "budgetUsd": 3}),
        );
        h.delete(0, Some(&a), "r");
        let b = h.acquire(1, "b", "r", 2);
        h.meta_with(
            1,
            Some(&b),
            "r",
            RunStatus::Running,
            1,
            serde_json::json!({"genesis": "g2", "budgetUsd": 4}),
        );
        assert!(h.judge("recorded_fields_carried").is_empty());
        h.meta_with(1, Some(&b), "r", RunStatus::Ok, 1, serde_json::json!({"genesis": "g1", "budgetUsd": 4}));
        let v = h.judge("recorded_fields_carried");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("genesis \"g1\""), "{}", v[0].witness);
    }

    #[test]
    fn runs_no_engine_actor_started_are_not_judged() {
        let mut h = HistoryBuilder::default();
        let a = h.acquire(0, "a", "r", 1);
        h.meta(0, Some(&a), "r", RunStatus::Running, 2);
        h.meta(0, None, "r", RunStatus::Error, 1);
        assert!(h.judge("segments_never_regress").is_empty(), "a store-level actor's run");
        h.fact(0, "host", FactKind::Submitted { run_id: "r".into(), workflow: "happy".into() });
        assert_eq!(h.judge("segments_never_regress").len(), 1);
    }

    #[test]
    fn a_boot_that_does_not_bump_segments_is_caught() {
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.meta(0, Some(&a), "r", RunStatus::Running, 1);
        h.meta(0, Some(&a), "r", RunStatus::Ok, 1);
        let b = h.acquire(1, "b", "r", 2);
        h.meta(1, Some(&b), "r", RunStatus::Running, 2);
        h.meta(1, Some(&b), "r", RunStatus::Ok, 2);
        assert!(h.judge("every_boot_bumps_segments").is_empty());
        let c = h.acquire(2, "c", "r", 3);
        h.meta(2, Some(&c), "r", RunStatus::Running, 2);
        assert_eq!(h.judge("every_boot_bumps_segments").len(), 1);
        assert!(h.judge("segments_never_regress").is_empty(), "equal is no regression");
    }

    /// A host labels run `r` (name "n", tags ["a", "b"]) and boots it with the record `more`.
    fn labelled_boot(more: serde_json::Value) -> Vec<crate::oracle::Violation> {
        let mut h = HistoryBuilder::engine_run();
        let labels = FactKind::Labelled {
            run_id: "r".into(),
            name: Some("n".into()),
            tags: Some(vec!["a".into(), "b".into()]),
        };
        h.fact(0, "host", labels);
        let a = h.acquire(0, "host", "r", 1);
        h.meta_with(0, Some(&a), "r", RunStatus::Running, 1, more);
        h.judge("a_run_carries_its_labels")
    }

    #[test]
    fn a_boot_that_drops_or_changes_its_labels_is_caught() {
        use serde_json::json;
        assert!(labelled_boot(json!({"name": "n", "tags": ["a", "b"]})).is_empty());
        let v = labelled_boot(json!({"name": "n"}));
        assert!(v.len() == 1 && v[0].witness.contains("records name \"n\" and tags absent"), "{v:?}");
        assert_eq!(labelled_boot(json!({"name": "m", "tags": ["a", "b"]})).len(), 1);
        assert_eq!(labelled_boot(json!({"name": "n", "tags": ["b", "a"]})).len(), 1);
    }

    #[test]
    fn a_resume_that_boots_any_but_the_next_segment_is_caught() {
        use crate::history::Read;
        use crate::oracle::testkit::meta_record;
        // A host's resume of run `r` that read `read` (segments `had` when a meta) and booted
        // segment `boots`.
        let resume = |read: Option<Option<u64>>, boots: u64| {
            let mut h = HistoryBuilder::engine_run();
            h.fact(0, "host", FactKind::Resumed { run_id: "r".into(), workflow: "happy".into() });
            let first = h.h.calls.len();
            h.read_meta(0, "host", "r");
            h.h.calls.last_mut().expect("a read").read = Some(Read::Meta(read.map(|had| {
                let mut m = meta_record("r", RunStatus::Ok);
                m.segments = had;
                m
            })));
            let l = h.acquire(0, "host", "r", 2);
            h.meta(0, Some(&l), "r", RunStatus::Running, boots);
            for c in h.h.calls.iter_mut().skip(first) {
                c.args.actor = Some("host".into());
            }
            h.judge("a_resume_boots_the_next_segment")
        };
        assert!(resume(Some(Some(3)), 4).is_empty());
        assert!(resume(None, 2).is_empty(), "a recreated run boots segment 2");
        assert!(resume(Some(None), 2).is_empty(), "a meta with no counter counts as 1");
        let v = resume(None, 1);
        assert!(v.len() == 1 && v[0].witness.contains("read no meta"), "{v:?}");
        assert_eq!(resume(Some(Some(3)), 3).len(), 1);
        assert_eq!(resume(Some(Some(3)), 5).len(), 1);
    }

    #[test]
    fn a_resume_that_finds_no_meta_and_does_not_boot_is_caught() {
        use crate::history::Read;
        // A host's resume of run `r`: its prepare reads no meta, it acquires, reads again
        // (`again`: no meta, or one a writer created meanwhile), (`boots`) writes the meta, and
        // releases.
        let resume = |again_some: bool, boots: bool| {
            let mut h = HistoryBuilder::engine_run();
            h.fact(0, "host", FactKind::Resumed { run_id: "r".into(), workflow: "happy".into() });
            let first = h.h.calls.len();
            h.read_meta(0, "host", "r");
            h.h.calls.last_mut().expect("a read").read = Some(Read::Meta(None));
            let l = h.acquire(0, "host", "r", 2);
            h.read_meta(0, "host", "r");
            let seen = again_some.then(|| crate::oracle::testkit::meta_record("r", RunStatus::Running));
            h.h.calls.last_mut().expect("a read").read = Some(Read::Meta(seen));
            if boots {
                h.meta(0, Some(&l), "r", RunStatus::Running, 2);
            }
            h.push(0, OpKind::Release, "r", Some(l), Args::default(), None);
            for c in h.h.calls.iter_mut().skip(first) {
                c.args.actor = Some("host".into());
            }
            h.judge("a_resume_of_a_missing_run_boots")
        };
        assert!(resume(false, true).is_empty());
        let v = resume(false, false);
        assert!(v.len() == 1 && v[0].witness.contains("found no meta (read 2 time(s)"), "{v:?}");
        // A meta under the lease: the resume boots from it or refuses for a reason of its own.
        assert!(resume(true, false).is_empty());
    }

    #[test]
    fn a_resume_that_keeps_the_labels_is_caught() {
        use serde_json::json;
        // A labelled first segment, then a resume's boot with `more` over segment 2.
        let resumed = |more: serde_json::Value| {
            let mut h = HistoryBuilder::engine_run();
            let a = h.acquire(0, "host", "r", 1);
            h.meta_with(0, Some(&a), "r", RunStatus::Ok, 1, json!({"name": "n", "tags": ["t"]}));
            let b = h.acquire(1, "worker", "r", 2);
            h.meta_with(1, Some(&b), "r", RunStatus::Running, 2, more);
            h.judge("a_resumed_segment_records_no_labels")
        };
        assert!(resumed(json!({})).is_empty(), "the first segment's labels are lawful");
        let v = resumed(json!({"tags": ["t"]}));
        assert!(
            v.len() == 1 && v[0].witness.contains("records segment 2 with name absent and tags [\"t\"]"),
            "{v:?}"
        );
        assert_eq!(resumed(json!({"name": "n"})).len(), 1);
    }
}
