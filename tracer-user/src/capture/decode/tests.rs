use super::*;

fn bytes_of<T>(v: &T) -> Vec<u8> {
    // SAFETY: reading the bytes of a plain repr(C) value.
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), size_of::<T>()) }.to_vec()
}

fn exit_record(code: i32) -> ExitRecord {
    let mut comm = [0u8; 16];
    comm[..4].copy_from_slice(b"node");
    ExitRecord {
        hdr: RecordHeader {
            kind: RecordKind::Exit as u32,
            _pad: 0,
            ktime_ns: 42,
        },
        task: TaskId {
            tid: 4243,
            tgid: 4242,
            start_ns: 7,
        },
        comm,
        exit_code: code,
        flags: EXIT_GROUP_DEAD,
    }
}

/// A `kill()` call's wire record, every other field zero.
fn kill_call_record() -> KillCallRecord {
    // SAFETY: the wire records are #[repr(C)] plain integers and byte arrays (aya::Pod): all-zero is a valid value.
    let mut rec: KillCallRecord = unsafe { std::mem::zeroed() };
    rec.hdr.kind = RecordKind::KillCall as u32;
    rec.syscall = KillSyscall::Kill as u32;
    rec
}

/// The log record of a whole wire record's bytes.
fn record(bytes: &[u8]) -> Record {
    decode(bytes).unwrap().into_record(stamp()).unwrap()
}

fn stamp() -> Stamp {
    Stamp {
        seq: 1,
        t: 42,
        time: String::new(),
    }
}

#[test]
fn exit_round_trip_with_status() {
    let bytes = bytes_of(&exit_record(9));
    let Record::Exit(e) = record(&bytes) else {
        panic!()
    };
    assert_eq!(
        e.task,
        Task {
            pid: 4242,
            tid: 4243,
            start: 7,
            comm: Some("node".into())
        }
    );
    assert!(e.group_dead);
    assert_eq!(
        e.status,
        ExitStatus::Signaled {
            signal: 9,
            name: "SIGKILL".into(),
            core_dumped: false
        }
    );
    let Record::Exit(e) = record(&bytes_of(&exit_record(3 << 8))) else {
        panic!()
    };
    assert_eq!(e.status, ExitStatus::Exited { code: 3 });
}

#[test]
fn short_and_unknown_records_are_errors() {
    let bytes = bytes_of(&exit_record(0));
    assert!(matches!(
        decode(&bytes[..10]),
        Err(DecodeError::TooShort { .. })
    ));
    assert!(matches!(
        decode(&bytes[..bytes.len() - 1]),
        Err(DecodeError::TooShort { .. })
    ));
    let mut bad = bytes.clone();
    bad[0] = 99;
    assert_eq!(decode(&bad).unwrap_err(), DecodeError::UnknownKind(99));
}

#[test]
fn argv_splits_and_flags_truncation() {
    assert_eq!(split_argv(b"sh\0-c\0exit 3\0"), vec!["sh", "-c", "exit 3"]);
    assert_eq!(split_argv(b""), Vec::<String>::new());
    // SAFETY: the wire records are #[repr(C)] plain integers and byte arrays (aya::Pod): all-zero is a valid value.
    let mut rec: ExecRecord = unsafe { std::mem::zeroed() };
    rec.hdr.kind = RecordKind::Exec as u32;
    rec.argv[..6].copy_from_slice(b"a\0bcd\0");
    rec.argv_len = 6;
    rec.args_size = 9000;
    let Record::Exec(e) = record(&bytes_of(&rec)) else {
        panic!()
    };
    assert_eq!(e.argv, vec!["a", "bcd"]);
    assert!(e.argv_truncated);
}

#[test]
fn exec_record_cut_to_its_argv() {
    // SAFETY: the wire records are #[repr(C)] plain integers and byte arrays (aya::Pod): all-zero is a valid value.
    let mut rec: ExecRecord = unsafe { std::mem::zeroed() };
    rec.hdr.kind = RecordKind::Exec as u32;
    rec.argv[..8].copy_from_slice(b"true\0-x\0");
    rec.argv_len = 7;
    rec.args_size = 7;
    let cut = bytes_of(&rec)[..EXEC_HEADER_LEN + 7].to_vec();
    let Record::Exec(e) = record(&cut) else {
        panic!()
    };
    // Nothing read past the cut: the byte after it (a NUL above) is gone.
    assert_eq!(e.argv, vec!["true", "-x"]);
    assert!(!e.argv_truncated);
    // A record claiming more argv than it carries is refused, not read past.
    assert_eq!(
        decode(&cut[..EXEC_HEADER_LEN + 6]).unwrap_err(),
        DecodeError::TooShort {
            what: "its argv",
            need: EXEC_HEADER_LEN + 7,
            got: EXEC_HEADER_LEN + 6
        }
    );
    assert!(matches!(
        decode(&cut[..EXEC_HEADER_LEN - 1]),
        Err(DecodeError::TooShort {
            what: "an exec record",
            ..
        })
    ));
}

#[test]
fn process_group_kill_keeps_negative_target() {
    let mut rec = kill_call_record();
    rec.sig = 9;
    rec.target_arg = -4242;
    rec.ret = -3;
    let Record::KillCall(k) = record(&bytes_of(&rec)) else {
        panic!()
    };
    assert_eq!(
        (k.syscall.as_str(), k.target_arg, k.errno.as_deref()),
        ("kill", -4242, Some("ESRCH"))
    );
    assert_eq!(k.tid_arg, None);
}

