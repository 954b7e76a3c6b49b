//! The report path's fast lane for the two records a signal storm is made
//! of: a `signal` or `kill_call` line read into a borrowed view (strings
//! point into the line, nothing is allocated) and folded straight into the
//! model. Field for field the log's `Signal` and `KillCall` (same names,
//! same required and defaulted fields, unknown keys ignored), so a line
//! reads the same here as through [`crate::eventlog::Record`]; a test holds
//! the two to the same model.
use std::borrow::Cow;

use serde::Deserialize;

use super::compact::{At, CallRec, KillRec, SigRec, Sym, Who};

#[derive(Deserialize)]
pub struct TaskLine<'a> {
    pub pid: u32,
    pub tid: u32,
    pub start: u64,
    #[serde(default, borrow)]
    pub comm: Option<Cow<'a, str>>,
}

impl TaskLine<'_> {
    pub fn who(&self) -> Who {
        Who {
            pid: self.pid,
            tid: self.tid,
            start: self.start,
        }
    }
}

#[derive(Deserialize)]
pub struct CallLine<'a> {
    pub id: u64,
    #[serde(borrow)]
    pub syscall: Cow<'a, str>,
    pub target_arg: i64,
}

#[derive(Deserialize)]
pub struct SignalLine<'a> {
    pub seq: u64,
    pub t: u64,
    #[serde(borrow)]
    pub time: Cow<'a, str>,
    #[serde(borrow)]
    pub sender: TaskLine<'a>,
    #[serde(borrow)]
    pub target: TaskLine<'a>,
    pub sig: i32,
    #[serde(borrow)]
    pub sig_name: Cow<'a, str>,
    pub code: i32,
    #[serde(borrow)]
    pub code_name: Cow<'a, str>,
    pub errno: i32,
    pub group: bool,
    #[serde(borrow)]
    pub result: Cow<'a, str>,
    #[serde(default, borrow)]
    pub call: Option<CallLine<'a>>,
    #[serde(default)]
    pub sender_argv: Option<Vec<String>>,
    #[serde(default)]
    pub sender_argv_truncated: bool,
    #[serde(default)]
    pub seccomp_syscall: Option<i64>,
}

impl SignalLine<'_> {
    pub fn rec(&self) -> SigRec {
        SigRec {
            at: At {
                seq: self.seq,
                t: self.t,
            },
            sender: self.sender.who().into(),
            target: self.target.who().into(),
            sig: self.sig,
            code: self.code,
            errno: self.errno,
            group: self.group,
            sig_name: Sym::new(&self.sig_name),
            code_name: Sym::new(&self.code_name),
            result: Sym::new(&self.result),
            call: self.call.as_ref().map(|c| CallRec {
                id: c.id,
                syscall: Sym::new(&c.syscall),
                target_arg: c.target_arg,
            }),
            seccomp_syscall: self.seccomp_syscall,
        }
    }
}

#[derive(Deserialize)]
pub struct KillLine<'a> {
    pub seq: u64,
    pub t: u64,
    #[serde(borrow)]
    pub time: Cow<'a, str>,
    #[serde(borrow)]
    pub sender: TaskLine<'a>,
    #[serde(borrow)]
    pub syscall: Cow<'a, str>,
    pub sig: i32,
    #[serde(borrow)]
    pub sig_name: Cow<'a, str>,
    pub target_arg: i64,
    #[serde(default)]
    pub tid_arg: Option<i64>,
    pub ret: i64,
    #[serde(default, borrow)]
    pub errno: Option<Cow<'a, str>>,
    pub call_id: u64,
    pub deliveries: u32,
    /// Identical calls the record stands for (absent: 1).
    #[serde(default)]
    pub count: Option<u64>,
}

impl KillLine<'_> {
    pub fn rec(&self) -> KillRec {
        KillRec {
            at: At {
                seq: self.seq,
                t: self.t,
            },
            sender: self.sender.who().into(),
            syscall: Sym::new(&self.syscall),
            sig: self.sig,
            sig_name: Sym::new(&self.sig_name),
            target_arg: self.target_arg,
            tid_arg: self.tid_arg.unwrap_or(0),
            has_tid_arg: self.tid_arg.is_some(),
            ret: self.ret,
            errno: self.errno.as_deref().map(Sym::new),
            call_id: self.call_id,
            deliveries: self.deliveries,
            count: self.count.unwrap_or(1),
        }
    }
}
