//! Load the eBPF object, hand it the kernel's offsets, attach every hook
//! (hooks/), and talk to its maps.
use aya::{
    maps::{Array, MapData, PerCpuArray, RingBuf},
    Btf, Ebpf, EbpfLoader,
};
use tracer_common::{
    DropReason, FailReason, KillAbi, RuntimeConfig, SyscallArch, DROP_REASONS, FAIL_REASONS,
};

use super::{
    ebpf_log,
    hooks::{self, program, Disabled, Subset},
    offset_cache, offsets, tracefs,
};
use crate::{
    error::{LoadError, TracerError},
    eventlog::{HookStatus, PidNamespace},
};

static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/tracer-ebpf.o"));

/// Default `--ring-buffer-size`. Measured (BENCHMARKS.md, knee table): no
/// loss down to 1 MiB at the highest rate this machine reaches (~89k
/// events/s); 4 MiB keeps 4× of margin. The ring's pages are mapped twice,
/// so it counts 2× its size in the tracer's RSS (16 MiB counted 32 MB).
pub const DEFAULT_RING_BYTES: u32 = 4 << 20;

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
    /// Count the programs' runs and time (`--program-stats`).
    pub program_stats: bool,
}

/// Loaded and attached programs. Dropping it detaches everything.
/// A live process's kernel stderr tail, read at the end of a run.
pub struct LiveTail {
    pub key: crate::eventlog::ProcKey,
    pub bytes: Vec<u8>,
    pub total: u64,
    /// Its last write went to /dev/null.
    pub to_null: bool,
}

pub struct Capture {
    ebpf: Ebpf,
    pub hooks: Vec<HookStatus>,
    /// The pid namespace every reported pid is in (the tracer's own).
    pub view: PidNamespace,
    /// After `ebpf`: dropped once the programs are gone, it flushes the last records.
    _ebpf_log: Option<ebpf_log::Forwarder>,
    /// `--program-stats`: the kernel counts run time while this is open.
    stats: Option<std::os::fd::OwnedFd>,
}

const REQUIRED_TP_BTF: [&str; 4] = [
    "sched_process_fork",
    "sched_process_exec",
    "sched_process_exit",
    "signal_generate",
];

/// The exec hook's programs, the first that loads wins: the envp walk by
/// `bpf_loop` (5.17+; 21,457 verified instructions on 6.18 against
/// ~200,000), then unrolled (tracer-ebpf/src/exec_env.rs).
const EXEC_CHAIN: [hooks::Variant; 2] = [
    ("sched_process_exec", "bpf_loop"),
    ("sched_process_exec_unrolled", "unrolled"),
];

