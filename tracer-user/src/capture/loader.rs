//! Load the eBPF object, attach every hook through its fallback chain, and
//! report what attached and how.
use aya::{
    maps::{Array, MapData, PerCpuArray, RingBuf},
    programs::{BtfTracePoint, TracePoint},
    Btf, Ebpf, EbpfLoader,
};
use tracer_common::{DropReason, FailReason, RuntimeConfig, DROP_REASONS, FAIL_REASONS};

use super::{ebpf_log, offsets, tracefs};
use crate::{
    error::TracerError,
    eventlog::{HookStatus, PidNamespace},
};

static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/tracer-ebpf.o"));

const KILL_SYSCALLS: [&str; 6] = [
    "kill",
    "tkill",
    "tgkill",
    "rt_sigqueueinfo",
    "rt_tgsigqueueinfo",
    "pidfd_send_signal",
];

pub struct LoadOptions {
    pub ring_buffer_bytes: u32,
    pub tracer_tgid: u32,
    /// Hooks (`name`) or attach methods (`name:via`) not to use.
    pub disabled: Vec<String>,
    /// Capture stderr writes ("last words").
    pub last_words: bool,
    /// One ring record per stderr write instead of a kernel tail per
    /// process: when the bytes wanted exceed what a kernel tail holds.
    pub last_words_per_write: bool,
    /// `--all-signals`: log every signal delivery, count none.
    pub all_signals: bool,
    /// Log the eBPF side's rare failures (`--debug-ebpf`).
    pub debug_ebpf: bool,
}

impl LoadOptions {
    fn disabled(&self, what: &str) -> Result<(), String> {
        match self.disabled.iter().any(|d| d == what) {
            true => Err("disabled by --disable-hook".into()),
            false => Ok(()),
        }
    }
}

/// Loaded and attached programs. Dropping it detaches everything.
pub struct Capture {
    ebpf: Ebpf,
    pub hooks: Vec<HookStatus>,
    /// The pid namespace every reported pid is in (the tracer's own).
    pub view: PidNamespace,
    btf: Btf,
    /// After `ebpf`: dropped once the programs are gone, it flushes the last records.
    _ebpf_log: Option<ebpf_log::Forwarder>,
}

