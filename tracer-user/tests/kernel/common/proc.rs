//! What the tests read of a process in /proc to know it is still the one they
//! started, through procfs (the library's own parser of /proc) rather than by
//! hand: a command line can hold spaces and parentheses.

/// Start time of `pid` (clock ticks since boot, /proc/PID/stat field 22):
/// with the pid, a process's identity. `None` once it is gone.
pub(crate) fn start_ticks(pid: u32) -> Option<u64> {
    Some(stat(pid)?.starttime)
}

/// `pid` is alive: neither gone, nor a zombie (Z), nor dead (X).
pub(crate) fn alive(pid: u32) -> bool {
    stat(pid).is_some_and(|s| !matches!(s.state, 'Z' | 'X'))
}

/// `pid` is still the process that started at `start`, and alive.
pub(crate) fn running(pid: u32, start: u64) -> bool {
    stat(pid).is_some_and(|s| s.starttime == start && !matches!(s.state, 'Z' | 'X'))
}

fn stat(pid: u32) -> Option<procfs::process::Stat> {
    procfs::process::Process::new(i32::try_from(pid).ok()?)
        .ok()?
        .stat()
        .ok()
}