pub fn load(opts: &LoadOptions) -> Result<Capture, TracerError> {
    if !nix::unistd::geteuid().is_root() {
        return Err(TracerError::NotPrivileged);
    }
    if OBJECT.is_empty() {
        return Err(LoadError::NoObject.into());
    }
    let tracefs = tracefs::ensure_mounted();
    let oom_format = tracefs
        .as_ref()
        .ok()
        .and_then(|t| tracefs::format(t, "oom", "mark_victim"));
    let mut offsets = btf_offsets()?;
    offsets::apply_oom_format(&mut offsets, oom_format.as_deref());
    // Debug builds only, for tests/kernel/debug_ebpf.rs: read the start time where
    // the group-leader pointer is, as a wrong offset would.
    #[cfg(debug_assertions)]
    if std::env::var_os("TRACER_TEST_WRONG_START_OFFSET").is_some() {
        offsets.task_start_boottime = offsets.task_group_leader;
    }
    let own_ns = super::pidns::own_ns_inum()?;
    // `EbpfLoader::new` parses vmlinux BTF for itself; we need our own copy
    // for the programs' loads, and `.btf()` would replace its copy anyway:
    // drop it first so only one parsed BTF is ever alive (peak RSS ~30 MB
    // instead of ~40; parsing both on two threads saved ~40 ms, measured).
    let log_on = ebpf_log::wanted(opts.debug_ebpf);
    let mut loader = EbpfLoader::new();
    loader.btf(None);
    if !log_on {
        loader.map_max_entries("AYA_LOGS", ebpf_log::off_ring_bytes());
    }
    let btf = Btf::from_sys_fs().map_err(LoadError::KernelBtf)?;
    let abi = SyscallArch::HOST.map_or(KillAbi::NONE, |arch| arch.abi);

    let log_level = ebpf_log::level(log_on);
    let (per_write, all_signals) = (
        u32::from(opts.last_words_per_write),
        u32::from(opts.all_signals),
    );
    let mut ebpf = loader
        .btf(Some(&btf))
        .map_max_entries("EVENTS", opts.ring_buffer_bytes)
        .override_global("OFFSETS", &offsets, true)
        .override_global("TRACER_TGID", &opts.tracer_tgid, true)
        .override_global("STDERR_PER_WRITE", &per_write, true)
        .override_global("ALL_SIGNALS", &all_signals, true)
        .override_global("KILL_ABI", &abi, true)
        .override_global(aya_log::LEVEL, &log_level, true)
        .load(OBJECT)
        .map_err(|e| match e {
            aya::EbpfError::MapError(aya::maps::MapError::CreateError { ref io_error, .. })
                if io_error.raw_os_error() == Some(nix::errno::Errno::EPERM as i32) =>
            {
                TracerError::NotPrivileged
            }
            other => LoadError::Object(other).into(),
        })?;
    drop(loader);
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
        _ebpf_log: ebpf_log,
        stats: None,
    };
    // Loaded now, so the parsed BTF (~15 MB) need not outlive start-up.
    let it: &mut aya::programs::Iter = program(&mut cap.ebpf, "existing_tasks")
        .map_err(|_| LoadError::ProgramMissing("existing_tasks"))?;
    it.load("task", &btf).map_err(LoadError::TaskIter)?;
    if own_ns != super::pidns::HOST_PID_NS_INUM {
        cap.view.level = cap.own_ns_level()?;
    }
    // Before any hook runs: every pid they report is in this view.
    cap.set_config(RuntimeConfig::default())?;

    let off = Disabled(&opts.disabled);
    let have_tracefs = tracefs.is_ok();
    let exec = "sched_process_exec";
    let others: Vec<&str> = REQUIRED_TP_BTF.into_iter().filter(|h| *h != exec).collect();
    let mut all: Vec<_> = cap.ebpf.programs_mut().collect();
    let mut required = Subset::take(&mut all, |n| {
        others.contains(&n) || EXEC_CHAIN.iter().any(|(p, _)| *p == n)
    });
    let mut kill = Subset::take(&mut all, hooks::is_kill_program);
    let mut crash = Subset::take(&mut all, hooks::is_crash_program);
    drop(all);
    // The kill family's and crash stacks' chains climb on threads of their
    // own beside the required programs' loads: verification is most of
    // start-up, and each of these is independent of the others (last words
    // wait for the kill family's rung). Measured on the AMD EPYC guest:
    // the chains, one after the other after the required programs, took
    // 74 of a run's 205 ms.
    let (loaded, kill, crash) = std::thread::scope(|s| {
        let kill = s.spawn(|| hooks::attach_kill_syscalls(&mut kill, &btf, have_tracefs, &off));
        let crash = s.spawn(|| hooks::attach_crash_stacks(&mut crash, &btf, &off));
        let loaded =
            hooks::load_btf_beside(&mut required, &btf, &others, (exec, &EXEC_CHAIN), &off);
        let join = |h: std::thread::ScopedJoinHandle<'_, HookStatus>| {
            h.join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        };
        (loaded, join(kill), join(crash))
    });
    let (exec_prog, exec_detail) =
        loaded.map_err(|(hook, detail)| TracerError::RequiredHook { hook, detail })?;
    for hook in REQUIRED_TP_BTF {
        let (prog, detail) = match hook == exec {
            true => (exec_prog, exec_detail.clone()),
            false => (hook, None),
        };
        hooks::attach_btf(&mut required, &btf, prog, hook).map_err(|detail| {
            TracerError::RequiredHook {
                hook: hook.into(),
                detail,
            }
        })?;
        cap.hooks.push(hooks::attached(hook, "tp_btf", detail));
    }
    drop(required);
    let ebpf = &mut cap.ebpf;
    let kill_via = kill.via.clone();
    cap.hooks.push(kill);
    cap.hooks.push(hooks::attach_oom(ebpf, &tracefs, &off));
    cap.hooks.push(crash);
    if opts.last_words {
        cap.hooks.push(hooks::attach_last_words(
            ebpf,
            &btf,
            have_tracefs,
            kill_via.as_deref(),
            &off,
        ));
    }
    drop(btf);
    release_heap();
    if opts.program_stats {
        cap.stats = Some(super::program_stats::enable()?);
    }
    Ok(cap)
}