pub fn load(opts: &LoadOptions) -> Result<Capture, TracerError> {
    if !nix::unistd::geteuid().is_root() {
        return Err(TracerError::NotPrivileged);
    }
    if OBJECT.is_empty() {
        return Err(TracerError::Load(
            "this binary was built without its eBPF object; build it with `cargo xtask build`"
                .into(),
        ));
    }
    let vmlinux = offsets::load_vmlinux()?;
    let tracefs = tracefs::ensure_mounted();
    let oom_format = tracefs
        .as_ref()
        .ok()
        .and_then(|t| tracefs::format(t, "oom", "mark_victim"));
    #[allow(unused_mut)]
    let mut offsets = offsets::resolve(&vmlinux, oom_format.as_deref())?;
    // Debug builds only, for tests/debug_ebpf.rs: read the start time where
    // the group-leader pointer is, as a wrong offset would.
    #[cfg(debug_assertions)]
    if std::env::var_os("TRACER_TEST_WRONG_START_OFFSET").is_some() {
        offsets.task_start_boottime = offsets.task_group_leader;
    }
    let own_ns = super::pidns::own_ns_inum()?;
    let btf = Btf::from_sys_fs().map_err(|e| TracerError::Load(format!("kernel BTF: {e}")))?;

    let log_on = ebpf_log::wanted(opts.debug_ebpf);
    let mut loader = EbpfLoader::new();
    if !log_on {
        loader.map_max_entries("AYA_LOGS", ebpf_log::off_ring_bytes());
    }
    let mut ebpf =
        loader
            .btf(Some(&btf))
            .map_max_entries("EVENTS", opts.ring_buffer_bytes)
            .override_global("OFFSETS", &offsets, true)
            .override_global("TRACER_TGID", &opts.tracer_tgid, true)
            .override_global(
                "STDERR_PER_WRITE",
                &u32::from(opts.last_words_per_write),
                true,
            )
            .override_global("ALL_SIGNALS", &u32::from(opts.all_signals), true)
            .override_global(aya_log::LEVEL, &ebpf_log::level(log_on), true)
            .load(OBJECT)
            .map_err(|e| match e {
                aya::EbpfError::MapError(aya::maps::MapError::CreateError {
                    ref io_error, ..
                }) if io_error.raw_os_error() == Some(libc::EPERM) => TracerError::NotPrivileged,
                other => TracerError::Load(other.to_string()),
            })?;
    let ebpf_log = match log_on {
        true => Some(ebpf_log::Forwarder::start(&mut ebpf)?),
        false => None,
    };

    let mut cap = Capture {
        ebpf,
        hooks: Vec::new(),
        view: PidNamespace {
            level: 0,
            inum: own_ns,
        },
        btf,
        _ebpf_log: ebpf_log,
    };
    if own_ns != super::pidns::HOST_PID_NS_INUM {
        cap.view.level = cap.own_ns_level()?;
    }
    // Before any hook runs: every pid they report is in this view.
    cap.set_config(RuntimeConfig::default())?;
    let Capture {
        mut ebpf,
        view,
        btf,
        _ebpf_log,
        ..
    } = cap;

    let mut hooks = Vec::new();
    for hook in [
        "sched_process_fork",
        "sched_process_exec",
        "sched_process_exit",
        "signal_generate",
    ] {
        attach_btf(&mut ebpf, &btf, hook, hook).map_err(|detail| TracerError::RequiredHook {
            hook: hook.into(),
            detail,
        })?;
        hooks.push(HookStatus {
            name: hook.into(),
            via: Some("tp_btf".into()),
            attached: true,
            detail: None,
        });
    }
    hooks.push(attach_kill_syscalls(&mut ebpf, &btf, tracefs.is_ok(), opts));
    hooks.push(match &tracefs {
        Ok(_) => match opts
            .disabled("oom_mark_victim")
            .and_then(|()| attach_classic(&mut ebpf, "oom_mark_victim", "oom", &["mark_victim"]))
        {
            Ok(()) => HookStatus {
                name: "oom_mark_victim".into(),
                via: Some("tracepoint".into()),
                attached: true,
                detail: None,
            },
            Err(e) => unavailable("oom_mark_victim", e),
        },
        Err(e) => unavailable("oom_mark_victim", format!("tracefs unavailable: {e}")),
    });
    if opts.last_words {
        hooks.push(attach_last_words(&mut ebpf, tracefs.is_ok(), opts));
    }
    Ok(Capture {
        ebpf,
        hooks,
        view,
        btf,
        _ebpf_log,
    })
}

fn unavailable(name: &str, detail: String) -> HookStatus {
    log::warn!("hook {name} unavailable: {detail}");
    HookStatus {
        name: name.into(),
        via: None,
        attached: false,
        detail: Some(detail),
    }
}

/// Per-syscall tracepoints first (they fire only for these calls); if any is
/// missing, raw_syscalls filtered in the kernel (fires on every syscall).
fn attach_kill_syscalls(
    ebpf: &mut Ebpf,
    btf: &Btf,
    have_tracefs: bool,
    opts: &LoadOptions,
) -> HookStatus {
    let name = "kill_syscalls";
    if let Err(e) = opts.disabled(name) {
        return unavailable(name, e);
    }
    let enters: Vec<String> = KILL_SYSCALLS
        .iter()
        .map(|s| format!("sys_enter_{s}"))
        .collect();
    let exits: Vec<String> = KILL_SYSCALLS
        .iter()
        .map(|s| format!("sys_exit_{s}"))
        .collect();
    let classic = if let Err(e) = opts.disabled("kill_syscalls:tracepoint") {
        Err(e)
    } else if have_tracefs {
        let e: Vec<&str> = enters.iter().map(String::as_str).collect();
        let x: Vec<&str> = exits.iter().map(String::as_str).collect();
        attach_classic(ebpf, "kill_enter", "syscalls", &e)
            .and_then(|()| attach_classic(ebpf, "kill_exit", "syscalls", &x))
    } else {
        Err("tracefs unavailable".into())
    };
    let why = match classic {
        Ok(()) => {
            return HookStatus {
                name: name.into(),
                via: Some("tracepoint".into()),
                attached: true,
                detail: None,
            }
        }
        Err(e) => e,
    };
    detach_all(ebpf, "kill_enter");
    detach_all(ebpf, "kill_exit");
    match attach_btf(ebpf, btf, "raw_sys_enter", "sys_enter")
        .and_then(|()| attach_btf(ebpf, btf, "raw_sys_exit", "sys_exit"))
    {
        Ok(()) => HookStatus {
            name: name.into(),
            via: Some("raw_syscalls".into()),
            attached: true,
            detail: Some(format!(
                "syscall tracepoints unavailable ({why}); using raw_syscalls"
            )),
        },
        Err(e) => unavailable(
            name,
            format!("syscall tracepoints: {why}; raw_syscalls: {e}"),
        ),
    }
}

