//! A leaked process's facts as report.md's and report.html's tables say
//! them: its state at the command's exit, its open fds, a later end.
//! Composed here once; each renderer escapes the words for its format.
use crate::analysis::{wording as w, LeakFacts, Leftover};

/// Open fds a leak's table cell lists before "… and N more".
const MAX_FDS: usize = 8;

/// Its state at the command's exit, as its leak record has it ("ppid 1,
/// reparented (its parent died), detached (setsid), session 7, pgid 7"),
/// or that no record says.
pub(super) fn state(leak: Option<&LeakFacts>) -> String {
    let Some(k) = leak else {
        return "no leak record".into();
    };
    let mut state = vec![format!("ppid {}", k.ppid)];
    if k.reparented {
        state.push("reparented (its parent died)".into());
    }
    if k.detached {
        state.push(format!("detached (setsid), session {}", k.sid));
    }
    state.push(format!("pgid {}", k.pgid));
    state.join(", ")
}

/// The open fds a cell lists (the first [`MAX_FDS`]), and "… and N more"
/// for those not listed and those the record only counted.
pub(super) fn fds(k: &LeakFacts) -> (&[String], Option<String>) {
    let listed = &k.fds[..k.fds.len().min(MAX_FDS)];
    let more = k.fds.len().saturating_sub(MAX_FDS) + k.fds_left_out as usize;
    (listed, (more > 0).then(|| format!("… and {more} more")))
}

/// "; ended later, T" for a leftover that ended after the command's exit;
/// empty otherwise.
pub(super) fn ended(l: &Leftover) -> String {
    l.ended_at
        .as_ref()
        .map(|t| format!("; ended later, {}", w::ms(t)))
        .unwrap_or_default()
}
