//! The timeline picture: one lane per process that matters, spawn and death
//! marks, signal arrows from the sender's lane to the receiver's at the time
//! of the signal, near misses, OOM kills, leaks and snapshots. Inline SVG.
use std::{collections::BTreeMap, fmt::Write as _};

use super::{
    esc,
    lanes::{self, key, EndClass, Key, Lane, Lanes},
    marks,
    scale::{Scale, LABEL_W, PLOT_W, TOP},
    Context,
};
use crate::{
    analysis::{wording as w, ProcRef},
    report::Report,
};

const RIGHT: f64 = 40.0;
const LANE_H: f64 = 22.0;
/// Beyond these, marks are counted instead of drawn.
const MAX_ARROWS: usize = 3000;
const MAX_MISSES: usize = 1000;

struct Arrow {
    from: Key,
    to: Key,
    t: u64,
    class: String,
    title: String,
    /// The signal's name on the arrow, for a kill: read without hovering.
    label: Option<String>,
}

/// A near miss drawn on its sender's lane: (sender, time, tooltip).
type Miss<'a> = (&'a ProcRef, u64, String);
/// A signal the kernel raised, marked on the victim's lane: (lane, time, tooltip).
type KernelMark = (Key, u64, String);

/// The SVG and a sentence about what was left out (empty when nothing was).
pub(super) fn svg(r: &Report, cx: &Context) -> (String, String, Scale) {
    let Lanes { lanes, dropped } = lanes::pick(r, cx);
    let row: BTreeMap<Key, usize> = lanes.iter().enumerate().map(|(i, l)| (l.key, i)).collect();
    let y = |k: &Key| row.get(k).map(|&i| TOP + i as f64 * LANE_H + LANE_H / 2.0);

    let (arrows, kernel_marks) = signal_arrows(r, &lanes);
    let misses = near_misses(r, cx);
    let snaps: Vec<(u64, String)> = r
        .snapshots
        .iter()
        .filter_map(|s| Some((cx.seq_t(s.seq)?, s.reason.clone())))
        .collect();

    let sc = time_scale(r, &lanes, &arrows, &misses, &snaps);
    let t0 = sc.t0;
    let height = TOP + lanes.len() as f64 * LANE_H + 10.0;
    let width = LABEL_W + PLOT_W + RIGHT;

    let mut o = String::new();
    let _ = write!(
        o,
        "<svg id=\"timeline-svg\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" \
         height=\"{height}\" viewBox=\"0 0 {width} {height}\" role=\"img\" \
         aria-label=\"process timeline\">\n<defs><marker id=\"ah\" viewBox=\"0 0 10 10\" \
         refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\">\
         <path d=\"M0,0 L10,5 L0,10 z\" fill=\"context-stroke\"/></marker></defs>\n"
    );
    marks::axis(&mut o, &sc, height);
    for (i, l) in lanes.iter().enumerate() {
        draw_lane(&mut o, i, l, &sc, t0, width);
    }
    draw_snapshots(&mut o, &snaps, &sc, height);
    let drawn = draw_arrows(&mut o, &arrows, &y, &sc);
    draw_kernel_marks(&mut o, &kernel_marks, &y, &sc);
    let missed = draw_misses(&mut o, &misses, &y, &sc);
    o.push_str("</svg>\n");

    (o, left_out(r, &lanes, dropped, drawn, missed), sc)
}

