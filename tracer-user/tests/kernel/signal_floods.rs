//! Signal floods counted in the kernel: a flood of signals the receiver
//! handles is logged as its first deliveries, `signal_summary` records
//! saying how many were counted, and the latest delivery; what decides a
//! death (a signal left to its default action, a caught one re-raised) is
//! logged as before and certified as before. `--all-signals` logs them all.
//! The kill calls that logged no signal fold in the kernel too: a flood is
//! a few `kill_call` records whose `count`s add up to its calls.
//!
//! Hermetic: the script signals only the child it forked, and every
//! delivery is acknowledged over a pipe before the next is sent.
use crate::certificates::support::{cert, s};
use crate::common::*;
use serde_json::Value;
use tracer_user::eventlog::Record;

/// `flood.py N SIG MODE`: forks a child that handles SIG and acknowledges
/// each delivery; sends it N. MODE `term`: then a SIGTERM it does not
/// handle. MODE `reraise`: the child's handler, at the N-th, restores the
/// default and re-raises SIG on itself.
const FLOOD: &str = r#"
import os, signal, sys, time
N = int(sys.argv[1]); SIG = getattr(signal, sys.argv[2]); MODE = sys.argv[3]
ack_r, ack_w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(ack_r)
    n = 0
    def h(s, f):
        global n
        n += 1
        if MODE == 'reraise' and n == N:
            signal.signal(SIG, signal.SIG_DFL)
            os.kill(os.getpid(), SIG)
        os.write(ack_w, b'a')
    signal.signal(SIG, h)
    os.write(ack_w, b'r')
    # Not signal.pause(): a signal landing between Python's pending-signal
    # check and pause(2) would leave the child asleep and the parent waiting
    # for its ack forever. A short sleep bounds that window's cost instead.
    while True:
        time.sleep(0.05)
os.close(ack_w)
assert os.read(ack_r, 1) == b'r'
for i in range(N):
    os.kill(pid, SIG)
    if MODE == 'reraise' and i == N - 1:
        break
    assert os.read(ack_r, 1) == b'a'
if MODE == 'term':
    os.kill(pid, signal.SIGTERM)
os.waitpid(pid, 0)
print(f'child={pid} parent={os.getpid()}')
"#;

struct Flood {
    r: Recorded,
    child: u32,
    parent: u32,
}

