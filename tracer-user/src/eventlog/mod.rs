//! The event log (`events.ndjson`): the one artifact capture produces and
//! every analysis consumes. Format: docs/event-log.md.
mod fit;
mod flat;
mod frame;
mod names;
mod parse;
mod reader;
mod schema;
mod summary;
mod walltime;
mod writer;

pub use names::{errno_name, si_code_name, signal_name};
pub use parse::{from_line, peek_tag};
pub use reader::{
    is_segment, read_from, read_log, read_series, read_series_in, segment_name, stream_from,
    stream_series, stream_series_in, EventLog, Frame, LogError, Sink, LIVE, MAX_LINE_BYTES,
};
pub use schema::*;
pub use summary::{type_name, Counter, LogSummary};
pub use walltime::{is_wall_time, parse_wall_time, wall_time};
pub use writer::{LogWriter, MAX_RECORD_BYTES};
