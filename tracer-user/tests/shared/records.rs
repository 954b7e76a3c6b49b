//! Typed views of a log's records, for both test binaries (kernel and
//! offline include this file): `log.events.iter().kill_calls().find(|k|
//! k.sig == 9)` reads as the assertion means, where a hand-written
//! `find_map(|e| match e { Record::KillCall(k) if … => Some(k), _ => None })`
//! said the same in five lines.
use tracer_user::eventlog::{
    CrashStack, Exec, Existing, Exit, Fork, KillCall, LastWords, Leak, Oom, Record, Resources,
    Signal, SnapshotTaken, TestMark,
};

macro_rules! views {
    ($($(#[$doc:meta])* $name:ident => $variant:ident($ty:ty);)*) => {
        /// One method per record type: the records of that type, in log
        /// order.
        #[allow(dead_code, reason = "each test binary uses the views it needs")]
        pub(crate) trait Records<'a>: Iterator<Item = &'a Record> + Sized {
            $(
                $(#[$doc])*
                fn $name(self) -> impl Iterator<Item = &'a $ty> {
                    self.filter_map(|e| match e {
                        Record::$variant(x) => Some(x),
                        _ => None,
                    })
                }
            )*
        }
    };
}

views! {
    forks => Fork(Fork);
    execs => Exec(Exec);
    exits => Exit(Exit);
    /// Exits that end a whole process (`group_dead`) are filtered by the
    /// caller: a thread's exit is an `exit` too.
    signals => Signal(Signal);
    kill_calls => KillCall(KillCall);
    ooms => Oom(Oom);
    last_words => LastWords(LastWords);
    crash_stacks => CrashStack(CrashStack);
    leaks => Leak(Leak);
    snapshots => Snapshot(SnapshotTaken);
    existing => Existing(Existing);
    test_marks => TestMark(TestMark);
    resources => Resources(Resources);
}

impl<'a, I: Iterator<Item = &'a Record>> Records<'a> for I {}
