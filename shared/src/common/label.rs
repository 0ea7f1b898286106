//! Words for people: every enum that a person reads (in the console, the CLI, CSV or Markdown)
//! has one label here, in the shared crate, so every output says the same thing. JSON carries
//! the serde value (`hami_fractions`); people read the label ("HAMi fractions").

/// An enum value's name for people, and optionally one line saying what it means.
pub trait Labelled: Copy {
    fn label(self) -> &'static str;

    fn description(self) -> &'static str {
        ""
    }
}
