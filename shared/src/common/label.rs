//! Words for people: every enum that a person reads (in the console, the CLI, CSV or Markdown)
//! has one label here, in the shared crate, so every output says the same thing. JSON carries
//! the serde value (`hami_fractions`); people read the label ("HAMi fractions").

/// The words for GPU time, one meaning each wherever a person reads them (the Plan page, the
/// statements): `(word, what it means)`. "Idle" is time allocated and not busy; time no one
/// holds is "unallocated", never idle. One constant a word, so a page carries only those it
/// shows (the Plan page's download has a budget).
pub const ALLOCATED: (&str, &str) = (
    "Allocated",
    "GPU time a team's quota or job holds (Kueue's admitted quota in use).",
);
pub const BUSY: (&str, &str) = (
    "Busy",
    "allocated GPU time the GPU was working (DCGM's utilisation).",
);
pub const IDLE: (&str, &str) = (
    "Idle",
    "allocated GPU time the GPU was not working: allocated less busy.",
);
pub const UNALLOCATED: (&str, &str) = (
    "Unallocated",
    "GPU time of the fleet's capacity that no team held.",
);
pub const UNOBSERVED: (&str, &str) = (
    "Unobserved",
    "GPU time no DCGM sample covers: neither busy nor idle, not known.",
);
pub const GLOSSARY: [(&str, &str); 5] = [ALLOCATED, BUSY, IDLE, UNALLOCATED, UNOBSERVED];

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
