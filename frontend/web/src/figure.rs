//! A plotly figure written as plotly.js's JSON (its reference: a trace's `type`, `mode`, `name`,
//! `x`, `y`; the layout's `title.text`, `height`, `barmode`): the trace kinds and settings the
//! console draws, without the plotly crate's serialisers in its bundle (tens of KB of wasm for
//! settings it never uses). The browser tests read each chart plotly.js drew from it.

use serde::Serialize;

/// Traces added one by one, then written with a layout by [`Figure::to_json`].
#[derive(Default)]
pub struct Figure {
    traces: Vec<String>,
}

#[derive(Serialize)]
struct Trace<'a, Y> {
    r#type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    mode: Option<&'static str>,
    name: &'a str,
    x: &'a [String],
    y: &'a [Y],
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
        self.with("bar", None, name, x, y)
    }

    /// A line through `y` over `x`; a gap where `y` is `None`.
    pub fn lines(self, name: &str, x: &[String], y: &[Option<f64>]) -> Self {
        self.with("scatter", Some("lines"), name, x, y)
    }

    fn with<Y: Serialize>(
        mut self,
        kind: &'static str,
        mode: Option<&'static str>,
        name: &str,
        x: &[String],
        y: &[Y],
    ) -> Self {
        let trace = Trace {
            r#type: kind,
            mode,
            name,
            x,
            y,
        };
        // Strings, numbers and nulls: serde_json cannot fail on them.
        self.traces
            .push(serde_json::to_string(&trace).unwrap_or_default());
        self
    }

    /// The figure as plotly JSON, for [`crate::ui::Chart`].
    pub fn to_json(&self, title: &str, height: u32, bars: Option<Bars>) -> String {
        let title = serde_json::to_string(title).unwrap_or_default();
        let bar_mode = match bars {
            None => "",
            Some(Bars::Group) => r#","barmode":"group""#,
            Some(Bars::Stack) => r#","barmode":"stack""#,
        };
        format!(
            r#"{{"data":[{}],"layout":{{"title":{{"text":{title}}},"height":{height}{bar_mode}}}}}"#,
            self.traces.join(",")
        )
    }
}