/// The BTF-derived offsets: from the per-kernel cache when it holds them,
/// else parsed (and the cache written for the next run).
fn btf_offsets() -> Result<tracer_common::KernelOffsets, TracerError> {
    let dir = std::path::Path::new(offset_cache::CACHE_DIR);
    let key = std::fs::File::open(offsets::VMLINUX_BTF)
        .and_then(offset_cache::key)
        .ok();
    if let Some(o) = key.and_then(|k| offset_cache::load(dir, &k)) {
        log::debug!("kernel offsets from the cache");
        return Ok(o);
    }
    // The raw and parsed BTF (tens of MB of heap) live only for this call.
    let o = offsets::resolve_btf(&offsets::load_vmlinux()?)?;
    let Some(key) = key else { return Ok(o) };
    offset_cache::store(dir, &key, &o);
    Ok(o)
}

/// Give the freed heap back to the kernel. Parsing vmlinux BTF (btf-rs for
/// the offsets, aya for the loader) peaks at tens of MB; freed, glibc keeps
/// it mapped unless asked, and it would count in RSS for the whole run. A
/// daemon asks again after each look (commands/daemon/watch.rs): a look's
/// analysis frees what it built, in holes glibc keeps.
pub fn release_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks glibc's own arenas.
    unsafe {
        libc::malloc_trim(0);
    }
}

impl Capture {
    /// `--program-stats`' figures so far (none without it).
    pub fn program_stats(&self) -> Vec<crate::eventlog::ProgramStat> {
        match self.stats {
            Some(_) => super::program_stats::read(&self.ebpf),
            None => Vec::new(),
        }
    }

    /// Detach everything. Each classic tracepoint still attached costs an
    /// RCU grace period (~35–80 ms); the kernel serialises them, so closing
    /// them from several threads gains nothing (and was seen to soft-lock a
    /// 5.10 guest once). Fewer of them (hooks/), and the rest closed by a
    /// child after the tracer is gone (teardown.rs).
    pub fn shutdown(self) {
        let holder = super::teardown::hand_over_hooks();
        if let Some(h) = &holder {
            // With its start time: the pid alone could be recycled.
            let start = super::teardown::start_time(h.pid).unwrap_or_default();
            log::debug!("hooks detach in pid {} start {start}", h.pid);
        }
        drop(self.ebpf);
        // Our references are gone: the holder's are the last ones now.
        drop(holder);
    }

    pub fn ring(&mut self) -> Result<RingBuf<MapData>, TracerError> {
        let map = self
            .ebpf
            .take_map("EVENTS")
            .ok_or(LoadError::MapMissing("EVENTS"))?;
        Ok(RingBuf::try_from(map).map_err(map_err("EVENTS"))?)
    }

    /// The crash ring (`CRASHES`): one record per fatal crash-class signal.
    pub fn crash_ring(&mut self) -> Result<RingBuf<MapData>, TracerError> {
        let map = self
            .ebpf
            .take_map("CRASHES")
            .ok_or(LoadError::MapMissing("CRASHES"))?;
        Ok(RingBuf::try_from(map).map_err(map_err("CRASHES"))?)
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
            .ok_or(LoadError::MapMissing("EVENTS"))?;
        let mut ring = RingBuf::try_from(map).map_err(map_err("EVENTS"))?;
        let mut level = None;
        while let Some(item) = ring.next() {
            if let Ok(super::decode::Wire::Existing(e)) = super::decode::decode(&item) {
                if e.ns.pid == me && e.ns.ns_inum == self.view.inum {
                    level = Some(e.ns.level);
                }
            }
        }
        Ok(level.ok_or(LoadError::PidNsLevel(self.view.inum))?)
    }

