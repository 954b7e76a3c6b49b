//! `tracer daemon --metrics-listen`: deaths and the tracer's own health as
//! Prometheus metrics (docs/metrics.md). Labels are low-cardinality by
//! construction: ranks, cause kinds, signal names, relations, errno names,
//! record types and a memcg path cut to a few components; never a pid, a
//! command line or a time.
mod conns;
mod process;
mod resources;
pub mod server;

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use prometheus_client::{
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

use crate::{
    eventlog::{Header, Loss},
    live::Findings,
};

type Labels = Vec<(String, String)>;

const DEATHS: usize = 0;
const OOM_KILLS: usize = 1;
const NEAR_MISSES: usize = 2;
const FOREIGN: usize = 3;
const EVENTS: usize = 4;
const LOST: usize = 5;

/// The labelled counters, whose new series are exposed at 0 for one scrape
/// before they count: `increase()` and `rate()` need a sample before the
/// first death of a kind, or that death would never show on a dashboard.
pub struct Staged {
    families: Vec<Family<Labels, Counter>>,
    /// (family, labels, increment) held back until a scrape has seen 0.
    pending: Mutex<Vec<(usize, Labels, u64)>>,
}

impl Staged {
    fn add(&self, family: usize, labels: Labels, n: u64) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = pending.iter_mut().find(|p| p.0 == family && p.1 == labels) {
            p.2 += n;
            return;
        }
        let f = &self.families[family];
        if let Some(c) = f.get(&labels) {
            c.inc_by(n);
        } else {
            drop(f.get_or_create(&labels));
            pending.push((family, labels, n));
        }
    }

    /// Encode `registry`; what was held back at 0 in this scrape now counts.
    pub fn encode(&self, registry: &Registry, out: &mut String) -> std::fmt::Result {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        prometheus_client::encoding::text::encode(out, registry)?;
        for (family, labels, n) in pending.drain(..) {
            self.families[family].get_or_create(&labels).inc_by(n);
        }
        Ok(())
    }
}

pub struct Metrics {
    staged: Arc<Staged>,
    /// Cumulative counts last seen, so only the difference is added.
    events_before: BTreeMap<&'static str, u64>,
    lost_before: BTreeMap<&'static str, u64>,
    memcg_depth: usize,
    resources: resources::ResourceGauges,
}

impl Metrics {
    /// The metrics, the registry a server encodes, and how it encodes it.
    pub fn new(header: &Header, memcg_depth: usize) -> (Self, Registry, Arc<Staged>) {
        let mut r = Registry::default();
        let families: Vec<Family<Labels, Counter>> = (0..6).map(|_| Family::default()).collect();
        let help = [
            ("tracer_deaths", "Death certificates, by rank, cause kind, fatal signal and the killer's relation to the victim"),
            ("tracer_oom_kills", "Processes the OOM killer ended, by memory cgroup (path cut to --metrics-memcg-depth components)"),
            ("tracer_near_misses", "kill-family calls that reached nobody, by errno"),
            ("tracer_foreign_signals", "Signals that crossed the watched scope's boundary, by direction"),
            ("tracer_events", "Records written to the event log, by type"),
            ("tracer_events_lost", "Events the capture lost, by reason"),
        ];
        for ((name, help), f) in help.into_iter().zip(&families) {
            r.register(name, help, f.clone());
        }
        let ring: Gauge = Gauge::default();
        ring.set(header.ring_buffer_bytes as i64);
        r.register(
            "tracer_ringbuf_bytes",
            "Size of the kernel ring buffer the events pass through",
            ring,
        );
        let info: Family<Labels, Gauge> = Family::default();
        info.get_or_create(&vec![
            ("version".into(), header.tracer_version.clone()),
            ("kernel".into(), header.kernel.clone()),
        ])
        .set(1);
        r.register(
            "tracer_build_info",
            "The tracer's version and the kernel it runs on",
            info,
        );
        r.register_collector(Box::new(process::Process));
        let resources = resources::ResourceGauges::register(&mut r);
        let staged = Arc::new(Staged {
            families,
            pending: Mutex::new(Vec::new()),
        });
        let m = Self {
            staged: staged.clone(),
            events_before: BTreeMap::new(),
            lost_before: BTreeMap::new(),
            memcg_depth,
            resources,
        };
        (m, r, staged)
    }

    /// Count what is new.
    pub fn observe(&self, f: &Findings) {
        for c in &f.certificates {
            let signal = c
                .cause
                .signal
                .as_ref()
                .map_or_else(|| "none".to_string(), |s| s.sig_name.clone());
            let relation = c
                .killer
                .as_ref()
                .map_or_else(|| "none".to_string(), |k| k.relation.as_str().to_string());
            let labels = vec![
                ("rank".into(), c.rank.as_str().into()),
                ("cause".into(), c.cause.kind.as_str().into()),
                ("signal".into(), signal),
                ("killer_relation".into(), relation),
            ];
            self.staged.add(DEATHS, labels, 1);
            if let Some(oom) = &c.oom {
                let path = oom.memcg.as_ref().and_then(|m| m.path.as_deref());
                let memcg = memcg_label(path, self.memcg_depth);
                self.staged.add(OOM_KILLS, vec![("memcg".into(), memcg)], 1);
            }
        }
        for n in &f.near_misses {
            let errno = n.errno.clone().unwrap_or_else(|| "none".into());
            self.staged
                .add(NEAR_MISSES, vec![("errno".into(), errno)], n.count);
        }
        // Past the analysis's cap on listed kinds: counted, errno unknown.
        if f.near_misses_unlisted > 0 {
            let label = vec![("errno".into(), "unlisted".into())];
            self.staged.add(NEAR_MISSES, label, f.near_misses_unlisted);
        }
        for s in &f.foreign_signals {
            let direction = vec![("direction".into(), s.direction.as_str().into())];
            self.staged.add(FOREIGN, direction, 1);
        }
    }