fn attach_last_words(ebpf: &mut Ebpf, have_tracefs: bool, opts: &LoadOptions) -> HookStatus {
    let name = "last_words";
    let res = opts
        .disabled(name)
        .and_then(|()| {
            if have_tracefs {
                Ok(())
            } else {
                Err("tracefs unavailable".into())
            }
        })
        .and_then(|()| attach_classic(ebpf, "stderr_write", "syscalls", &["sys_enter_write"]))
        .and_then(|()| attach_classic(ebpf, "stderr_writev", "syscalls", &["sys_enter_writev"]));
    match res {
        Ok(()) => HookStatus {
            name: name.into(),
            via: Some("tracepoint".into()),
            attached: true,
            detail: None,
        },
        Err(e) => {
            detach_all(ebpf, "stderr_write");
            detach_all(ebpf, "stderr_writev");
            unavailable(name, e)
        }
    }
}

fn attach_btf(ebpf: &mut Ebpf, btf: &Btf, prog: &str, tracepoint: &str) -> Result<(), String> {
    let p: &mut BtfTracePoint = program(ebpf, prog)?;
    p.load(tracepoint, btf)
        .map_err(|e| format!("load {prog}: {e}"))?;
    p.attach().map_err(|e| format!("attach {prog}: {e}"))?;
    Ok(())
}

fn attach_classic(
    ebpf: &mut Ebpf,
    prog: &str,
    category: &str,
    names: &[&str],
) -> Result<(), String> {
    let p: &mut TracePoint = program(ebpf, prog)?;
    if p.fd().is_err() {
        p.load().map_err(|e| format!("load {prog}: {e}"))?;
    }
    for name in names {
        p.attach(category, name)
            .map_err(|e| format!("{category}:{name}: {e}"))?;
    }
    Ok(())
}

fn detach_all(ebpf: &mut Ebpf, prog: &str) {
    if let Ok(p) = program::<TracePoint>(ebpf, prog) {
        let _ = p.unload();
    }
}

fn program<'a, T>(ebpf: &'a mut Ebpf, name: &str) -> Result<&'a mut T, String>
where
    &'a mut T: TryFrom<&'a mut aya::programs::Program, Error = aya::programs::ProgramError>,
{
    ebpf.program_mut(name)
        .ok_or_else(|| format!("program {name} missing from the object"))?
        .try_into()
        .map_err(|e: aya::programs::ProgramError| e.to_string())
}

impl Capture {
    /// Detach everything. Each classic syscall tracepoint costs an RCU grace
    /// period here (~70 ms on 6.x); the kernel serialises them, so closing
    /// them from several threads gains nothing (and was seen to soft-lock a
    /// 5.10 guest once): one by one, plainly.
    pub fn shutdown(self) {
        drop(self.ebpf);
    }

    pub fn ring(&mut self) -> Result<RingBuf<MapData>, TracerError> {
        let map = self
            .ebpf
            .take_map("EVENTS")
            .ok_or_else(|| TracerError::Load("EVENTS map missing".into()))?;
        RingBuf::try_from(map).map_err(|e| TracerError::Load(e.to_string()))
    }

