//! Small drawing pieces of the timeline: death marks, the time axis.
use std::fmt::Write as _;

use super::{
    esc,
    lanes::{EndClass, Lane},
    scale::{Scale, LABEL_W, PLOT_W, TOP},
};
use crate::analysis::wording as w;

pub(super) fn end_mark(o: &mut String, l: &Lane, x: f64, y: f64) {
    let title = match l.cert {
        Some(id) => format!("certificate #{id}"),
        None => match l.class {
            EndClass::Leak => "still running when the log ended (leftover)".to_string(),
            EndClass::Unknown => "no end in the log".to_string(),
            _ => "exited".to_string(),
        },
    };
    let class = l.class.css();
    let shape = match l.class {
        EndClass::Unexpected | EndClass::Expected => {
            format!(
                "<path class=\"death {class}\" d=\"M{:.1},{:.1} l10,10 m0,-10 l-10,10\"/>",
                x - 5.0,
                y - 5.0
            )
        }
        EndClass::NonzeroExit => format!(
            "<rect class=\"death {class}\" x=\"{:.1}\" y=\"{:.1}\" width=\"9\" height=\"9\"/>",
            x - 4.5,
            y - 4.5
        ),
        EndClass::Oom => format!(
            "<path class=\"death {class}\" d=\"M{x:.1},{:.1} l7,7 l-7,7 l-7,-7 z\"/>\
             <text class=\"oomtag\" x=\"{:.1}\" y=\"{:.1}\">OOM</text>",
            y - 7.0,
            x + 9.0,
            y + 4.0
        ),
        EndClass::Plain => format!(
            "<line class=\"death plain\" x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\"/>",
            y - 4.0,
            y + 4.0
        ),
        EndClass::Leak => format!(
            "<path class=\"death leak\" d=\"M{:.1},{:.1} l8,5 l-8,5 z\"/>",
            x - 8.0,
            y - 5.0
        ),
        EndClass::Unknown => String::new(),
    };
    if shape.is_empty() {
        return;
    }
    match l.cert {
        Some(id) => {
            let _ = write!(
                o,
                "<a href=\"#cert-{id}\">{shape}<title>{title}</title></a>"
            );
        }
        None => {
            let _ = write!(o, "<g>{shape}<title>{}</title></g>", esc(&title));
        }
    }
}

pub(super) fn axis(o: &mut String, sc: &Scale, height: f64) {
    let raw = sc.span / 6.0;
    let mag = 10f64.powi(raw.log10().floor() as i32);
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let mut t = 0.0;
    o.push_str("<g class=\"axis\">");
    while t <= sc.span {
        let x = LABEL_W + t / sc.span * PLOT_W;
        let _ = write!(
            o,
            "<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{height:.1}\"/><text x=\"{x:.1}\" \
             y=\"{:.1}\">{}{}</text>",
            TOP - 6.0,
            TOP - 10.0,
            if t == 0.0 { "" } else { "+" },
            if t == 0.0 { "0".to_string() } else { esc(&w::duration(t as u64)) }
        );
        t += step;
    }
    o.push_str("</g>\n");
}

/// At most `n` characters, cut with an ellipsis.
pub(super) fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    let mut c: String = s.chars().take(n.saturating_sub(1)).collect();
    c.push('…');
    c
}