/// Signals: every signal the certified victims received, plus the
/// signals crossing the run's boundary, once each (by sequence number).
/// Those the kernel raised are marks on the victim's lane, not arrows.
fn signal_arrows(r: &Report, lanes: &[Lane]) -> (BTreeMap<u64, Arrow>, Vec<KernelMark>) {
    let mut arrows: BTreeMap<u64, Arrow> = BTreeMap::new();
    let mut kernel_marks: Vec<KernelMark> = Vec::new();
    for c in r.analysis.shown_certificates() {
        let to = key(&c.victim.process);
        let class = lanes
            .iter()
            .find(|l| l.key == to)
            .map_or("plain", |l| l.class.css());
        for h in &c.history {
            let s = &h.signal;
            let title = format!(
                "{} {} → pid {}{}",
                s.sig_name,
                h.call.as_deref().unwrap_or(""),
                c.victim.process.pid,
                if h.fatal { " (fatal)" } else { "" }
            );
            if h.raised_by_kernel {
                kernel_marks.push((to, s.t, format!("{title}, raised by the kernel")));
                continue;
            }
            let class = if h.fatal {
                format!("arrow fatal {class}")
            } else {
                format!("arrow {}", esc(&s.result))
            };
            let from = key(&h.sender);
            arrows.entry(s.seq).or_insert(Arrow {
                from,
                to,
                t: s.t,
                class,
                title: format!("{title} from pid {}", h.sender.pid),
                label: h.fatal.then(|| s.sig_name.clone()),
            });
        }
    }
    for f in &r.analysis.foreign_signals {
        let s = &f.signal;
        arrows.entry(s.seq).or_insert(Arrow {
            from: key(&f.sender),
            to: key(&f.target),
            t: s.t,
            // A kill that left the run is drawn solid, as a fatal one is.
            class: if f.outbound_kill {
                "arrow foreign outbound".to_string()
            } else {
                "arrow foreign".to_string()
            },
            title: format!(
                "{} {} from pid {} → pid {} (crosses the run's boundary)",
                s.sig_name,
                f.call.as_deref().unwrap_or(""),
                f.sender.pid,
                f.target.pid
            ),
            label: f.outbound_kill.then(|| s.sig_name.clone()),
        });
    }
    (arrows, kernel_marks)
}

/// The near misses whose time and sender are known, with their tooltips.
fn near_misses<'r>(r: &'r Report, cx: &Context) -> Vec<Miss<'r>> {
    r.analysis
        .near_misses
        .iter()
        .filter_map(|n| {
            let t = cx.seq_t(n.seq)?;
            let sender = r.analysis.entry(n.sender_id)?;
            let call = w::call_notation(&n.syscall, n.target_arg, n.tid_arg, &n.sig_name);
            let errno = n.errno.as_deref().unwrap_or("failed");
            let probe = if n.probe { " (liveness probe)" } else { "" };
            let times = match n.count {
                1 => String::new(),
                c => format!(" ×{c}, the first drawn"),
            };
            Some((
                sender,
                t,
                format!("near miss: {call} → {errno}{probe}{times}"),
            ))
        })
        .collect()
}

