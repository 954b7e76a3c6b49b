//! The run's memory and CPU over time, drawn under the process timeline on
//! its time scale: the run's memory and its largest processes' RSS, the
//! limit, the OOM kills and the test windows; then CPU used and throttled.
use std::fmt::Write as _;

use super::{
    esc,
    scale::{Scale, LABEL_W, PLOT_W},
};
use crate::{
    analysis::wording as w,
    report::{resources::rss_span, Report},
};

const MEM_H: f64 = 150.0;
const CPU_H: f64 = 70.0;
const GAP: f64 = 24.0;
const TOP: f64 = 18.0;
/// Processes drawn besides the run.
const LINES: usize = 3;

pub(super) fn svg(r: &Report, sc: &Scale) -> Option<String> {
    let res = r.resources.as_ref()?;
    if res.series.is_empty() {
        return None;
    }
    let top = res
        .limit_bytes
        .unwrap_or(res.peak_bytes)
        .max(res.peak_bytes)
        .max(1) as f64;
    let width = LABEL_W + PLOT_W + 40.0;
    let height = TOP + MEM_H + GAP + CPU_H + 20.0;
    let ym = |b: u64| TOP + MEM_H - b as f64 / top * MEM_H;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "<svg id=\"resources-svg\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" \
         height=\"{height}\" viewBox=\"0 0 {width} {height}\" role=\"img\" \
         aria-label=\"memory and CPU over time\">"
    );
    // Test windows first, under everything.
    for t in &res.tests {
        let (x0, x1) = (sc.x(t.from), sc.x(t.until));
        let _ = writeln!(
            o,
            "<rect class=\"testwin\" x=\"{x0:.1}\" y=\"{TOP}\" width=\"{:.1}\" height=\"{MEM_H}\">\
             <title>{} (pid {}): {}</title></rect>",
            (x1 - x0).max(1.0),
            esc(&t.test),
            t.pid,
            esc(&rss_span(&t.rss))
        );
    }
    let _ = writeln!(
        o,
        "<text class=\"rlabel\" x=\"10\" y=\"{:.1}\">memory (0 to {})</text>",
        TOP + 12.0,
        esc(&w::bytes(top as u64))
    );
    if let Some(l) = res.limit_bytes {
        let y = ym(l);
        let _ = writeln!(
            o,
            "<line class=\"limit\" x1=\"{LABEL_W}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\"/>\
             <text class=\"rlabel limit\" x=\"{:.1}\" y=\"{:.1}\">limit {}</text>",
            LABEL_W + PLOT_W,
            LABEL_W - 6.0,
            y + 4.0,
            esc(&w::bytes(l))
        );
    }
    let run: Vec<(u64, u64)> = res.series.iter().map(|p| (p.t, p.memory)).collect();
    polyline(&mut o, "mem run", &run, sc, &ym, "the run's cgroup");
    for p in res.processes.iter().take(LINES) {
        let title = format!(
            "{} (pid {}), peak {}",
            p.comm,
            p.pid,
            w::bytes(p.peak_bytes)
        );
        polyline(&mut o, "mem proc", &p.series, sc, &ym, &title);
    }
    // OOM kills, as on the timeline.
    for c in r.analysis.shown_certificates() {
        let Some(t) = c
            .oom
            .as_ref()
            .and_then(|m| m.memory.as_ref())
            .map(|g| g.kill_t)
        else {
            continue;
        };
        let x = sc.x(t);
        let _ = writeln!(
            o,
            "<line class=\"oomkill\" x1=\"{x:.1}\" y1=\"{TOP}\" x2=\"{x:.1}\" y2=\"{:.1}\"/>\
             <text class=\"oomtag\" x=\"{:.1}\" y=\"{:.1}\">OOM #{}</text>",
            TOP + MEM_H,
            x + 3.0,
            TOP + 10.0,
            c.id
        );
    }
    cpu(&mut o, res, sc);
    o.push_str("</svg>\n");
    Some(o)
}

/// CPU used and throttled between points, in CPUs.
fn cpu(o: &mut String, res: &crate::report::resources::ResourcesReport, sc: &Scale) {
    use crate::report::resources::CPU_NOT_SAMPLED;
    let y0 = TOP + MEM_H + GAP;
    if res.cpu_cgroup.is_none() {
        // Not sampled: no line at zero (see report.md's section).
        let _ = writeln!(
            o,
            "<text class=\"rlabel\" x=\"10\" y=\"{:.1}\">{CPU_NOT_SAMPLED}</text>",
            y0 + 12.0
        );
        return;
    }
    let rate = |f: fn(&crate::resources::Point) -> u64| -> Vec<(u64, f64)> {
        res.series
            .windows(2)
            .map(|p| {
                let dt = p[1].t.saturating_sub(p[0].t).max(1) as f64 / 1000.0;
                (p[1].t, f(&p[1]).saturating_sub(f(&p[0])) as f64 / dt)
            })
            .collect()
    };
    let used = rate(|p| p.cpu_us);
    let throttled = rate(|p| p.throttled_us);
    let top = used.iter().map(|p| p.1).fold(1.0f64, f64::max);
    let _ = writeln!(
        o,
        "<text class=\"rlabel\" x=\"10\" y=\"{:.1}\">CPU (0 to {:.2})</text>",
        y0 + 12.0,
        top
    );
    let y = |v: f64| y0 + CPU_H - v / top * CPU_H;
    for (class, pts, title) in [
        ("cpu used", &used, "CPU used (CPUs)"),
        ("cpu throttled", &throttled, "time throttled (per second)"),
    ] {
        if pts.iter().all(|p| p.1 == 0.0) && class == "cpu throttled" {
            continue;
        }
        let d: Vec<String> = pts
            .iter()
            .map(|&(t, v)| format!("{:.1},{:.1}", sc.x(t), y(v.min(top))))
            .collect();
        let _ = writeln!(
            o,
            "<polyline class=\"{class}\" points=\"{}\"><title>{title}</title></polyline>",
            d.join(" ")
        );
    }
}

fn polyline(
    o: &mut String,
    class: &str,
    pts: &[(u64, u64)],
    sc: &Scale,
    y: &dyn Fn(u64) -> f64,
    title: &str,
) {
    let d: Vec<String> = pts
        .iter()
        .map(|&(t, b)| format!("{:.1},{:.1}", sc.x(t), y(b)))
        .collect();
    let _ = writeln!(
        o,
        "<polyline class=\"{class}\" points=\"{}\"><title>{}</title></polyline>",
        d.join(" "),
        esc(title)
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::resources::tests::two_points;

    /// No CPU cgroup read: words in the chart, no line at zero.
    #[test]
    fn cpu_not_sampled_is_said_not_drawn_at_zero() {
        let sc = Scale {
            t0: 1_000_000_000,
            span: 1e9,
        };
        let mut svg = String::new();
        cpu(&mut svg, &two_points(None), &sc);
        assert!(svg.contains("CPU: not sampled"), "{svg}");
        assert!(!svg.contains("polyline"), "{svg}");
        let mut svg = String::new();
        cpu(&mut svg, &two_points(Some("v2:/job")), &sc);
        assert!(svg.contains("class=\"cpu used\""), "{svg}");
        assert!(!svg.contains("not sampled"), "{svg}");
    }
}
