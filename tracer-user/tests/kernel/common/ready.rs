//! The one handshake between a test and a process it must not act on too
//! early: the process prints a line `ready[ WORDS]` on its stdout once it is
//! set up (a handler installed, a child forked, its pid known), and the test
//! reads up to that line. Nothing sleeps to synchronise.
use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
};

/// Reads `out` up to its first line `ready` or `ready WORDS` and returns
/// WORDS (empty for a bare `ready`). Lines before it (libtest's own, a
/// scenario's chatter) are skipped. Panics at end of file.
pub(crate) fn wait_ready(out: &mut impl BufRead) -> String {
    read_ready(out).expect("the process ended without saying `ready`")
}

/// Spawns `cmd` with stdout piped and returns once it said `ready`, with
/// the words after it. What it prints later is drained, so it never blocks
/// on a full pipe; the caller waits for the child.
#[allow(
    clippy::zombie_processes,
    reason = "the caller waits for the child it is handed"
)]
pub(crate) fn spawn_ready(mut cmd: Command) -> (Child, String) {
    let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let Some(words) = read_ready(&mut out) else {
        let status = child.wait().unwrap();
        panic!("child never got ready: {status}");
    };
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    (child, words)
}

fn read_ready(out: &mut impl BufRead) -> Option<String> {
    let mut line = String::new();
    loop {
        line.clear();
        if out.read_line(&mut line).unwrap() == 0 {
            return None;
        }
        let line = line.trim_end();
        if line == "ready" {
            return Some(String::new());
        }
        if let Some(words) = line.strip_prefix("ready ") {
            return Some(words.trim().to_string());
        }
    }
}
