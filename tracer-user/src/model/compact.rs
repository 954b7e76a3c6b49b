//! The model's own copies of the records it keeps one of per event (signals
//! and kill calls): what the analysis reads of them, small. A signal storm
//! is a million of these; as log records (a dozen strings each) they were
//! most of a report's memory.
use std::{
    collections::HashMap,
    fmt,
    num::NonZeroU32,
    ops::Deref,
    sync::{OnceLock, RwLock},
};

use crate::eventlog::{KillCall, ProcKey, Signal, Stamp, Task};

/// A short, much-repeated string (`SIGUSR1`, `SI_TKILL`, `delivered`,
/// `kill`): four bytes, the text kept once per process. Interned strings
/// live as long as the process: the set of names a log can hold is small
/// (signal, si_code, result, syscall and errno names), and a hostile log
/// with many distinct ones costs no more than storing them would.
///
/// Non-zero (index + 1), so an `Option<Sym>` or a struct holding one costs
/// nothing more than the symbol: a signal's `call` and a kill call's errno.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sym(NonZeroU32);

type Table = (HashMap<&'static str, NonZeroU32>, Vec<&'static str>);

fn table() -> &'static RwLock<Table> {
    static TABLE: OnceLock<RwLock<Table>> = OnceLock::new();
    TABLE.get_or_init(Default::default)
}

impl Sym {
    pub fn new(s: &str) -> Sym {
        if let Some(&i) = table().read().expect("sym table").0.get(s) {
            return Sym(i);
        }
        let mut t = table().write().expect("sym table");
        if let Some(&i) = t.0.get(s) {
            return Sym(i);
        }
        let text: &'static str = Box::leak(s.into());
        let i = u32::try_from(t.1.len() + 1)
            .ok()
            .and_then(NonZeroU32::new)
            .expect("fewer than 4G distinct names");
        t.1.push(text);
        t.0.insert(text, i);
        Sym(i)
    }

    pub fn as_str(&self) -> &'static str {
        table().read().expect("sym table").1[self.0.get() as usize - 1]
    }
}

impl Deref for Sym {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Debug for Sym {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Sym {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for Sym {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Sym {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// Where an event is in the log. Its wall-clock `time` is derived from `t`
/// (see [`super::Model::time_at`]); the rare log whose `time` says otherwise
/// keeps its own text in the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct At {
    pub seq: u64,
    pub t: u64,
}

impl From<&Stamp> for At {
    fn from(s: &Stamp) -> At {
        At { seq: s.seq, t: s.t }
    }
}

/// A task without its name (the process keeps the name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Who {
    pub pid: u32,
    pub tid: u32,
    pub start: u64,
}

impl Who {
    pub fn key(&self) -> ProcKey {
        ProcKey {
            pid: self.pid,
            start: self.start,
        }
    }
}

/// A task as a stored signal or kill call names it: the process it resolved
/// to is kept beside it (`SignalEv::sender`), so no start time here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ids {
    pub pid: u32,
    pub tid: u32,
}

impl From<Who> for Ids {
    fn from(w: Who) -> Ids {
        Ids {
            pid: w.pid,
            tid: w.tid,
        }
    }
}

impl From<&Task> for Who {
    fn from(t: &Task) -> Who {
        Who {
            pid: t.pid,
            tid: t.tid,
            start: t.start,
        }
    }
}

/// A `signal` record, as the model keeps it. Field names as in the log.
#[derive(Debug, Clone)]
pub struct SigRec {
    pub at: At,
    pub sender: Ids,
    pub target: Ids,
    pub sig: i32,
    pub code: i32,
    pub errno: i32,
    pub group: bool,
    pub sig_name: Sym,
    pub code_name: Sym,
    pub result: Sym,
    pub call: Option<CallRec>,
    pub seccomp_syscall: Option<i64>,
}

#[derive(Debug, Clone)]
pub struct CallRec {
    pub id: u64,
    pub syscall: Sym,
    pub target_arg: i64,
}

impl From<&Signal> for SigRec {
    fn from(s: &Signal) -> SigRec {
        SigRec {
            at: At::from(&s.at),
            sender: Ids::from(Who::from(&s.sender)),
            target: Ids::from(Who::from(&s.target)),
            sig: s.sig,
            code: s.code,
            errno: s.errno,
            group: s.group,
            sig_name: Sym::new(&s.sig_name),
            code_name: Sym::new(&s.code_name),
            result: Sym::new(&s.result),
            call: s.call.as_ref().map(|c| CallRec {
                id: c.id,
                syscall: Sym::new(&c.syscall),
                target_arg: c.target_arg,
            }),
            seccomp_syscall: s.seccomp_syscall,
        }
    }
}

/// A `kill_call` record, as the model keeps it. Field names as in the log.
#[derive(Debug, Clone)]
pub struct KillRec {
    pub at: At,
    pub sender: Ids,
    pub syscall: Sym,
    pub sig: i32,
    pub sig_name: Sym,
    pub target_arg: i64,
    /// `tid_arg` as [`KillRec::tid_arg`] reads it: the value, and whether
    /// there is one (an `Option<i64>` cost 8 bytes more, a signal storm
    /// keeps millions of these).
    pub(super) tid_arg: i64,
    pub(super) has_tid_arg: bool,
    pub ret: i64,
    pub errno: Option<Sym>,
    pub call_id: u64,
    pub deliveries: u32,
    /// Identical calls this record stands for (counted in the
    /// kernel; 1 for a call logged as it returned).
    pub count: u64,
}

impl KillRec {
    /// The thread argument of tgkill/rt_tgsigqueueinfo.
    pub fn tid_arg(&self) -> Option<i64> {
        self.has_tid_arg.then_some(self.tid_arg)
    }
}

impl From<&KillCall> for KillRec {
    fn from(k: &KillCall) -> KillRec {
        KillRec {
            at: At::from(&k.at),
            sender: Ids::from(Who::from(&k.sender)),
            syscall: Sym::new(&k.syscall),
            sig: k.sig,
            sig_name: Sym::new(&k.sig_name),
            target_arg: k.target_arg,
            tid_arg: k.tid_arg.unwrap_or(0),
            has_tid_arg: k.tid_arg.is_some(),
            ret: k.ret,
            errno: k.errno.as_deref().map(Sym::new),
            call_id: k.call_id,
            deliveries: k.deliveries,
            count: k.count,
        }
    }
}
