//! Detaching: the classic tracepoints' links go to a child that closes them
//! after the tracer has returned (each close waits for an RCU grace period);
//! that child must really go away.
use std::time::{Duration, Instant};

use crate::common::*;

#[test]
fn the_hook_holder_exits_after_the_tracer() {
    let r = record_env(&[], &["true"], &[("TRACER_LOG", "tracer_user=debug")]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let stderr = r.stderr();
    let line = stderr
        .lines()
        .find_map(|l| l.split_once("hooks detach in pid ").map(|(_, rest)| rest))
        .unwrap_or_else(|| {
            panic!("no hand-over logged (classic tracepoints attach here): {stderr}")
        });
    let mut it = line.split(' ');
    let pid: u32 = it.next().unwrap().parse().unwrap();
    assert_eq!(it.next(), Some("start"));
    let start: u64 = it.next().unwrap().parse().unwrap();
    assert_ne!(start, 0, "the holder's start time was read");
    let bound = Duration::from_secs(20);
    let t0 = Instant::now();
    while proc::start_ticks(pid) == Some(start) {
        assert!(
            t0.elapsed() < bound,
            "the hook holder (pid {pid}) still runs {bound:?} after the tracer returned"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
