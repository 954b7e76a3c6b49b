//! Deaths of one signature folded into one entry.
use serde::Serialize;

use super::{Certificate, Rank};

/// Deaths of one signature and rank folded into one entry (report/groups.rs):
/// expected stops and non-zero exits with no cascade link, when at least
/// `GROUP_MIN` share their signature. A report grows with the stories, not
/// with the processes.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct DeathGroup {
    /// The example's `id`: groups and certificates share one numbering, the
    /// ranked list of every death (the other members' ids are not listed).
    pub id: usize,
    /// The rank every member has.
    pub rank: Rank,
    /// The death named as its JUnit test case would be: short command
    /// names, cause, killer relation; never a pid.
    pub signature: String,
    /// How many deaths it folds.
    pub count: usize,
    /// Wall-clock time of the first member's death.
    pub first_time: String,
    /// Wall-clock time of the last member's death.
    pub last_time: String,
    /// The first members, in the ranked order (at most `MAX_MEMBERS`).
    pub members: Vec<GroupMember>,
    /// Members past `members`: counted, not listed.
    pub members_left_out: usize,
    /// The first member's certificate, whole.
    pub example: Certificate,
}

/// One death of a group: the process, and where its end is in the log.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct GroupMember {
    /// Process id (tgid).
    pub pid: u32,
    /// Process start, CLOCK_BOOTTIME ns: with `pid`, the process identity.
    pub start: u64,
    /// Sequence number of its group-dead exit.
    pub end_seq: u64,
}
