//! Deaths folded by signature, so report.json and report.md grow with the
//! stories of a run, not with its processes (issue 26). A daemon's soak job
//! (`sleep 5 & kill -TERM $!` in a loop) left 19,500 expected certificates
//! of ~2.3 KB each, one story: 207 MB of report.json for 140 MB of log.
//!
//! The rule is analysis/fold.rs's. A report's analysis usually folds as it
//! ranks; [`fold`] folds one that kept every certificate (the OTLP export
//! at the end of a run sends each death), after the verdict has named
//! what it names from every death.
use crate::analysis::{
    fold::{self, foldable, signature},
    Analysis, DeathGroup, Rank,
};

pub use crate::analysis::fold::{GROUP_MIN, MAX_MEMBERS};

/// Moves the foldable certificates of `a` into `a.death_groups`. Each folded
/// certificate but a group's first is dropped as soon as it is counted.
pub fn fold(a: &mut Analysis) {
    if !a.death_groups.is_empty() {
        return;
    }
    // Signatures are computed once per foldable certificate.
    let sigs: Vec<Option<String>> = a
        .certificates
        .iter()
        .map(|c| foldable(c).then(|| signature(c)))
        .collect();
    let keys: Vec<Option<(Rank, &str)>> = a
        .certificates
        .iter()
        .zip(&sigs)
        .map(|(c, s)| Some((c.rank, s.as_deref()?)))
        .collect();
    let groups_of = fold::plan(&keys);
    if groups_of.iter().all(Option::is_none) {
        return;
    }
    let mut groups: Vec<DeathGroup> = Vec::new();
    let certs = std::mem::take(&mut a.certificates);
    let mut kept = Vec::with_capacity(certs.len());
    for ((c, g), s) in certs.into_iter().zip(groups_of).zip(&sigs) {
        let (Some(g), Some(s)) = (g, s) else {
            kept.push(c);
            continue;
        };
        let ended_at = c.victim.ended_at.clone();
        fold::add(&mut groups, g, s, fold::member(&c), ended_at, || c);
    }
    a.certificates = kept;
    // The certificates are in the ranked order, so their first members are.
    a.death_groups = groups;
}

/// `pid 101, 105, 109 and 1,203 more`: a group's members for a sentence.
pub fn member_list(g: &DeathGroup) -> String {
    let pids: Vec<String> = g.members.iter().map(|m| m.pid.to_string()).collect();
    let listed = pids.join(", ");
    let word = if g.count == 1 { "pid" } else { "pids" };
    match g.members_left_out {
        0 => format!("{word} {listed}"),
        n => format!("{word} {listed} and {n} more"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::Certificate;

    fn analysis_of(name: &str) -> Analysis {
        let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
        let log = crate::eventlog::read_log(std::path::Path::new(&path)).unwrap();
        crate::analysis::analyze(&log, &Default::default()).1
    }

    /// `n` copies of `c`, each its own process, as the ranked list has them.
    fn copies(c: &Certificate, n: usize, first_id: usize) -> Vec<Certificate> {
        (0..n)
            .map(|i| {
                let mut c = c.clone();
                c.id = first_id + i;
                c.victim.process.pid += i as u32;
                c.victim.end_seq += i as u64;
                c.victim.ended_at = format!("t{i}");
                c
            })
            .collect()
    }

    #[test]
    fn deaths_of_one_signature_fold_and_the_rest_stay() {
        let mut a = analysis_of("real_pgroup_kill.ndjson");
        let base = a.certificates[0].clone();
        let mut expected = base.clone();
        expected.rank = Rank::Expected;
        expected.consequence_of = None;
        expected.consequences.clear();
        let mut unexpected = expected.clone();
        unexpected.rank = Rank::Unexpected;
        let mut certs = copies(&unexpected, 5, 1);
        certs.extend(copies(&expected, MAX_MEMBERS + 7, 6));
        // Two of another signature: below GROUP_MIN, both stay.
        let mut other = expected.clone();
        other.victim.process.argv = vec!["other".into()];
        other.victim.process.command = "other".into();
        certs.extend(copies(&other, 2, 6 + MAX_MEMBERS + 7));
        a.certificates = certs;
        fold(&mut a);
        assert_eq!(a.death_groups.len(), 1, "{:?}", a.death_groups);
        let g = &a.death_groups[0];
        assert_eq!(
            (g.id, g.count, g.rank),
            (6, MAX_MEMBERS + 7, Rank::Expected)
        );
        assert_eq!(g.members.len(), MAX_MEMBERS);
        assert_eq!(g.members_left_out, 7);
        assert_eq!(g.example.id, 6);
        assert_eq!(g.first_time, "t0");
        assert_eq!(g.last_time, format!("t{}", MAX_MEMBERS + 6));
        assert_eq!(g.signature, signature(&expected));
        assert!(
            member_list(g).ends_with(" and 7 more"),
            "{}",
            member_list(g)
        );
        // The unexpected ones and the small signature stay, in order.
        let ranks: Vec<Rank> = a.certificates.iter().map(|c| c.rank).collect();
        assert_eq!(a.certificates.len(), 7, "{ranks:?}");
        assert!(a.certificates[..5]
            .iter()
            .all(|c| c.rank == Rank::Unexpected));
        assert!(a.certificates[5..]
            .iter()
            .all(|c| c.victim.process.command == "other"));
    }

    #[test]
    fn cascade_links_keep_their_certificates() {
        for name in ["real_cascade_bash137.ndjson", "real_cascade_make.ndjson"] {
            let mut a = analysis_of(name);
            let linked: Vec<Certificate> = a
                .certificates
                .iter()
                .filter(|c| c.consequence_of.is_some() || !c.consequences.is_empty())
                .cloned()
                .collect();
            assert!(!linked.is_empty(), "{name}: a cascade");
            // Each linked death ranked expected, beside GROUP_MIN unlinked
            // deaths of its very signature: those fold, it stays.
            let mut next = a.certificates.len() + 1;
            for c in &mut a.certificates {
                c.rank = Rank::Expected;
            }
            for c in &linked {
                let mut free = c.clone();
                free.rank = Rank::Expected;
                free.consequence_of = None;
                free.consequences.clear();
                a.certificates.extend(copies(&free, GROUP_MIN, next));
                next += GROUP_MIN;
            }
            let before = a.certificates.len();
            fold(&mut a);
            assert!(!a.death_groups.is_empty(), "{name}: the unlinked fold");
            let folded: usize = a.death_groups.iter().map(|g| g.count).sum();
            assert_eq!(a.certificates.len() + folded, before, "{name}: none lost");
            let ids: Vec<usize> = a.certificates.iter().map(|c| c.id).collect();
            for c in &linked {
                assert!(
                    ids.contains(&c.id),
                    "{name}: #{} linked, kept ({ids:?})",
                    c.id
                );
            }
            for c in &a.certificates {
                for id in c.consequence_of.iter().flat_map(|l| [l.of, l.root]) {
                    assert!(ids.contains(&id), "{name}: #{} names #{id}", c.id);
                }
                for id in &c.consequences {
                    assert!(ids.contains(id), "{name}: #{} names #{id}", c.id);
                }
            }
        }
    }
}