fn flood(extra: &[&str], n: u32, sig: &str, mode: &str) -> Flood {
    let n = n.to_string();
    let r = record(extra, &["/usr/bin/python3", "-c", FLOOD, &n, sig, mode]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let out = String::from_utf8_lossy(&r.output.stdout).into_owned();
    let num = |k: &str| -> u32 {
        out.split_whitespace()
            .find_map(|w| w.strip_prefix(k))
            .unwrap_or_else(|| panic!("{k} in {out:?}"))
            .parse()
            .unwrap()
    };
    let (child, parent) = (num("child="), num("parent="));
    assert_no_loss(&r);
    Flood { r, child, parent }
}

/// (individual deliveries, counted deliveries) of `sig` from parent to child.
fn deliveries(f: &Flood, sig: i32) -> (u64, u64) {
    let mut one = 0;
    let mut counted = 0;
    for e in f.r.events() {
        match e {
            Record::Signal(x)
                if x.sig == sig && x.sender.pid == f.parent && x.target.pid == f.child =>
            {
                one += 1
            }
            Record::SignalSummary(x)
                if x.sig == sig && x.sender.pid == f.parent && x.target.pid == f.child =>
            {
                assert!(x.first_t <= x.last_t && x.last_t <= x.at.t, "{x:?}");
                counted += x.count
            }
            _ => {}
        }
    }
    (one, counted)
}

/// (kill_call records, the calls they stand for) of `sig` from `sender`.
fn calls(r: &Recorded, sender: u32, sig: i32) -> (u64, u64) {
    let (mut records, mut calls) = (0, 0);
    for e in r.events() {
        if let Record::KillCall(k) = e {
            if k.sender.pid == sender && k.sig == sig {
                assert_eq!(k.ret, 0, "{k:?}");
                assert!(
                    k.count == 1 || k.first_t.is_some_and(|t| t <= k.at.t),
                    "{k:?}"
                );
                records += 1;
                calls += k.count;
            }
        }
    }
    (records, calls)
}

fn report(f: &Flood) -> Value {
    serde_json::from_slice(&std::fs::read(f.r.path("report.json")).unwrap()).unwrap()
}

#[test]
fn a_handled_flood_is_counted_and_the_fatal_signal_still_logged() {
    let f = flood(&[], 200, "SIGUSR1", "term");
    let (one, counted) = deliveries(&f, 10);
    assert_eq!(one + counted, 200, "every delivery is logged or counted");
    assert!(one <= 12, "the first 8, then samples: {one}");
    let (records, n) = calls(&f.r, f.parent, 10);
    assert_eq!(n, 200, "every call is logged or counted");
    assert!(
        records <= 12,
        "the calls of the counted deliveries fold: {records}"
    );
    let (term, counted_term) = deliveries(&f, 15);
    assert_eq!(
        (term, counted_term),
        (1, 0),
        "a SIGTERM left to its default is logged"
    );
    let rep = report(&f);
    let c = cert(&rep, f.child);
    assert_eq!(s(&c["cause"]["kind"]), "killed_in_run", "{c:#}");
    assert_eq!(c["killer"]["process"]["pid"], f.parent);
    assert_eq!(c["cause"]["signal"]["sig_name"], "SIGTERM");
}

#[test]
fn a_caught_signal_re_raised_after_a_flood_of_it_names_the_sender() {
    let f = flood(&[], 30, "SIGTERM", "reraise");
    let (one, counted) = deliveries(&f, 15);
    assert_eq!(one + counted, 30);
    assert!(counted > 0, "the flood was counted");
    let rep = report(&f);
    let c = cert(&rep, f.child);
    assert_eq!(s(&c["cause"]["kind"]), "killed_in_run", "{c:#}");
    assert_eq!(c["killer"]["process"]["pid"], f.parent);
    // The caught delivery's call was folded (every delivery of it counted):
    // the signal's own call reference still names it.
    assert_eq!(calls(&f.r, f.parent, 15).1, 30);
    assert_eq!(s(&c["killer"]["syscall"]), "kill", "{c:#}");
    assert_eq!(c["killer"]["target_arg"], f.child, "{c:#}");
    let re = &c["cause"]["reraised"];
    assert_eq!(s(&re["sig_name"]), "SIGTERM", "{c:#}");
    // The caught delivery named is the last one before the re-raise.
    assert!(c["cause"]["signal"]["seq"].as_u64() < re["seq"].as_u64());
    let h = s(&c["headline"]);
    assert!(h.contains("caught SIGTERM from "), "{h}");
    assert!(h.contains("and re-raised it on itself via "), "{h}");
}

#[test]
fn all_signals_logs_every_delivery() {
    let f = flood(&["--all-signals"], 60, "SIGUSR1", "term");
    assert_eq!(deliveries(&f, 10), (60, 0));
    assert_eq!(
        calls(&f.r, f.parent, 10),
        (60, 60),
        "each call logged one by one"
    );
    assert!(!f.r.events().any(|e| matches!(e, Record::SignalSummary(_))));
}

/// A process that signals itself in a loop (a handler catches each), then
/// ends itself with a SIGTERM it does not handle: a few records, and the
/// death certified with the call that caused it.
#[test]
fn a_self_signal_flood_folds_and_the_self_kill_is_certified() {
    const SELF: &str = r#"
import os, signal, sys
N = int(sys.argv[1]); n = 0
def h(s, f):
    global n
    n += 1
signal.signal(signal.SIGUSR1, h)
for _ in range(N):
    os.kill(os.getpid(), signal.SIGUSR1)
assert n == N, n
print(f'me={os.getpid()}', flush=True)
os.kill(os.getpid(), signal.SIGTERM)
"#;
    let r = record(&[], &["/usr/bin/python3", "-c", SELF, "5000"]);
    assert_eq!(r.code(), Some(128 + 15), "{}", r.stderr());
    assert_no_loss(&r);
    let out = String::from_utf8_lossy(&r.output.stdout).into_owned();
    let me: u32 = out
        .trim()
        .strip_prefix("me=")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{out:?}"));
    let (records, n) = calls(&r, me, 10);
    assert_eq!(n, 5000, "every call is logged or counted");
    assert!(records <= 12, "a few records, not one a call: {records}");
    assert_eq!(
        calls(&r, me, 15),
        (1, 1),
        "the fatal call is logged as it returned"
    );
    let rep: Value =
        serde_json::from_slice(&std::fs::read(r.path("report.json")).unwrap()).unwrap();
    let c = cert(&rep, me);
    assert_eq!(c["cause"]["signal"]["sig_name"], "SIGTERM", "{c:#}");
    assert_eq!(c["killer"]["process"]["pid"], me, "{c:#}");
}
