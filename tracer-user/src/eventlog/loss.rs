//! What a capture lost, and the one list of why: each reason's name (its
//! field in the log's `lost` object, the `reason` label of
//! `tracer_events_lost_total`), its phrase in the reports' loss line, and
//! whether it costs events. The kernel's reasons are `tracer_common`'s
//! `DropReason` and `FailReason` (their names and phrases live there, beside
//! the eBPF counters they index); the rest are user space's. The trailer,
//! report.json's warnings, report.md's loss line, the stderr summary and the
//! metrics all read [`LossReason::ALL`]; a test holds the docs to it.
use serde::{Deserialize, Serialize};
use tracer_common::{DropReason, FailReason, DROP_REASONS};

use super::schema::is_zero_u64;

/// Events the kernel could not hand over. Never hidden: every report shows it.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Loss {
    /// Ring buffer full: events dropped.
    pub ringbuf_full: u64,
    /// Tracked-process map full: processes that went untracked.
    pub tracked_map_full: u64,
    /// In-flight kill-call map full: signals that lost their syscall context.
    pub inflight_map_full: u64,
    /// Records user space could not decode.
    pub undecodable: u64,
    /// The kernel side could not read a traced process's memory (a stderr
    /// buffer, an argv): those last words or that command line are missing.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub user_read_failed: u64,
    /// A lifecycle hook read a task as a fault or an impossible value (a
    /// wrong kernel offset): that fork, exec or exit was lost.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub task_read_failed: u64,
    /// The crash ring was full: fatal signals whose stack was not captured
    /// (each death is still logged; its certificate says the stack is
    /// missing). Costs detail, not events.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub crash_ring_full: u64,
    /// Records that never reached the log file: writing it failed (a full
    /// disk). Only in a trailer kept in memory, since the file refused it.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub unwritten: u64,
    /// Why the log file stopped being written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_error: Option<String>,
    /// Records refused by the writer: even cut, each was too large for a
    /// log line (`writer::MAX_RECORD_BYTES`).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub too_large: u64,
    /// Records the writer cut to fit a log line (a snapshot's threads and
    /// fds, a leak's fds, the front of last words): what is cut is said in
    /// the record. They cost detail, not events.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub cut_to_fit: u64,
    /// Test marks past their thread's rate, not sent (`test_mark`): they
    /// cost a test's label, never an event of the run, so they are not in
    /// [`Loss::total`] — a test that floods marks cannot take the log's
    /// completeness (and the certificates resting on it) with them.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub marks_dropped: u64,
    /// Per CPU, the same counters in the order above (kernel-side only).
    #[serde(default)]
    pub per_cpu: Vec<[u64; DROP_REASONS as usize]>,
}

/// Why something was lost, in the order reports list them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LossReason {
    /// A kernel-side drop (`DROPS`, per CPU).
    Drop(DropReason),
    /// A record user space could not decode.
    Undecodable,
    /// A kernel-side read failure (`FAILS`).
    Fail(FailReason),
    /// Records that never reached the log file: writing it failed.
    Unwritten,
    /// Records too large for a log line even cut.
    TooLarge,
    /// Records cut to fit a log line.
    CutToFit,
}

impl LossReason {
    pub const ALL: [LossReason; 11] = [
        Self::Drop(DropReason::RingBufFull),
        Self::Drop(DropReason::TrackedMapFull),
        Self::Drop(DropReason::InflightMapFull),
        Self::Undecodable,
        Self::Fail(FailReason::UserRead),
        Self::Fail(FailReason::TaskRead),
        Self::Fail(FailReason::CrashRingFull),
        Self::Unwritten,
        Self::TooLarge,
        Self::CutToFit,
        Self::Fail(FailReason::MarkRate),
    ];

    /// Its field in the log's `lost` object and report.json's `log.lost`,
    /// and its `reason` label in the metrics.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Drop(r) => r.name(),
            Self::Fail(r) => r.name(),
            Self::Undecodable => "undecodable",
            Self::Unwritten => "unwritten",
            Self::TooLarge => "too_large",
            Self::CutToFit => "cut_to_fit",
        }
    }

    /// How the reports say it, before its count ("ring buffer full: 3").
    pub const fn phrase(self) -> &'static str {
        match self {
            Self::Drop(r) => r.phrase(),
            Self::Fail(r) => r.phrase(),
            Self::Undecodable => "undecodable",
            Self::Unwritten => "not written to the log",
            Self::TooLarge => "too large for a log line",
            Self::CutToFit => "cut to fit a log line",
        }
    }

    /// Whether it costs events (a death, a sender). An unreadable process
    /// memory costs last words or a command line, a full crash ring a stack,
    /// a cut record its detail: none is in [`Loss::total`].
    pub const fn loses_events(self) -> bool {
        !matches!(
            self,
            Self::Fail(FailReason::UserRead | FailReason::CrashRingFull | FailReason::MarkRate)
                | Self::CutToFit
        )
    }

    /// Whether `tracer_events_lost_total` has a series for it: a record's
    /// cut detail is not a loss a dashboard counts.
    pub const fn is_metric(self) -> bool {
        !matches!(self, Self::CutToFit)
    }
}