    /// How deep the tracer's pid namespace is. No syscall says (NS_GET_PARENT
    /// stops at the caller's own namespace), but the kernel knows: the task
    /// iterator, run with a host-level view, reports every process's pid in
    /// its own namespace with the depth, the tracer's own among them.
    fn own_ns_level(&mut self) -> Result<u32, TracerError> {
        self.set_config(RuntimeConfig::default())?;
        self.list_existing()?;
        let me = std::process::id();
        let map = self
            .ebpf
            .map_mut("EVENTS")
            .ok_or_else(|| TracerError::Load("EVENTS map missing".into()))?;
        let mut ring = RingBuf::try_from(map).map_err(|e| TracerError::Load(e.to_string()))?;
        let mut level = None;
        while let Some(item) = ring.next() {
            if let Ok(super::decode::Wire::Existing(e)) = super::decode::decode(&item) {
                if e.ns.pid == me && e.ns.ns_inum == self.view.inum {
                    level = Some(e.ns.level);
                }
            }
        }
        level.ok_or_else(|| {
            TracerError::Load(format!(
                "pid namespace {}: the kernel did not report this process in it",
                self.view.inum
            ))
        })
    }

    /// Flip the runtime switches (adopting the tracer's next child). The
    /// pid view is always the tracer's own.
    pub fn set_config(&mut self, mut cfg: RuntimeConfig) -> Result<(), TracerError> {
        cfg.view_level = self.view.level;
        cfg.view_ns_inum = self.view.inum;
        let map = self
            .ebpf
            .map_mut("CONFIG")
            .ok_or_else(|| TracerError::Load("CONFIG map missing".into()))?;
        let mut arr: Array<_, RuntimeConfig> =
            Array::try_from(map).map_err(|e| TracerError::Load(e.to_string()))?;
        arr.set(0, cfg, 0)
            .map_err(|e| TracerError::Load(e.to_string()))
    }

    /// Run the task iterator: one `Existing` record per running process
    /// arrives in the ring buffer.
    pub fn list_existing(&mut self) -> Result<(), TracerError> {
        let p: &mut aya::programs::Iter =
            program(&mut self.ebpf, "existing_tasks").map_err(TracerError::Load)?;
        if p.fd().is_err() {
            p.load("task", &self.btf)
                .map_err(|e| TracerError::Load(format!("task iterator: {e}")))?;
        }
        let id = p
            .attach()
            .map_err(|e| TracerError::Load(format!("task iterator: {e}")))?;
        let link = p
            .take_link(id)
            .map_err(|e| TracerError::Load(e.to_string()))?;
        let mut file = link
            .into_file()
            .map_err(|e| TracerError::Load(e.to_string()))?;
        // Reading the iterator's file is what runs it; it prints nothing.
        std::io::copy(&mut file, &mut std::io::sink())
            .map_err(|e| TracerError::Load(format!("task iterator: {e}")))?;
        Ok(())
    }

    /// Put processes in scope (daemon seeding), with their exact start times.
    pub fn track(&mut self, keys: &[crate::eventlog::ProcKey]) -> Result<(), TracerError> {
        let map = self
            .ebpf
            .map_mut("TRACKED")
            .ok_or_else(|| TracerError::Load("TRACKED map missing".into()))?;
        let mut tracked: aya::maps::HashMap<_, u32, u64> =
            aya::maps::HashMap::try_from(map).map_err(|e| TracerError::Load(e.to_string()))?;
        for k in keys {
            tracked
                .insert(k.pid, k.start, 0)
                .map_err(|e| TracerError::Load(format!("tracking pid {}: {e}", k.pid)))?;
        }
        Ok(())
    }

    /// Processes in scope right now, from the kernel's tracked map.
    pub fn tracked(&self) -> Result<Vec<crate::eventlog::ProcKey>, TracerError> {
        let map = self
            .ebpf
            .map("TRACKED")
            .ok_or_else(|| TracerError::Load("TRACKED map missing".into()))?;
        let tracked: aya::maps::HashMap<_, u32, u64> =
            aya::maps::HashMap::try_from(map).map_err(|e| TracerError::Load(e.to_string()))?;
        let mut keys: Vec<_> = tracked
            .iter()
            .flatten()
            .map(|(pid, start)| crate::eventlog::ProcKey { pid, start })
            .collect();
        keys.sort();
        Ok(keys)
    }

