//! What a daemon's ledger takes of each look's analysis.
use std::collections::BTreeMap;

use super::{cancel, cascade, Certificate, SmallExit};
use crate::eventlog::ProcKey;

/// What a daemon's ledger (live/ledger.rs) takes of one look's analysis, to
/// merge the looks of a whole run into one report: the certificates before
/// their cascade sentences (those name certificate ids, which only the
/// merged order gives), the cascade links by victim, the small exits one
/// by one (a process may end in one look and be analysed in two), and the
/// job's cancellation with the signals this look saw of it (a later look
/// may see more of them: live/ledger/cancel.rs).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Raw {
    /// Ranked as the look ranked them (`consequence` included), not worded.
    pub certificates: Vec<Certificate>,
    pub(crate) links: BTreeMap<ProcKey, cascade::Link>,
    pub small_exits: Vec<SmallExit>,
    /// The look's cancellation, as the ledger merges it (cancel.rs).
    pub cancel: Option<cancel::Sent>,
}