impl Loss {
    /// The count of one reason.
    pub fn count(&self, reason: LossReason) -> u64 {
        match reason {
            LossReason::Drop(DropReason::RingBufFull) => self.ringbuf_full,
            LossReason::Drop(DropReason::TrackedMapFull) => self.tracked_map_full,
            LossReason::Drop(DropReason::InflightMapFull) => self.inflight_map_full,
            LossReason::Undecodable => self.undecodable,
            LossReason::Fail(FailReason::UserRead) => self.user_read_failed,
            LossReason::Fail(FailReason::TaskRead) => self.task_read_failed,
            LossReason::Fail(FailReason::CrashRingFull) => self.crash_ring_full,
            LossReason::Unwritten => self.unwritten,
            LossReason::TooLarge => self.too_large,
            LossReason::CutToFit => self.cut_to_fit,
            LossReason::Fail(FailReason::MarkRate) => self.marks_dropped,
        }
    }

    /// Each reason with its count, in [`LossReason::ALL`]'s order.
    pub fn counts(&self) -> impl Iterator<Item = (LossReason, u64)> + '_ {
        LossReason::ALL.into_iter().map(|r| (r, self.count(r)))
    }

    /// Events lost: the reasons that [`LossReason::loses_events`].
    pub fn total(&self) -> u64 {
        self.counts()
            .filter(|(r, _)| r.loses_events())
            .map(|(_, n)| n)
            .sum()
    }

    /// "ring buffer full: 3, undecodable: 1" — the reasons with a count, and
    /// why the log stopped being written, if it did.
    pub fn breakdown(&self) -> String {
        let mut named: Vec<String> = self
            .counts()
            .filter(|(_, n)| *n > 0)
            .map(|(r, n)| format!("{}: {n}", r.phrase()))
            .collect();
        if let Some(e) = &self.write_error {
            named.push(format!("the log file stopped being written: {e}"));
        }
        named.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use tracer_common::{DropReason, FailReason};

    use super::{Loss, LossReason};

    /// Every reason counted 1, 2, 3… in `ALL`'s order.
    fn numbered() -> Loss {
        let mut l = Loss::default();
        let fields = [
            &mut l.ringbuf_full,
            &mut l.tracked_map_full,
            &mut l.inflight_map_full,
            &mut l.undecodable,
            &mut l.user_read_failed,
            &mut l.task_read_failed,
            &mut l.crash_ring_full,
            &mut l.unwritten,
            &mut l.too_large,
            &mut l.cut_to_fit,
            &mut l.marks_dropped,
        ];
        for (i, f) in fields.into_iter().enumerate() {
            *f = i as u64 + 1;
        }
        l
    }

    #[test]
    fn every_kernel_reason_is_listed_once() {
        for d in DropReason::ALL {
            let n = LossReason::ALL
                .iter()
                .filter(|r| **r == LossReason::Drop(d))
                .count();
            assert_eq!(n, 1, "{d:?}");
        }
        for f in FailReason::ALL {
            let n = LossReason::ALL
                .iter()
                .filter(|r| **r == LossReason::Fail(f))
                .count();
            assert_eq!(n, 1, "{f:?}");
        }
    }

    /// A reason's name is its field in the log (serde), and each field is
    /// counted by its own reason: the list and the struct cannot drift.
    #[test]
    fn names_are_the_logs_fields() {
        let l = numbered();
        let json = serde_json::to_value(&l).unwrap();
        let obj = json.as_object().unwrap();
        for (r, n) in l.counts() {
            assert_eq!(
                obj.get(r.name()),
                Some(&serde_json::json!(n)),
                "{}",
                r.name()
            );
        }
        let counters = obj.values().filter(|v| v.is_u64()).count();
        assert_eq!(
            counters,
            LossReason::ALL.len(),
            "a counter of Loss has no reason"
        );
    }

    #[test]
    fn total_counts_only_what_loses_events() {
        // 1+2+3+4 + 6 + 8+9: not user_read_failed (5), crash_ring_full (7),
        // cut_to_fit (10) or marks_dropped (11).
        assert_eq!(numbered().total(), 33);
    }

    #[test]
    fn breakdown_names_what_was_lost() {
        let l = Loss {
            ringbuf_full: 3,
            user_read_failed: 1,
            write_error: Some("No space left on device".into()),
            ..Loss::default()
        };
        assert_eq!(
            l.breakdown(),
            "ring buffer full: 3, unreadable process memory: 1, \
             the log file stopped being written: No space left on device"
        );
    }

    /// The docs list every reason: docs/metrics.md the metric's labels,
    /// docs/event-log.md the trailer's fields.
    #[test]
    fn the_docs_name_every_reason() {
        let metrics = include_str!("../../../docs/metrics.md");
        let row = metrics
            .lines()
            .find(|l| l.starts_with("| `tracer_events_lost_total`"))
            .expect("docs/metrics.md has a tracer_events_lost_total row");
        for r in LossReason::ALL {
            let named = row.contains(&format!("`{}`", r.name()));
            assert_eq!(named, r.is_metric(), "docs/metrics.md and `{}`", r.name());
        }
        let log = include_str!("../../../docs/event-log.md");
        let row = log
            .lines()
            .find(|l| l.starts_with("| `lost` |"))
            .expect("docs/event-log.md has a `lost` row");
        for r in LossReason::ALL {
            assert!(
                row.contains(&format!("`{}`", r.name())),
                "docs/event-log.md: `{}`",
                r.name()
            );
        }
    }
}
