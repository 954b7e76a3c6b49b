//! What a dead process left behind: its crash stack and its last words.
use serde::Serialize;

/// A crash's stack, as a certificate shows it.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct CrashRef {
    /// Sequence number of the crash_stack record.
    pub seq: u64,
    /// `si_addr`, for the faults that carry one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault_addr: Option<u64>,
    /// The fault in words: `address 0x0 not mapped`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<String>,
    /// How complete the stack is.
    pub completeness: crate::eventlog::StackCompleteness,
    /// What is missing and why, when not complete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Every frame of the record, innermost first.
    pub frames: Vec<crate::eventlog::CrashFrame>,
    /// Frames beyond `frames` the record left out.
    #[serde(skip_serializing_if = "is_zero_usize")]
    pub frames_left_out: usize,
    /// The innermost frames that are abort, panic or unwind machinery
    /// (`abort`, `raise`, `std::panicking::…`), folded in the headline.
    pub machinery: usize,
    /// Index into `frames` of the first frame of the program's own code
    /// (after the machinery), when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_user_frame: Option<usize>,
    /// The stack in one clause: `parse_header (src/parse.c:42) ← load_file
    /// (src/parse.c:88) ← main`.
    pub clause: String,
}

fn is_zero_usize(n: &usize) -> bool {
    *n == 0
}

/// A process's last words: the end of its stderr, as the kernel saw it.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct LastWordsRef {
    /// Sequence number of the last_words record.
    pub seq: u64,
    /// The captured end of its stderr (at most `--last-words-bytes`).
    pub text: String,
    /// Everything it wrote to stderr over its life.
    pub bytes_total: u64,
    /// `text` is only the end of what it wrote.
    pub truncated: bool,
    /// Its last write went to fd 2 while that was /dev/null: kept as
    /// evidence, never quoted in a headline (no one saw it).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub to_null: bool,
    /// The one line a headline quotes: the last line that reads like an
    /// error, else the last non-empty line. Absent when all is blank.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<String>,
}
