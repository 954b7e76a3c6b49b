//! A binary deleted right after its crash: a race between tracer reading
//! it and the parent's `rm`, whose odds are the machine's. On the host
//! (dash, coreutils' `rm`) tracer wins most tries; in the VM matrix's
//! guests (busybox's shell and `rm`, under TCG) the `rm` came first in all
//! ten tries on 5.10, 6.1 and 6.12, so this submodule runs on the host only
//! (`HOST_ONLY` in xtask/src/vm/suites.rs).
use tracer_user::eventlog::StackCompleteness;

use crate::common::*;

/// The binary is removed by its parent the moment it has been reaped. tracer
/// reads it when the crash record arrives (woken at once), racing that
/// `rm`: measured 4 of 6 won on an idle host, so of ten tries at least one
/// must be named in full, and none may ever be named wrongly (a lost race
/// leaves frames without names, said so).
#[test]
fn a_binary_deleted_right_after_its_crash_is_still_named() {
    let dir = tempfile::tempdir().unwrap();
    let mut named = 0;
    for i in 0..10 {
        let bin = super::crasher_as(dir.path(), "doomed", &format!("doomed{i}"));
        let script = format!("{0}; rm -f {0}; exit 0", bin.display());
        let r = record(&[], &["sh", "-c", &script]);
        assert!(!bin.exists());
        let c = super::the_crash(&r);
        let names = super::symbols(c);
        if names.first() == Some(&"parse_header") {
            super::assert_calls(c, &["parse_header", "load_file", "main"]);
            named += 1;
        } else {
            assert_eq!(c.completeness, StackCompleteness::ModuleUnknown, "{c:#?}");
            assert!(!names.iter().any(|n| n.contains("load_file")), "{c:#?}");
        }
    }
    assert!(named >= 1, "no try of ten was named");
}