    /// Flip the runtime switches (adopting the tracer's next child). The
    /// pid view is always the tracer's own.
    pub fn set_config(&mut self, mut cfg: RuntimeConfig) -> Result<(), TracerError> {
        cfg.view_level = self.view.level;
        cfg.view_ns_inum = self.view.inum;
        let map = self
            .ebpf
            .map_mut("CONFIG")
            .ok_or(LoadError::MapMissing("CONFIG"))?;
        let mut arr: Array<_, RuntimeConfig> = Array::try_from(map).map_err(map_err("CONFIG"))?;
        Ok(arr.set(0, cfg, 0).map_err(map_err("CONFIG"))?)
    }

    /// Run the task iterator: one `Existing` record per running process
    /// arrives in the ring buffer.
    pub fn list_existing(&mut self) -> Result<(), TracerError> {
        let p: &mut aya::programs::Iter = program(&mut self.ebpf, "existing_tasks")
            .map_err(|_| LoadError::ProgramMissing("existing_tasks"))?;
        let id = p.attach().map_err(LoadError::TaskIter)?;
        let link = p.take_link(id).map_err(LoadError::TaskIter)?;
        let mut file = link
            .into_file()
            .map_err(|e| LoadError::TaskIterRead(std::io::Error::other(e)))?;
        // Reading the iterator's file is what runs it; it prints nothing.
        std::io::copy(&mut file, &mut std::io::sink()).map_err(LoadError::TaskIterRead)?;
        Ok(())
    }

    /// Put processes in scope (daemon seeding), with their exact start times.
    pub fn track(&mut self, keys: &[crate::eventlog::ProcKey]) -> Result<(), TracerError> {
        let map = self
            .ebpf
            .map_mut("TRACKED")
            .ok_or(LoadError::MapMissing("TRACKED"))?;
        let mut tracked: aya::maps::HashMap<_, u32, u64> =
            aya::maps::HashMap::try_from(map).map_err(map_err("TRACKED"))?;
        for k in keys {
            tracked
                .insert(k.pid, k.start, 0)
                .map_err(|source| LoadError::Track { pid: k.pid, source })?;
        }
        Ok(())
    }