/// The time axis: from the run's start to the last thing drawn.
fn time_scale(
    r: &Report,
    lanes: &[Lane],
    arrows: &BTreeMap<u64, Arrow>,
    misses: &[Miss<'_>],
    snaps: &[(u64, String)],
) -> Scale {
    let t0 = r
        .run
        .root
        .as_ref()
        .map(|p| p.start)
        .unwrap_or_else(|| lanes.iter().map(|l| l.key.1).min().unwrap_or(0));
    let mut t1 = t0 + r.run.duration_ns;
    for l in lanes {
        t1 = t1.max(l.key.1).max(l.end.unwrap_or(0));
    }
    for a in arrows.values() {
        t1 = t1.max(a.t);
    }
    for t in misses.iter().map(|m| m.1).chain(snaps.iter().map(|s| s.0)) {
        t1 = t1.max(t);
    }
    let span = (t1.saturating_sub(t0).max(1_000) as f64) * 1.03;
    Scale { t0, span }
}

/// Lane `i`: its stripe, its label (pid, command or test), its life line
/// from spawn to end, and its end mark.
fn draw_lane(o: &mut String, i: usize, l: &Lane, sc: &Scale, t0: u64, width: f64) {
    let yc = TOP + i as f64 * LANE_H + LANE_H / 2.0;
    let p = &l.proc;
    let _ = write!(
        o,
        "<g class=\"lane {}{}\" data-pid=\"{}\" data-start=\"{}\">",
        l.class.css(),
        if p.in_run { "" } else { " outside" },
        p.pid,
        p.start
    );
    if i.is_multiple_of(2) {
        let _ = write!(
            o,
            "<rect class=\"stripe\" x=\"0\" y=\"{:.1}\" width=\"{width}\" height=\"{LANE_H}\"/>",
            yc - LANE_H / 2.0
        );
    }
    let label = match p.ns_pid {
        Some(ns) => format!("{} ({} in ns) {}", p.pid, ns.pid, p.command),
        None => format!("{} {}", p.pid, p.command),
    };
    // The test it ran, first on the lane: what a reader looks for.
    let label = match &l.test {
        Some(t) => format!("{label} · test: {t}"),
        None => label,
    };
    // The lane shows the abbreviated command (what tells workers apart);
    // the tooltip keeps it whole.
    let shown = crate::analysis::wording::prose_command(p);
    let shown = match p.ns_pid {
        Some(ns) => format!("{} ({} in ns) {shown}", p.pid, ns.pid),
        None => format!("{} {shown}", p.pid),
    };
    let shown = match &l.test {
        Some(t) => format!("{} · {t}", p.pid),
        None => shown,
    };
    let room = ((LABEL_W - 14.0 - l.depth.min(12) as f64 * 12.0) / 6.6) as usize;
    let _ = write!(
        o,
        "<text class=\"label\" x=\"{:.1}\" y=\"{:.1}\"><title>{}</title>{}</text>",
        6.0 + l.depth.min(12) as f64 * 12.0,
        yc + 4.0,
        esc(&format!(
            "{label}{}",
            if p.in_run { "" } else { " (outside the run)" }
        )),
        esc(&marks::cut(&shown, room))
    );
    let xs = sc.x(l.key.1.max(t0));
    let xe = match (l.end, l.class) {
        (Some(t), _) => sc.x(t),
        _ => LABEL_W + PLOT_W + RIGHT / 2.0,
    };
    let life = match l.class {
        EndClass::Leak | EndClass::Unknown => "life open",
        _ => "life",
    };
    let _ = write!(
        o,
        "<line class=\"{life}\" x1=\"{xs:.1}\" y1=\"{yc:.1}\" x2=\"{xe:.1}\" y2=\"{yc:.1}\"/>"
    );
    if l.key.1 >= t0 {
        let _ = write!(
            o,
            "<circle class=\"spawn\" cx=\"{xs:.1}\" cy=\"{yc:.1}\" r=\"3\"/>"
        );
    }
    marks::end_mark(o, l, xe, yc);
    o.push_str("</g>\n");
}

/// A vertical line across every lane at each snapshot, with its reason.
fn draw_snapshots(o: &mut String, snaps: &[(u64, String)], sc: &Scale, height: f64) {
    for (t, reason) in snaps {
        let x = sc.x(*t);
        let _ = writeln!(
            o,
            "<g class=\"snapshot\"><line x1=\"{x:.1}\" y1=\"{TOP}\" x2=\"{x:.1}\" y2=\"{height}\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\">snapshot ({})</text></g>",
            x + 3.0,
            TOP - 4.0,
            esc(reason)
        );
    }
}

/// Arrows: those of one call (same sender, same call, same pixel) fan
/// out from one dot, so a process-group kill reads as one act. Returns how
/// many arrows had both ends on a lane (drawn or counted past [`MAX_ARROWS`]).
fn draw_arrows(
    o: &mut String,
    arrows: &BTreeMap<u64, Arrow>,
    y: &impl Fn(&Key) -> Option<f64>,
    sc: &Scale,
) -> usize {
    let mut drawn = 0;
    let mut calls: BTreeMap<(Key, i64), usize> = BTreeMap::new();
    let mut body = String::new();
    for a in arrows.values() {
        let (Some(y1), Some(y2)) = (y(&a.from), y(&a.to)) else {
            continue;
        };
        if drawn >= MAX_ARROWS {
            drawn += 1;
            continue;
        }
        drawn += 1;
        let x = sc.x(a.t);
        let n = calls.entry((a.from, x.round() as i64)).or_default();
        *n += 1;
        // One label per call: a group kill's fan is one act.
        if let (Some(label), 1) = (&a.label, *n) {
            let _ = writeln!(
                body,
                "<text class=\"siglabel\" x=\"{:.1}\" y=\"{:.1}\">{}</text>",
                x + 9.0,
                (y1 + y2) / 2.0 + 3.0,
                esc(label)
            );
        }
        let d = if a.from == a.to {
            format!("M{x:.1},{:.1} c14,-12 14,12 1,6", y1 - 1.0)
        } else {
            let y2 = if y2 > y1 { y2 - 5.0 } else { y2 + 5.0 };
            format!("M{x:.1},{y1:.1} L{:.1},{y2:.1}", x + 6.0)
        };
        let _ = writeln!(
            body,
            "<path class=\"{}\" data-from=\"{}\" data-to=\"{}\" d=\"{d}\" \
             marker-end=\"url(#ah)\"><title>{}</title></path>",
            a.class,
            a.from.0,
            a.to.0,
            esc(&a.title)
        );
    }
    for ((from, x), n) in &calls {
        if *n > 1 {
            let yc = y(from).unwrap_or(0.0);
            let _ = writeln!(
                o,
                "<g class=\"call\"><circle cx=\"{x}\" cy=\"{yc:.1}\" r=\"4.5\"/><text x=\"{:.1}\" \
                 y=\"{:.1}\">×{n}</text><title>one call, {n} signals</title></g>",
                *x as f64 - 16.0,
                yc - 6.0
            );
        }
    }
    o.push_str(&body);
    drawn
}

/// A lightning mark on the victim's lane for each signal the kernel raised.
fn draw_kernel_marks(
    o: &mut String,
    kernel_marks: &[KernelMark],
    y: &impl Fn(&Key) -> Option<f64>,
    sc: &Scale,
) {
    for (k, t, title) in kernel_marks {
        if let Some(yc) = y(k) {
            let x = sc.x(*t);
            let _ = writeln!(
                o,
                "<path class=\"kernel\" d=\"M{:.1},{:.1} l4,6 l-3,0 l3,6 l-8,-8 l3,0 z\">\
                 <title>{}</title></path>",
                x - 1.0,
                yc - 12.0,
                esc(title)
            );
        }
    }
}

/// A crossed circle on the sender's lane for each near miss, up to
/// [`MAX_MISSES`]; returns how many were counted instead of drawn.
fn draw_misses(
    o: &mut String,
    misses: &[Miss<'_>],
    y: &impl Fn(&Key) -> Option<f64>,
    sc: &Scale,
) -> usize {
    let mut missed = 0;
    for (i, (sender, t, title)) in misses.iter().enumerate() {
        let Some(yc) = y(&key(sender)) else { continue };
        if i >= MAX_MISSES {
            missed += 1;
            continue;
        }
        let x = sc.x(*t);
        let _ = writeln!(
            o,
            "<g class=\"miss\"><circle cx=\"{x:.1}\" cy=\"{yc:.1}\" r=\"5\"/><path d=\"M{:.1},{:.1} \
             l6,6 m0,-6 l-6,6\"/><title>{}</title></g>",
            x - 3.0,
            yc - 3.0,
            esc(title)
        );
    }
    missed
}

/// The sentence under the picture: what it does not show, and why.
fn left_out(r: &Report, lanes: &[Lane], dropped: usize, drawn: usize, missed: usize) -> String {
    let mut left_out = Vec::new();
    let shown = lanes.iter().filter(|l| l.proc.in_run).count();
    let rest = r.run.processes.saturating_sub(shown);
    if rest > 0 {
        left_out.push(format!(
            "{} of the run not shown (no death, signal or leak worth a lane)",
            w::plural(rest, "other process", "other processes")
        ));
    }
    if dropped > 0 {
        left_out.push(format!(
            "{} beyond the first {} lanes",
            w::plural(
                dropped,
                "process that mattered is",
                "processes that mattered are"
            ),
            lanes::MAX_LANES
        ));
    }
    if drawn > MAX_ARROWS {
        left_out.push(format!("{} signals not drawn", drawn - MAX_ARROWS));
    }
    if missed > 0 {
        left_out.push(format!("{missed} near misses not drawn"));
    }
    left_out.join("; ")
}
