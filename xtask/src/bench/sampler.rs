//! The resources sampler's cost (issue 36: it must cost nothing
//! measurable): tracer's own CPU time over an idle run of 20 sleepers,
//! sampling (the default, once a second) against `--no-resources`, runs
//! interleaved. The sleepers use no CPU, so the difference is the sampler's.
use anyhow::Result;

use super::{
    measure::{measure, Measured},
    workloads::Ctx,
};

pub(crate) fn cost(cx: &mut Ctx, reps: usize, scale: f64) -> Result<()> {
    let secs = (20.0 * scale).max(5.0).round() as u32;
    let argv: Vec<String> = [
        "/bin/sh",
        "-c",
        &format!("for i in $(seq 20); do sleep {secs} & done; wait"),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut on: Vec<Measured> = Vec::new();
    let mut off: Vec<Measured> = Vec::new();
    for _ in 0..reps.max(3) {
        for (runs, sampling) in [(&mut on, true), (&mut off, false)] {
            let dir = cx.tmp("sampler");
            // As `Ctx::command` runs tracer (root's run, as the bare one),
            // with the flag before the command.
            let mut c = std::process::Command::new(&cx.tracer);
            c.arg("record").arg("--output").arg(&dir);
            c.args(["--user", "root"]);
            if !sampling {
                c.arg("--no-resources");
            }
            c.arg("--").args(&argv);
            runs.push(measure(&mut c)?);
        }
    }
    let median = |v: &[Measured]| {
        let mut c: Vec<f64> = v.iter().map(|m| m.cpu_secs).collect();
        c.sort_by(f64::total_cmp);
        c[c.len() / 2]
    };
    let (a, b) = (median(&on), median(&off));
    let list = |v: &[Measured]| {
        v.iter()
            .map(|m| format!("{:.2}", m.cpu_secs))
            .collect::<Vec<_>>()
            .join(" ")
    };
    cx.say("");
    cx.say(format!(
        "## Resources sampler: tracer's CPU over a {secs} s idle run of 20 sleepers"
    ));
    cx.say("");
    cx.say("| sampling | tracer CPU, median (runs) | difference, % of one CPU |");
    cx.say("| --- | --- | --- |");
    cx.say(format!(
        "| once a second (default) | {a:.2} s ({}) | |",
        list(&on)
    ));
    cx.say(format!(
        "| `--no-resources` | {b:.2} s ({}) | {:+.2} % |",
        list(&off),
        (a - b) / f64::from(secs) * 100.0
    ));
    Ok(())
}