#[test]
fn a_call_that_opened_a_fold_names_its_sender_for_the_exit_flush() {
    let mut rec = kill_call_record();
    rec.sig = 10;
    rec.sender.tgid = 4242;
    rec.sender.start_ns = 77;
    rec.deliveries = 1;
    assert_eq!(decode(&bytes_of(&rec)).unwrap().opened_fold(), None);
    rec.opened_fold = 1;
    let key = decode(&bytes_of(&rec)).unwrap().opened_fold();
    assert_eq!(key.map(|k| (k.pid, k.start)), Some((4242, 77)));
    // A fold taken at the exit stands for its calls, a successful one too.
    rec.opened_fold = 0;
    rec.count = 5;
    rec.first_ns = 11;
    let Record::KillCall(k) = record(&bytes_of(&rec)) else {
        panic!()
    };
    assert_eq!((k.ret, k.count, k.first_t), (0, 5, Some(11)));
}

fn tail_bytes(t: &StderrTail, len: usize) -> Vec<u8> {
    bytes_of(t)[..STDERR_TAIL_HEADER_LEN + len].to_vec()
}

#[test]
fn a_wrapped_tail_is_put_back_in_order() {
    // SAFETY: the wire records are #[repr(C)] plain integers and byte arrays (aya::Pod): all-zero is a valid value.
    let mut t: Box<StderrTail> = Box::new(unsafe { std::mem::zeroed() });
    t.hdr.kind = RecordKind::StderrTail as u32;
    t.task.tgid = 7;
    // 3 bytes past a full ring: "xyz" went over the first 3 bytes.
    t.written = TAIL_CAP as u64 + 3;
    t.total = 1 << 20;
    t.len = TAIL_CAP as u32;
    t.data[..TAIL_CAP].fill(b'a');
    t.data[..3].copy_from_slice(b"xyz");
    t.data[3] = b'b';
    let Wire::Stderr { count, data, .. } = decode(&tail_bytes(&t, TAIL_CAP)).unwrap() else {
        panic!()
    };
    assert_eq!(count, 1 << 20);
    assert_eq!(data.len(), TAIL_CAP);
    assert_eq!(&data[..1], b"b");
    assert!(data.ends_with(b"axyz"));
}

/// A write the kernel could not read zeroed the oldest bytes of a full
/// ring and moved nothing: the zeroes are dropped, the rest kept in order.
#[test]
fn a_tails_zeroed_oldest_bytes_are_no_words() {
    // SAFETY: the wire records are #[repr(C)] plain integers and byte arrays (aya::Pod): all-zero is a valid value.
    let mut t: Box<StderrTail> = Box::new(unsafe { std::mem::zeroed() });
    t.hdr.kind = RecordKind::StderrTail as u32;
    t.written = TAIL_CAP as u64 + 10;
    t.total = t.written;
    t.len = TAIL_CAP as u32;
    t.data[..TAIL_CAP].fill(b'a');
    t.data[10..15].fill(0);
    t.data[..10].copy_from_slice(b"last line\n");
    let Wire::Stderr { data, .. } = decode(&tail_bytes(&t, TAIL_CAP)).unwrap() else {
        panic!()
    };
    let mut words = vec![b'a'; TAIL_CAP - 15];
    words.extend_from_slice(b"last line\n");
    assert_eq!(data, words);
}

#[test]
fn a_tail_whose_counters_disagree_is_refused() {
    // SAFETY: the wire records are #[repr(C)] plain integers and byte arrays (aya::Pod): all-zero is a valid value.
    let mut t: Box<StderrTail> = Box::new(unsafe { std::mem::zeroed() });
    t.hdr.kind = RecordKind::StderrTail as u32;
    t.written = 5;
    t.total = 5;
    t.len = 5;
    t.data[..5].copy_from_slice(b"hello");
    let Wire::Stderr { data, .. } = decode(&tail_bytes(&t, 5)).unwrap() else {
        panic!()
    };
    assert_eq!(data, b"hello");
    // Claims more than it carries, or a length its counter cannot give.
    assert!(decode(&tail_bytes(&t, 4)).is_err());
    t.len = 6;
    assert!(decode(&tail_bytes(&t, 6)).is_err());
}

#[test]
fn a_signal_summary_says_how_many_it_stands_for() {
    // SAFETY: the wire records are #[repr(C)] plain integers and byte arrays (aya::Pod): all-zero is a valid value.
    let mut rec: SignalSummaryRecord = unsafe { std::mem::zeroed() };
    rec.hdr.kind = RecordKind::SignalSummary as u32;
    rec.hdr.ktime_ns = 99;
    rec.sender.tgid = 10;
    rec.target.tgid = 11;
    rec.sig = 10;
    rec.count = 991;
    rec.first_ns = 5;
    rec.last_ns = 50;
    let wire = decode(&bytes_of(&rec)).unwrap();
    assert_eq!(wire.ktime(), 50, "stamped at the last counted delivery");
    let Record::SignalSummary(s) = wire.into_record(stamp()).unwrap() else {
        panic!()
    };
    assert_eq!(
        (s.sender.pid, s.target.pid, s.sig_name.as_str(), s.count),
        (10, 11, "SIGUSR1", 991)
    );
    assert_eq!((s.first_t, s.last_t), (5, 50));
}
