//! The event log (`events.ndjson`): the one artifact capture produces and
//! every analysis consumes. Format: docs/event-log.md.
mod authored;
mod ci;
mod fit;
mod flat;
mod frame;
mod loss;
mod names;
mod parse;
mod reader;
mod resources;
mod schema;
mod series;
mod summary;
mod walltime;
mod writer;

pub use crate::outdir::names::segment_name;
pub use ci::CiContext;
pub use names::{errno_name, si_code_name, signal_name};
pub use parse::{from_line, peek_tag};
pub use reader::{
    read_from, read_log, stream_from, EventLog, Frame, LogError, Sink, LIVE, MAX_LINE_BYTES,
};
pub use schema::*;
pub use series::{read_series, stream_dir, stream_series, Series};
pub use summary::{type_name, Counter, LogSummary};
pub use walltime::{is_wall_time, parse_wall_time, wall_time};
pub use writer::{LogWriter, MAX_RECORD_BYTES};