    /// The watched cgroup's latest resource sample.
    pub fn resources(&self, r: &crate::eventlog::Resources) {
        self.resources.set(r);
    }

    /// The log's records by type and the loss counters, both cumulative.
    pub fn totals(&mut self, events: &BTreeMap<&'static str, u64>, lost: &Loss) {
        for (ty, n) in events {
            let before = self.events_before.insert(ty, *n).unwrap_or(0);
            let labels = vec![("type".into(), ty.to_string())];
            self.staged.add(EVENTS, labels, n.saturating_sub(before));
        }
        for (reason, n) in lost.counts().filter(|(r, _)| r.is_metric()) {
            let reason = reason.name();
            let before = self.lost_before.insert(reason, n).unwrap_or(0);
            // Every reason is exported from the start, so a rate is 0, not absent.
            let labels = vec![("reason".into(), reason.into())];
            self.staged.add(LOST, labels, n.saturating_sub(before));
        }
    }
}

/// The first `depth` components of a memcg path ("/" for the root), each
/// with the ids a container runtime, Kubernetes or systemd puts in cgroup
/// names replaced ([`memcg_component`]): a container's or a job's own id
/// would make a series per job (`/system.slice/docker-<64 hex>.scope` at
/// the default depth 2 is one series per container, for ever, in a daemon
/// that runs for days). What is left is the node's cgroup layout: the same
/// few series whatever ran.
pub fn memcg_label(path: Option<&str>, depth: usize) -> String {
    let Some(path) = path else {
        return "unknown".into();
    };
    let parts: Vec<String> = path
        .split('/')
        .filter(|p| !p.is_empty())
        .take(depth)
        .map(memcg_component)
        .collect();
    format!("/{}", parts.join("/"))
}

struct IdRules {
    uuid: regex::Regex,
    hex: regex::Regex,
    num: regex::Regex,
}

fn id_rules() -> &'static IdRules {
    static R: std::sync::OnceLock<IdRules> = std::sync::OnceLock::new();
    R.get_or_init(|| IdRules {
        // Kubernetes writes a pod's uid with `_` in systemd slice names.
        uuid: regex::Regex::new(
            r"[0-9a-fA-F]{8}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{4}[-_][0-9a-fA-F]{12}",
        )
        .expect("uuid pattern"),
        // Container ids (64 hex), systemd's transient unit ids (32 hex).
        hex: regex::Regex::new(r"[0-9a-fA-F]{12,}").expect("hex pattern"),
        // session-12.scope, user-1000.slice, a GitLab job's numbered cgroup.
        num: regex::Regex::new(r"\b[0-9]+\b").expect("number pattern"),
    })
}

/// One cgroup name with its ids replaced: `docker-<id>.scope`,
/// `cri-containerd-<id>.scope`, `kubepods-burstable-pod<id>.slice`,
/// `pod<id>`, `session-<n>.scope`, `run-<id>.scope`.
pub fn memcg_component(name: &str) -> String {
    let r = id_rules();
    let s = r.uuid.replace_all(name, "<id>");
    let s = r.hex.replace_all(&s, "<id>");
    r.num.replace_all(&s, "<n>").into_owned()
}

#[cfg(test)]
mod tests {
    use super::memcg_label;

    /// A CI node's container and job ids never reach the label: a hundred
    /// containers, pods and sessions are one series each way they are laid
    /// out, at any depth.
    #[test]
    fn container_and_job_ids_are_one_series() {
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..100u64 {
            let id = format!("{:064x}", (i + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let pod = format!("{:08x}_1b2c_4d5e_8f90_{:012x}", i * 7919, i * 104_729 + 1);
            for path in [
                format!("/system.slice/docker-{id}.scope"),
                format!("/docker/{id}"),
                format!(
                    "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{pod}.slice/cri-containerd-{id}.scope"
                ),
                format!("/kubepods/besteffort/pod{}/{id}", pod.replace('_', "-")),
                format!("/user.slice/user-{}.slice/session-{i}.scope", 1000 + i % 3),
                format!("/system.slice/run-r{:032x}.scope", i + 1),
            ] {
                seen.insert(memcg_label(Some(&path), 8));
            }
        }
        let want: std::collections::BTreeSet<String> = [
            "/system.slice/docker-<id>.scope",
            "/docker/<id>",
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<id>.slice/cri-containerd-<id>.scope",
            "/kubepods/besteffort/pod<id>/<id>",
            "/user.slice/user-<n>.slice/session-<n>.scope",
            "/system.slice/run-r<id>.scope",
        ]
        .into_iter()
        .map(String::from)
        .collect();
        assert_eq!(seen, want);
        // Names without ids stay as they are.
        assert_eq!(
            memcg_label(Some("/system.slice/actions.runner.o-r.runner-1.service"), 4),
            "/system.slice/actions.runner.o-r.runner-<n>.service"
        );
        assert_eq!(
            memcg_label(Some("/ubuntu2204.slice"), 2),
            "/ubuntu2204.slice"
        );
    }

    #[test]
    fn memcg_cut_to_depth() {
        let p = Some("/kubepods.slice/kubepods-burstable.slice/kubepods-pod1.slice/cri-abc.scope");
        assert_eq!(
            memcg_label(p, 2),
            "/kubepods.slice/kubepods-burstable.slice"
        );
        assert_eq!(memcg_label(Some("/"), 2), "/");
        assert_eq!(memcg_label(Some("/a"), 2), "/a");
        assert_eq!(memcg_label(None, 2), "unknown");
        assert_eq!(memcg_label(p, 0), "/");
    }
}
