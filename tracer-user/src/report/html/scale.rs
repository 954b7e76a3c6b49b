//! The timeline's geometry: where the plot is, and time to x.
pub(super) const LABEL_W: f64 = 370.0;
pub(super) const PLOT_W: f64 = 860.0;
pub(super) const TOP: f64 = 30.0;

pub(super) struct Scale {
    pub(super) t0: u64,
    pub(super) span: f64,
}

impl Scale {
    pub(super) fn x(&self, t: u64) -> f64 {
        let dt = t.saturating_sub(self.t0) as f64;
        LABEL_W + (dt / self.span * PLOT_W).min(PLOT_W)
    }
}
