//! Last words written with writev(2) by python3, and by bash, on each rung
//! of last words' hook chain this kernel allows: the kernel tail keeps each
//! iovec piece in order. Apart from the `last_words` module because it needs
//! python3 (for os.writev) and bash, which the VM test's initramfs lacks
//! (the `fallback` module proves the rungs there with sh, cat and a writev of
//! its own).
use crate::common::*;

const PYTHON: &str =
    "import os\nos.writev(2, [b'first ', b'second ', b'third\\n'])\nos.write(2, b'after\\n')";

/// python3's words (the recorded root), and bash's (its child), with
/// `disabled` rungs; returns last words' via.
fn words_with(disabled: &[&str]) -> String {
    let mut args = Vec::new();
    for d in disabled {
        args.extend(["--disable-hook", d]);
    }
    let bash = "bash -c 'echo \"Error: bash says goodbye\" >&2; exit 2' 2>/dev/null";
    let script = format!("{PYTHON}\nimport subprocess\nsubprocess.run(['sh', '-c', {bash:?}])");
    let r = record(&args, &["/usr/bin/python3", "-c", &script]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let root = root(&r).pid;
    let words = |pred: &dyn Fn(&tracer_user::eventlog::LastWords) -> bool| -> Vec<String> {
        r.events()
            .last_words()
            .filter(|l| pred(l))
            .map(|l| l.text.clone())
            .collect()
    };
    assert_eq!(
        words(&|l| l.task.pid == root),
        ["first second third\nafter\n"]
    );
    assert_eq!(
        words(&|l| l.task.comm.as_deref() == Some("bash")),
        ["Error: bash says goodbye\n"]
    );
    let hook = hook(&r.log, "last_words");
    hook.via.clone().expect("last words attached")
}

#[test]
fn writev_pieces_are_kept_in_order() {
    words_with(&[]);
}

#[test]
fn writev_pieces_on_the_raw_syscalls_rung() {
    let via = words_with(&["last_words:fentry", "kill_syscalls:fentry"]);
    assert_eq!(via, "raw_syscalls");
}

#[test]
fn writev_pieces_on_the_tracepoint_rung() {
    let via = words_with(&["last_words:fentry", "last_words:raw_syscalls"]);
    assert_eq!(via, "tracepoint");
}