    /// The stderr tails the kernel still holds (processes alive now), in
    /// order, with the bytes their writes asked for.
    pub fn stderr_tails(&self) -> Vec<(crate::eventlog::ProcKey, Vec<u8>, u64)> {
        let Some(map) = self.ebpf.map("STDERR_TAILS") else {
            return Vec::new();
        };
        let Ok(tails) = aya::maps::HashMap::<_, u32, tracer_common::StderrTail>::try_from(map)
        else {
            return Vec::new();
        };
        tails
            .iter()
            .flatten()
            .map(|(pid, t)| {
                let key = crate::eventlog::ProcKey {
                    pid,
                    start: t.task.start_ns,
                };
                let bytes = super::decode::tail_in_order(&t);
                (key, bytes, t.total.max(t.written))
            })
            .collect()
    }

    /// What the kernel is still counting for live processes (see
    /// signal_agg.rs in tracer-ebpf): per counted kind, its summary (when
    /// more than one delivery was counted) then the latest delivery, in
    /// time order.
    pub fn signal_counts(&self) -> Vec<super::decode::Wire> {
        use super::decode::Wire;
        let Some(map) = self.ebpf.map("SIGNAL_COUNTS") else {
            return Vec::new();
        };
        let Ok(counts) = aya::maps::HashMap::<_, u32, tracer_common::SignalCounts>::try_from(map)
        else {
            return Vec::new();
        };
        let mut out: Vec<(u64, Wire)> = Vec::new();
        for (_, c) in counts.iter().flatten() {
            for s in c.slots.iter().filter(|s| s.pending != 0) {
                let t = s.sample.hdr.ktime_ns;
                if s.count > 0 {
                    let summary = tracer_common::SignalSummaryRecord {
                        hdr: tracer_common::RecordHeader {
                            kind: tracer_common::RecordKind::SignalSummary as u32,
                            cpu: 0,
                            ktime_ns: s.last_ns,
                        },
                        sender: s.sample.sender,
                        target: s.sample.target,
                        sender_comm: s.sample.sender_comm,
                        target_comm: s.sample.target_comm,
                        sig: s.sample.sig,
                        count: s.count,
                        first_ns: s.first_ns,
                        last_ns: s.last_ns,
                    };
                    out.push((t, Wire::SignalSummary(summary)));
                }
                out.push((t, Wire::Signal(s.sample)));
            }
        }
        // Stable: a summary stays before its sample.
        out.sort_by_key(|(t, _)| *t);
        out.into_iter().map(|(_, w)| w).collect()
    }

    /// Per-CPU drop counters, `[cpu][reason]`.
    pub fn drops(&self) -> Result<Vec<[u64; DROP_REASONS as usize]>, TracerError> {
        let map = self
            .ebpf
            .map("DROPS")
            .ok_or_else(|| TracerError::Load("DROPS map missing".into()))?;
        let arr: PerCpuArray<_, u64> =
            PerCpuArray::try_from(map).map_err(|e| TracerError::Load(e.to_string()))?;
        let mut per_cpu: Vec<[u64; DROP_REASONS as usize]> = Vec::new();
        for reason in DropReason::ALL {
            let values = arr
                .get(&(reason as u32), 0)
                .map_err(|e| TracerError::Load(e.to_string()))?;
            for (cpu, v) in values.iter().enumerate() {
                if per_cpu.len() <= cpu {
                    per_cpu.resize(cpu + 1, [0; DROP_REASONS as usize]);
                }
                per_cpu[cpu][reason as usize] = *v;
            }
        }
        Ok(per_cpu)
    }

    /// Rare eBPF-side failures, summed over CPUs, by [`FailReason`].
    pub fn fails(&self) -> Result<[u64; FAIL_REASONS as usize], TracerError> {
        let map = self
            .ebpf
            .map("FAILS")
            .ok_or_else(|| TracerError::Load("FAILS map missing".into()))?;
        let arr: PerCpuArray<_, u64> =
            PerCpuArray::try_from(map).map_err(|e| TracerError::Load(e.to_string()))?;
        let mut sums = [0; FAIL_REASONS as usize];
        for reason in FailReason::ALL {
            let values = arr
                .get(&(reason as u32), 0)
                .map_err(|e| TracerError::Load(e.to_string()))?;
            sums[reason as usize] = values.iter().sum();
        }
        Ok(sums)
    }
}