    /// Processes in scope right now, from the kernel's tracked map.
    pub fn tracked(&self) -> Result<Vec<crate::eventlog::ProcKey>, TracerError> {
        let map = self
            .ebpf
            .map("TRACKED")
            .ok_or(LoadError::MapMissing("TRACKED"))?;
        let tracked: aya::maps::HashMap<_, u32, u64> =
            aya::maps::HashMap::try_from(map).map_err(map_err("TRACKED"))?;
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
    pub fn stderr_tails(&self) -> Vec<LiveTail> {
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
                LiveTail {
                    key,
                    bytes: super::decode::tail_in_order(&t),
                    total: t.total.max(t.written),
                    to_null: t.flags & tracer_common::STDERR_TO_NULL != 0,
                }
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
                            _pad: 0,
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

    /// Kill-family calls the kernel counted instead of logging
    /// (kill_folds.rs in tracer-ebpf): each kind's latest call, its `count`
    /// the calls it stands for. `Some((tgid, start_ns))`: that exited
    /// process's, taken out of the map (a stale entry stops the kernel
    /// counting for the pid's next process); `None`: everyone's, at the stop,
    /// in time order.
    pub fn take_kill_folds(&mut self, of: Option<(u32, u64)>) -> Vec<super::decode::Wire> {
        use tracer_common::KillFolds;
        let Some(map) = self.ebpf.map_mut("KILL_FOLDS") else {
            return Vec::new();
        };
        let Ok(mut folds) = aya::maps::HashMap::<_, u32, KillFolds>::try_from(map) else {
            return Vec::new();
        };
        let entries: Vec<KillFolds> = match of {
            Some((tgid, start)) => match folds.get(&tgid, 0) {
                Ok(f) if f.start_ns == start => {
                    let _ = folds.remove(&tgid);
                    vec![f]
                }
                _ => Vec::new(),
            },
            None => folds.iter().flatten().map(|(_, f)| f).collect(),
        };
        let mut out: Vec<_> = entries
            .iter()
            .flat_map(|f| f.slots.iter())
            .filter(|s| s.used != 0 && s.rec.count > 0)
            .map(|s| s.rec)
            .collect();
        out.sort_by_key(|r| r.hdr.ktime_ns);
        out.into_iter().map(super::decode::Wire::KillCall).collect()
    }

    /// Per-CPU drop counters, `[cpu][reason]`.
    pub fn drops(&self) -> Result<Vec<[u64; DROP_REASONS as usize]>, TracerError> {
        let map = self
            .ebpf
            .map("DROPS")
            .ok_or(LoadError::MapMissing("DROPS"))?;
        let arr: PerCpuArray<_, u64> = PerCpuArray::try_from(map).map_err(map_err("DROPS"))?;
        let mut per_cpu: Vec<[u64; DROP_REASONS as usize]> = Vec::new();
        for reason in DropReason::ALL {
            let values = arr.get(&(reason as u32), 0).map_err(map_err("DROPS"))?;
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
            .ok_or(LoadError::MapMissing("FAILS"))?;
        let arr: PerCpuArray<_, u64> = PerCpuArray::try_from(map).map_err(map_err("FAILS"))?;
        let mut sums = [0; FAIL_REASONS as usize];
        for reason in FailReason::ALL {
            let values = arr.get(&(reason as u32), 0).map_err(map_err("FAILS"))?;
            sums[reason as usize] = values.iter().sum();
        }
        Ok(sums)
    }
}

fn map_err(map: &'static str) -> impl Fn(aya::maps::MapError) -> LoadError {
    move |source| LoadError::Map { map, source }
}

#[cfg(test)]
mod tests {
    use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};

    /// `call` with src_reg 1 (BPF_PSEUDO_CALL): a bpf-to-bpf call.
    fn is_pseudo_call(insn: &[u8]) -> bool {
        insn[0] == 0x85 && insn[1] >> 4 == 1
    }

    /// `call 12`: the bpf_tail_call helper.
    fn is_tail_call(insn: &[u8]) -> bool {
        insn[0] == 0x85 && insn[1] >> 4 == 0 && insn[4..8] == 12i32.to_le_bytes()
    }

    /// arm64 kernels before 6.0 (and any JIT without
    /// `bpf_jit_supports_subprog_tailcalls`) refuse a program that both
    /// tail-calls and makes bpf-to-bpf calls: `raw_sys_enter` would not
    /// load, and the kill family would lose its raw_syscalls rung there.
    /// An aya-log call is such a call (each log site is a subprogram).
    #[test]
    fn programs_that_tail_call_make_no_bpf_to_bpf_call() {
        assert!(
            !super::OBJECT.is_empty(),
            "no eBPF object embedded: build it first (cargo xtask build-ebpf)"
        );
        let file = object::File::parse(super::OBJECT).unwrap();
        let mut tail_callers = Vec::new();
        for sym in file.symbols() {
            let Some(index) = sym.section_index() else {
                continue;
            };
            let section = file.section_by_index(index).unwrap();
            // Programs: global functions outside .text (their own sections).
            if sym.kind() != SymbolKind::Text || !sym.is_global() || section.name() == Ok(".text") {
                continue;
            }
            let data = section.data().unwrap();
            let (at, len) = (sym.address() as usize, sym.size() as usize);
            let insns: Vec<&[u8]> = data[at..at + len].chunks(8).collect();
            if insns.iter().any(|i| is_tail_call(i)) {
                let name = sym.name().unwrap().to_string();
                assert!(
                    !insns.iter().any(|i| is_pseudo_call(i)),
                    "{name} tail-calls and makes a bpf-to-bpf call"
                );
                tail_callers.push(name);
            }
        }
        assert_eq!(tail_callers, ["raw_sys_enter"]);
    }
}
