//! A plotly figure written as plotly.js's JSON (its reference, plotly.com/javascript/reference:
//! a trace's `type`, `mode`, `name`, `x`, `y`, …; the layout's `title.text`, `height`,
//! `barmode`, axes …): the charts' few settings, without the plotly crate's serialisers in the
//! bundles (tens of KB of wasm each for settings they never use). The browser tests read each
//! chart plotly.js drew from it.

use serde_json::{Value, json};

/// Traces added one by one, then written with a layout.
#[derive(Default)]
pub struct Figure {
    traces: Vec<Value>,
}

/// How a figure's bars sit side by side (`"group"`) or on one another (`"stack"`).
#[derive(Clone, Copy)]
pub enum Bars {
    Group,
    Stack,
}

impl Figure {
    pub fn new() -> Self {
        Self::default()
    }

    /// A bar per `x`, `y` high.
    pub fn bars(self, name: &str, x: &[String], y: &[f64]) -> Self {
        self.trace(json!({"type": "bar", "name": name, "x": x, "y": y}))
    }

    /// A line through `y` over `x`; a gap where `y` is `None`.
    pub fn lines(self, name: &str, x: &[String], y: &[Option<f64>]) -> Self {
        self.trace(json!({"type": "scatter", "mode": "lines", "name": name, "x": x, "y": y}))
    }

    /// Any trace, as plotly.js reads it.
    pub fn trace(mut self, trace: Value) -> Self {
        self.traces.push(trace);
        self
    }

    /// The figure with a title, a height and how its bars sit, as plotly JSON for
    /// [`crate::ui::Chart`].
    pub fn to_json(&self, title: &str, height: u32, bars: Option<Bars>) -> String {
        let mut layout = json!({"title": {"text": title}, "height": height});
        if let Some(bars) = bars {
            layout["barmode"] = json!(match bars {
                Bars::Group => "group",
                Bars::Stack => "stack",
            });
        }
        self.with_layout(layout)
    }

    /// The figure with any layout, as plotly.js reads it. Each axis makes room for its tick
    /// labels (`automargin`) unless the layout says otherwise: long category names are never cut,
    /// and a second y axis's title (on the right) never covers its ticks.
    pub fn with_layout(&self, mut layout: Value) -> String {
        let second = layout.get("yaxis2").is_some();
        for axis in ["xaxis", "yaxis", "yaxis2"] {
            if (axis != "yaxis2" || second) && layout[axis].get("automargin").is_none() {
                layout[axis]["automargin"] = json!(true);
            }
        }
        json!({"data": self.traces, "layout": layout}).to_string()
    }
}
