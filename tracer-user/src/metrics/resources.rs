//! The watched cgroup's resources (`daemon --cgroup`) as gauges: the
//! latest sample's figures, cumulative ones as the kernel counts them.
//! Bounded labels: an event name (4), a resource (3) and a stall kind (2);
//! never a process, a test or a path.
use std::sync::atomic::AtomicU64;

use prometheus_client::{
    metrics::{family::Family, gauge::Gauge},
    registry::Registry,
};

use crate::eventlog::Resources;

type Labels = Vec<(String, String)>;
type F64 = Gauge<f64, AtomicU64>;

#[derive(Default)]
pub(super) struct ResourceGauges {
    memory: Gauge,
    limit: Gauge,
    events: Family<Labels, Gauge>,
    cpu: F64,
    throttled: F64,
    throttled_periods: Gauge,
    stall: Family<Labels, F64>,
}

impl ResourceGauges {
    pub(super) fn register(r: &mut Registry) -> Self {
        let g = Self::default();
        r.register(
            "tracer_cgroup_memory_bytes",
            "Memory charged to the watched cgroup",
            g.memory.clone(),
        );
        r.register(
            "tracer_cgroup_memory_limit_bytes",
            "The lowest memory limit of the watched cgroup and its ancestors (0: none)",
            g.limit.clone(),
        );
        r.register(
            "tracer_cgroup_memory_events",
            "The limit's memory events as the kernel counts them, by event (high, max, oom, \
             oom_kill; on cgroup v1 max is failcnt)",
            g.events.clone(),
        );
        r.register(
            "tracer_cgroup_cpu_seconds",
            "CPU time the watched cgroup used (cumulative)",
            g.cpu.clone(),
        );
        r.register(
            "tracer_cgroup_cpu_throttled_seconds",
            "Time the watched cgroup was throttled by its CPU quota (cumulative)",
            g.throttled.clone(),
        );
        r.register(
            "tracer_cgroup_cpu_throttled_periods",
            "Quota periods in which the watched cgroup was throttled (cumulative)",
            g.throttled_periods.clone(),
        );
        r.register(
            "tracer_cgroup_pressure_stall_seconds",
            "Time some (or all) tasks stalled, by resource and kind (cumulative; the machine's \
             where the cgroup has no pressure files)",
            g.stall.clone(),
        );
        g
    }

    pub(super) fn set(&self, r: &Resources) {
        if let Some(m) = &r.memory {
            self.memory.set(m.usage as i64);
            self.limit.set(m.limit.unwrap_or(0) as i64);
            let e = &m.events;
            for (name, n) in [
                ("high", e.high),
                ("max", e.max),
                ("oom", e.oom),
                ("oom_kill", e.oom_kill),
            ] {
                self.events
                    .get_or_create(&vec![("event".into(), name.into())])
                    .set(n as i64);
            }
        }
        if let Some(c) = &r.cpu {
            self.cpu.set(c.usage_us as f64 / 1e6);
            if let Some(t) = &c.throttling {
                self.throttled.set(t.throttled_us as f64 / 1e6);
                self.throttled_periods.set(t.throttled as i64);
            }
        }
        let Some(p) = &r.pressure else { return };
        for (resource, s) in [("memory", p.memory), ("cpu", p.cpu), ("io", p.io)] {
            let Some(s) = s else { continue };
            for (kind, us) in [("some", s.some_us), ("full", s.full_us)] {
                let labels = vec![
                    ("resource".into(), resource.into()),
                    ("kind".into(), kind.into()),
                ];
                self.stall.get_or_create(&labels).set(us as f64 / 1e6);
            }
        }
    }
}
