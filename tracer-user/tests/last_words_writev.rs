//! Last words written with writev(2): the kernel tail keeps each iovec
//! piece in order. Apart from tests/last_words.rs because it needs python3
//! (for os.writev), which the VM test's initramfs lacks.
mod common;

use common::*;
use tracer_user::eventlog::Record;

#[test]
fn writev_pieces_are_kept_in_order() {
    let r = record(
        &[],
        &[
            "/usr/bin/python3",
            "-c",
            "import os\nos.writev(2, [b'first ', b'second ', b'third\\n'])\nos.write(2, b'after\\n')",
        ],
    );
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let root = root(&r).pid;
    let words = r
        .events()
        .find_map(|e| match e {
            Record::LastWords(l) if l.task.pid == root => Some(l.text.clone()),
            _ => None,
        })
        .expect("the command's words");
    assert_eq!(words, "first second third\nafter\n");
}
