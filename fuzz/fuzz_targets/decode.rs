//! Arbitrary bytes as a ring-buffer record: `decode` must return a record or
//! an error, never panic, and a decoded record must convert to a log record.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracer_user::{capture::decode::decode, eventlog::Stamp};

fuzz_target!(|data: &[u8]| {
    if let Ok(wire) = decode(data) {
        let t = wire.ktime();
        let _ = wire.into_record(Stamp {
            seq: 1,
            t,
            time: String::new(),
        });
    }
});
