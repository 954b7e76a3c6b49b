//! oom:mark_victim. The task running here is whoever was allocating when the
//! kernel ran out: recorded as the trigger, never as the killer.
use aya_ebpf::{helpers::bpf_probe_read_kernel_str_bytes, programs::TracePointContext};
use tracer_common::{
    DropReason, OomRecord, RecordKind, OFFSET_NONE, OOM_HAS_MEMCG, OOM_HAS_RSS, OOM_HAS_SCORE_ADJ,
};

use crate::{
    maps::{count_drop, off, view, wake_now, EVENTS},
    probe::tp_field,
    task::{comm, current, header, read, task_id, Probed, Ptr},
};

const TP_PID: usize = 8;

pub(crate) fn on_mark_victim(ctx: &TracePointContext) -> Result<u32, ()> {
    let victim_tid: i32 = tp_field(ctx, TP_PID).ok_or(())?;
    let me = current();
    let trigger = task_id::<Probed>(me).ok_or(())?;
    // OOM kills are rare and always worth context: emit all of them and let
    // user space decide what touches the run.
    let Some(mut entry) = EVENTS.reserve::<OomRecord>(0) else {
        count_drop(DropReason::RingBufFull);
        return Ok(0);
    };
    let rec = entry.as_mut_ptr();
    let field = |o: u32| -> u64 {
        if o == OFFSET_NONE {
            0
        } else {
            tp_field::<u64>(ctx, o as usize).unwrap_or(0)
        }
    };
    let mut flags = 0;
    // SAFETY: `rec` points to the `OomRecord` reserved in the ring (non-null:
    // `reserve` succeeded), written field by field before `submit`; the
    // name copy is bounded by the destination slice's length.
    unsafe {
        (*rec).hdr = header(RecordKind::OomVictim as u32);
        (*rec).trigger = trigger;
        (*rec).trigger_comm = comm::<Probed>(me);
        // The tracepoint names the victim by its host pid: meaningless in a
        // pid-namespaced view, where the model pairs it by its SIGKILL.
        (*rec).victim_tid = if view().0 == 0 { victim_tid as u32 } else { 0 };
        (*rec)._pad = 0;
        let rss_off = off(|o| &o.oom_anon_rss);
        if rss_off != OFFSET_NONE {
            flags |= OOM_HAS_RSS;
        }
        (*rec).total_vm_kb = field(off(|o| &o.oom_total_vm));
        (*rec).anon_rss_kb = field(rss_off);
        (*rec).file_rss_kb = field(off(|o| &o.oom_file_rss));
        (*rec).shmem_rss_kb = field(off(|o| &o.oom_shmem_rss));
        (*rec).pgtables_kb = field(off(|o| &o.oom_pgtables));
        let adj_off = off(|o| &o.oom_score_adj);
        (*rec).oom_score_adj = 0;
        if adj_off != OFFSET_NONE {
            if let Some(adj) = tp_field::<i16>(ctx, adj_off as usize) {
                (*rec).oom_score_adj = adj as i32;
                flags |= OOM_HAS_SCORE_ADJ;
            }
        }
        (*rec).memcg_id = 0;
        (*rec).memcg_name[0] = 0;
        if let Some(kn) = memcg_kernfs_node(me) {
            if let Some(id) = read::<u64>(kn, off(|o| &o.kernfs_id)) {
                (*rec).memcg_id = id;
                flags |= OOM_HAS_MEMCG;
            }
            if let Some(name) = read::<Ptr>(kn, off(|o| &o.kernfs_name)) {
                let _ = bpf_probe_read_kernel_str_bytes(name, &mut (*rec).memcg_name);
            }
        }
        (*rec).flags = flags;
    }
    entry.submit(wake_now());
    Ok(0)
}

/// task->cgroups->subsys[memory_cgrp_id]->cgroup->kn
#[inline(always)]
fn memcg_kernfs_node(task: Ptr) -> Option<Ptr> {
    let id = off(|o| &o.memory_cgrp_id);
    let subsys = off(|o| &o.css_set_subsys);
    if id == OFFSET_NONE || subsys == OFFSET_NONE {
        return None;
    }
    let cset: Ptr = read(task, off(|o| &o.task_cgroups))?;
    let css: Ptr = read(cset, subsys + id * 8)?;
    let cgrp: Ptr = read(css, off(|o| &o.css_cgroup))?;
    read(cgrp, off(|o| &o.cgroup_kn))
}
