//! Words for people: every enum that a person reads (in the console, the CLI, CSV or Markdown)
//! has one label here, in the shared crate, so every output says the same thing. JSON carries
//! the serde value (`hami_fractions`); people read the label ("HAMi fractions").

/// `n` of a countable noun, in words: "1 team", "3 teams" (nouns whose plural adds an s).
pub fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// An enum value's name for people, and optionally one line saying what it means.
pub trait Labelled: Copy {
    fn label(self) -> &'static str;

    fn description(self) -> &'static str {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::count;

    #[test]
    fn a_count_says_one_or_many() {
        assert_eq!(count(1, "team"), "1 team");
        assert_eq!(count(0, "pool"), "0 pools");
        assert_eq!(count(3, "GPU"), "3 GPUs");
    }
}
