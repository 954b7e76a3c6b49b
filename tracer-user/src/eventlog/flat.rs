//! `fork`, `exec` and `exit` lines read without `#[serde(flatten)]`: the
//! log's structs flatten their [`Stamp`], and serde reads a flattened
//! struct by first buffering every key of the line into a generic tree,
//! which was most of the cost of reading a fork storm's log. These structs
//! name the stamp's keys in place; field for field they are the log's (same
//! names, same required and defaulted fields, unknown keys ignored). A line
//! they refuse (a repeated key, which the flattened path may take) is read
//! the old way, so what is accepted, and how it reads, does not change.
use serde::Deserialize;

use super::schema::{Exec, Exit, ExitStatus, Fork, NsPid, Stamp, Task};

#[derive(Deserialize)]
pub struct ForkFlat {
    seq: u64,
    t: u64,
    time: String,
    parent: Task,
    child: Task,
    thread: bool,
    #[serde(default)]
    child_ns: Option<NsPid>,
}

impl From<ForkFlat> for Fork {
    fn from(f: ForkFlat) -> Fork {
        Fork {
            at: Stamp {
                seq: f.seq,
                t: f.t,
                time: f.time,
            },
            parent: f.parent,
            child: f.child,
            thread: f.thread,
            child_ns: f.child_ns,
        }
    }
}

#[derive(Deserialize)]
pub struct ExecFlat {
    seq: u64,
    t: u64,
    time: String,
    task: Task,
    #[serde(default)]
    old_tid: Option<u32>,
    filename: String,
    argv: Vec<String>,
    argv_truncated: bool,
    #[serde(default)]
    test_env: std::collections::BTreeMap<String, String>,
}

impl From<ExecFlat> for Exec {
    fn from(e: ExecFlat) -> Exec {
        Exec {
            at: Stamp {
                seq: e.seq,
                t: e.t,
                time: e.time,
            },
            task: e.task,
            old_tid: e.old_tid,
            filename: e.filename,
            argv: e.argv,
            argv_truncated: e.argv_truncated,
            test_env: e.test_env,
        }
    }
}

#[derive(Deserialize)]
pub struct ExitFlat {
    seq: u64,
    t: u64,
    time: String,
    task: Task,
    exit_code: i32,
    status: ExitStatus,
    group_dead: bool,
}

impl From<ExitFlat> for Exit {
    fn from(x: ExitFlat) -> Exit {
        Exit {
            at: Stamp {
                seq: x.seq,
                t: x.t,
                time: x.time,
            },
            task: x.task,
            exit_code: x.exit_code,
            status: x.status,
            group_dead: x.group_dead,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eventlog::{parse::parse_record, peek_tag, Record};

    /// Every fork, exec and exit line of the fixtures reads the same through
    /// the flat structs as through the log's own.
    #[test]
    fn flat_reads_like_flattened() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "ndjson") {
                continue;
            }
            for line in std::fs::read(&path).unwrap().split(|&b| b == b'\n') {
                let same = match peek_tag(line) {
                    Some(b"fork") => serde_json::from_slice::<Fork>(line).ok().map(|f| {
                        f == Fork::from(serde_json::from_slice::<ForkFlat>(line).unwrap())
                    }),
                    Some(b"exec") => serde_json::from_slice::<Exec>(line).ok().map(|e| {
                        e == Exec::from(serde_json::from_slice::<ExecFlat>(line).unwrap())
                    }),
                    Some(b"exit") => serde_json::from_slice::<Exit>(line).ok().map(|x| {
                        x == Exit::from(serde_json::from_slice::<ExitFlat>(line).unwrap())
                    }),
                    _ => None,
                };
                assert_ne!(same, Some(false), "{}", String::from_utf8_lossy(line));
                seen += usize::from(same.is_some());
            }
        }
        assert!(seen > 100, "the fixtures hold lifecycle lines: {seen}");
    }

    /// A repeated stamp key: the flat struct refuses it, the flattened one
    /// takes it, and so does `parse_record`, as it did.
    #[test]
    fn a_line_the_flat_struct_refuses_reads_the_old_way() {
        let line = br#"{"type":"exit","seq":7,"t":5,"time":"x","seq":8,"task":{"pid":1,"tid":1,"start":2},"exit_code":0,"status":{"exited":{"code":0}},"group_dead":true}"#;
        assert!(serde_json::from_slice::<ExitFlat>(line).is_err());
        let old = serde_json::from_slice::<Exit>(line).map(Record::Exit);
        let new = parse_record(line);
        assert_eq!(
            format!("{:?}", old.map_err(|e| e.to_string())),
            format!("{:?}", new.map_err(|e| e.to_string()))
        );
    }
}
