//! The usual `process_*` metrics of the tracer itself, read from /proc at
//! each scrape (names as Prometheus' own client libraries export them).
use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric},
    metrics::{counter::ConstCounter, gauge::ConstGauge},
};

#[derive(Debug)]
pub(super) struct Process;

impl Collector for Process {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Ok(me) = procfs::process::Process::myself() else {
            return Ok(());
        };
        let tps = procfs::ticks_per_second() as f64;
        let page = procfs::page_size() as f64;
        if let Ok(stat) = me.stat() {
            let cpu = ConstCounter::new((stat.utime + stat.stime) as f64 / tps);
            cpu.encode(enc.encode_descriptor(
                "process_cpu_seconds",
                "User and system CPU time spent, in seconds",
                None,
                cpu.metric_type(),
            )?)?;
            gauge(
                &mut enc,
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                stat.rss as f64 * page,
            )?;
            gauge(
                &mut enc,
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes",
                stat.vsize as f64,
            )?;
            if let Some(btime) = boot_time() {
                gauge(
                    &mut enc,
                    "process_start_time_seconds",
                    "Start time of the process since the Unix epoch, in seconds",
                    btime + stat.starttime as f64 / tps,
                )?;
            }
        }
        if let Ok(n) = me.fd_count() {
            gauge(
                &mut enc,
                "process_open_fds",
                "Open file descriptors",
                n as f64,
            )?;
        }
        Ok(())
    }
}

fn gauge(enc: &mut DescriptorEncoder, name: &str, help: &str, v: f64) -> std::fmt::Result {
    let g = ConstGauge::new(v);
    g.encode(enc.encode_descriptor(name, help, None, g.metric_type())?)
}

/// `btime` of /proc/stat: boot, in seconds since the epoch.
fn boot_time() -> Option<f64> {
    std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}
