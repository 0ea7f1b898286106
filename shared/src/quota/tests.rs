use std::collections::BTreeMap;

use crate::{
    common::day::Day,
    common::error::FieldError,
    kueue::{Quota, Taint, Toleration, TolerationOperator, WithinQueue},
};

use super::*;
use crate::fleet::sharing::Mechanism;

pub(crate) fn day(s: &str) -> Day {
    Day::parse(s).expect("a date")
}

pub(crate) fn flavor(name: &str, gpus: i64) -> Flavor {
    Flavor {
        name: name.into(),
        gpu_model: "H100-SXM5-80GB".into(),
        pools: vec![name.into()],
        gpus,
        settings: FlavorSettings::default(),
        version: 1,
        product_label: None,
    }
}

pub(crate) fn team(name: &str, cohort: Option<&str>) -> TeamQueue {
    TeamQueue {
        team: name.into(),
        namespace: format!("team-{name}"),
        cluster_queue: name.into(),
        local_queue: name.into(),
        cohort: cohort.map(str::to_owned),
    }
}

pub(crate) fn spec(lines: &[(&str, i64, Option<i64>, Option<i64>)], from: &str) -> QuotaSpec {
    QuotaSpec {
        lines: lines
            .iter()
            .map(|&(f, n, b, l)| QuotaLine {
                flavor: f.into(),
                resource: "nvidia.com/gpu".into(),
                nominal: n,
                borrowing_limit: b,
                lending_limit: l,
            })
            .collect(),
        checkpoint_interval_min: Some(20),
        justification: "pre-training run".into(),
        starts_on: day(from),
        ..QuotaSpec::blank(&[], day(from))
    }
}

pub(crate) fn approved(id: i64, team: &str, spec: QuotaSpec) -> Approved {
    Approved {
        id,
        team: team.into(),
        order: id,
        spec,
    }
}

pub(crate) fn world() -> QuotaWorld {
    QuotaWorld {
        flavors: vec![flavor("h100", 64)],
        teams: vec![
            team("research", Some("gpufleet")),
            team("search", Some("gpufleet")),
            team("solo", None),
        ],
        approved: vec![approved(
            1,
            "search",
            spec(&[("h100", 24, None, Some(8))], "2026-11-01"),
        )],
        held: Vec::new(),
    }
}

pub(crate) const TODAY: &str = "2026-12-01";

fn paths(fields: &[FieldError]) -> Vec<&str> {
    fields.iter().map(|f| f.path.as_str()).collect()
}

#[test]
fn the_life_cycle_allows_only_its_transitions() {
    use Action::*;
    use State::*;
    let allowed: Vec<(State, Action, State)> = State::ALL
        .into_iter()
        .flat_map(|s| {
            [Edit, Submit, Withdraw, Approve, Reject, Revoke, Supersede]
                .into_iter()
                .filter_map(move |a| s.after(a).map(|t| (s, a, t)))
        })
        .collect();
    assert_eq!(
        allowed,
        vec![
            (Draft, Edit, Draft),
            (Draft, Submit, Submitted),
            (Submitted, Withdraw, Draft),
            (Submitted, Approve, Approved),
            (Submitted, Reject, Rejected),
            (Approved, Revoke, Revoked),
            (Approved, Supersede, Superseded),
        ]
    );
    for state in State::ALL {
        assert_eq!(State::parse(state.as_str()), Some(state));
    }
}

#[test]
fn nominal_quota_over_capacity_is_an_error_naming_the_figures() {
    // 64 GPUs, search holds 24: research may have 40, not 41.
    let w = world();
    let ok = w.check(
        "research",
        &spec(&[("h100", 40, None, None)], TODAY),
        day(TODAY),
    );
    assert_eq!(ok.errors, vec![]);
    assert_eq!(paths(&ok.warnings), ["lines[0].nominal"], "{ok:?}");
    assert!(ok.warnings[0].message.contains("whole capacity of 64"));
    let over = w.check(
        "research",
        &spec(&[("h100", 41, None, None)], TODAY),
        day(TODAY),
    );
    assert_eq!(paths(&over.errors), ["lines[0].nominal"]);
    assert_eq!(
        over.errors[0].message,
        "flavor h100 nvidia.com/gpu: the nominal quotas would add up to 65 on 2026-12-01, over its capacity of 64"
    );
}

#[test]
fn capacity_shows_while_the_justification_is_still_empty() {
    let mut s = spec(&[("h100", 41, None, None)], TODAY);
    s.justification.clear();
    let checked = world().check("research", &s, day(TODAY));
    assert_eq!(
        paths(&checked.errors),
        ["justification", "lines[0].nominal"]
    );
}

#[test]
fn capacity_is_checked_on_every_day_the_sum_can_change() {
    // search holds 24 from November and, approved later, only 8 during December: research
    // may ask 50 for December (8 + 50 = 58) but not from January on, when search's 24
    // count again (24 + 50 = 74 > 64).
    let mut w = world();
    let mut december = spec(&[("h100", 8, None, None)], "2026-12-01");
    december.ends_on = Some(day("2026-12-31"));
    w.approved.push(approved(2, "search", december));
    let mut ask = spec(&[("h100", 50, None, None)], TODAY);
    ask.ends_on = Some(day("2026-12-31"));
    assert_eq!(w.check("research", &ask, day(TODAY)).errors, vec![]);
    ask.ends_on = None;
    let errors = w.check("research", &ask, day(TODAY)).errors;
    assert_eq!(paths(&errors), ["lines[0].nominal"]);
    assert!(
        errors[0].message.contains("74 on 2027-01-01"),
        "{}",
        errors[0].message
    );
}

#[test]
fn the_latest_approval_in_its_window_is_what_counts() {
    let mut w = world();
    let mut december = spec(&[("h100", 8, None, None)], "2026-12-10");
    december.ends_on = Some(day("2026-12-20"));
    // The December request does not cover the November one's future: nothing superseded.
    assert_eq!(
        w.superseded_by("search", &december, day(TODAY)),
        Vec::<i64>::new()
    );
    w.approved.push(approved(2, "search", december));
    let nominal = |d: &str| {
        w.effective_on(day(d))["search"]
            .spec
            .nominal("h100", "nvidia.com/gpu")
    };
    assert_eq!(nominal("2026-12-09"), 24);
    assert_eq!(nominal("2026-12-10"), 8);
    assert_eq!(nominal("2026-12-20"), 8);
    assert_eq!(nominal("2026-12-21"), 24);
    assert!(w.effective_on(day("2026-10-31")).is_empty());
    // An open-ended one from today covers it: superseded.
    let open = spec(&[("h100", 16, None, None)], TODAY);
    assert_eq!(w.superseded_by("search", &open, day(TODAY)), vec![1, 2]);
    assert_eq!(
        w.superseded_by("research", &open, day(TODAY)),
        Vec::<i64>::new()
    );
}

#[test]
fn limits_need_a_cohort_and_lending_stays_within_nominal() {
    let w = world();
    let checked = w.check(
        "solo",
        &spec(&[("h100", 8, Some(4), Some(2))], TODAY),
        day(TODAY),
    );
    assert_eq!(
        paths(&checked.errors),
        ["lines[0].borrowing_limit", "lines[0].lending_limit"]
    );
    assert!(checked.errors[0].message.contains("only with a cohort"));
    let checked = w.check(
        "research",
        &spec(&[("h100", 8, None, Some(9))], TODAY),
        day(TODAY),
    );
    assert_eq!(paths(&checked.errors), ["lines[0].lending_limit"]);
    let checked = w.check(
        "research",
        &spec(&[("h100", -1, Some(-2), None)], TODAY),
        day(TODAY),
    );
    assert_eq!(
        paths(&checked.errors),
        ["lines[0].nominal", "lines[0].borrowing_limit"]
    );
    let checked = w.check(
        "research",
        &spec(&[("a100", 1, None, None), ("h100", 1, None, None)], TODAY),
        day(TODAY),
    );
    assert_eq!(paths(&checked.errors), ["lines[0].flavor"]);
    assert!(checked.errors[0].message.contains("the fleet has h100"));
}

#[test]
fn borrowing_more_than_the_cohort_lends_is_a_warning() {
    // search lends at most 8 of its 24: research may borrow 8 without a warning, not 9.
    let w = world();
    let ok = w.check(
        "research",
        &spec(&[("h100", 8, Some(8), None)], TODAY),
        day(TODAY),
    );
    assert_eq!((ok.errors.len(), ok.warnings.len()), (0, 0), "{ok:?}");
    let over = w.check(
        "research",
        &spec(&[("h100", 8, Some(9), None)], TODAY),
        day(TODAY),
    );
    assert_eq!(paths(&over.warnings), ["lines[0].borrowing_limit"]);
    assert!(over.warnings[0].message.contains("(8 on 2026-12-01)"));
}

#[test]
fn preemptible_queues_need_a_checkpoint_interval() {
    let w = world();
    let mut s = spec(&[("h100", 8, None, None)], TODAY);
    s.checkpoint_interval_min = None;
    let checked = w.check("research", &s, day(TODAY));
    assert_eq!(paths(&checked.errors), ["checkpoint_interval_min"]);
    s.checkpoint_interval_min = Some(45);
    let checked = w.check("research", &s, day(TODAY));
    assert_eq!(paths(&checked.warnings), ["checkpoint_interval_min"]);
    assert!(checked.warnings[0].message.contains("22.5 minutes"));
    // Hard quota, no preemption inside the queue: nothing can evict its work.
    s.checkpoint_interval_min = None;
    s.within_cluster_queue = WithinQueue::Never;
    assert_eq!(w.check("solo", &s, day(TODAY)).errors, vec![]);
}

#[test]
fn dates_and_justification_are_checked() {
    let w = world();
    let mut s = spec(&[("h100", 8, None, None)], TODAY);
    s.justification = "  ".into();
    s.ends_on = Some(day("2026-11-30"));
    let checked = w.check("research", &s, day(TODAY));
    assert_eq!(paths(&checked.errors), ["justification", "ends_on"]);
    let wrong: Result<QuotaSpec, _> =
        serde_json::from_str(r#"{"lines": [], "justification": "x", "starts_on": "2026-02-30"}"#);
    assert!(wrong.is_err());
    // what does not show is refused in both texts: a reversed justification (its lines stay
    // lines), a bell in the project
    let mut s = spec(&[("h100", 8, None, None)], TODAY);
    s.justification = "Two runs:\n- pre-training\n- eval \u{202E}lanif".into();
    s.project = Some("llama\u{7}".into());
    let checked = w.check("research", &s, day(TODAY));
    assert_eq!(paths(&checked.errors), ["project", "justification"]);
}

#[test]
fn the_impact_shows_the_cohort_before_and_after() {
    // 64 GPUs; search holds 24 lending 8. research asks 16, lending 4, borrowing up to 6.
    let w = world();
    let impact = w.impact(
        "research",
        &spec(&[("h100", 16, Some(6), Some(4))], TODAY),
        day(TODAY),
    );
    assert_eq!(impact.len(), 1);
    let i = &impact[0];
    assert_eq!(
        (i.capacity, i.before.nominal_total, i.before.unassigned),
        (64, 24, 40)
    );
    assert_eq!((i.after.nominal_total, i.after.unassigned), (40, 24));
    assert_eq!((i.before.cohort_lendable, i.after.cohort_lendable), (8, 12));
    let side = |s: &Side, t: &str| {
        s.teams
            .iter()
            .find(|x| x.team == t)
            .map(|x| (x.nominal, x.most_borrowable))
            .expect("team")
    };
    // Before, research holds nothing and may borrow what search lends (8).
    assert_eq!(side(&i.before, "research"), (0, 8));
    // After: its own limit of 6 binds; search may borrow research's 4; solo nothing.
    assert_eq!(side(&i.after, "research"), (16, 6));
    assert_eq!(side(&i.after, "search"), (24, 4));
    assert_eq!(side(&i.after, "solo"), (0, 0));
}

#[test]
fn the_allocation_shows_each_team_and_what_is_left() {
    // search holds 24 of 64 and lends 8; solo (no cohort) holds 10, which it cannot lend.
    let mut w = world();
    w.approved.push(approved(
        2,
        "solo",
        spec(&[("h100", 10, None, None)], TODAY),
    ));
    let a = &w.allocation(day(TODAY))[0];
    assert_eq!(
        a.teams,
        vec![("search".to_owned(), 24), ("solo".to_owned(), 10)]
    );
    assert_eq!(
        (a.capacity, a.nominal_total, a.unassigned, a.lendable),
        (64, 34, 30, 8)
    );
}

#[test]
fn mig_flavors_offer_each_profile_at_instances_per_gpu() {
    let mut f = flavor("h100-mig", 16);
    f.settings.mig_layout = BTreeMap::from([("1g.10gb".into(), 7)]);
    assert_eq!(
        f.resources(),
        vec![Capacity {
            resource: "nvidia.com/mig-1g.10gb".into(),
            amount: 112
        }]
    );
    assert_eq!(f.settings.validate("H100-SXM5-80GB"), Ok(()));
    f.settings.mig_layout = BTreeMap::from([("1g.10gb".into(), 8)]);
    let errors = f.settings.validate("H100-SXM5-80GB").expect_err("8 × 1g");
    assert_eq!(paths(&errors), ["mig_layout"]);
}

#[test]
fn settings_read_from_lines_and_back() {
    let text = SettingsText {
        node_labels: "nvidia.com/gpu.product=H100-SXM5-80GB\n\n gpufleet.io/pool = a ".into(),
        node_taints: "nvidia.com/gpu:NoSchedule\ndedicated=ml:NoExecute".into(),
        tolerations: "nvidia.com/gpu:NoSchedule\ndedicated=ml\n*".into(),
        mig_layout: "1g.10gb=7".into(),
        sharing: "time_slicing".into(),
    };
    let settings = text.parse().expect("reads");
    assert_eq!(settings.node_labels["gpufleet.io/pool"], "a");
    assert_eq!(settings.node_taints[1].value, "ml");
    assert_eq!(settings.tolerations[0].operator, TolerationOperator::Exists);
    assert_eq!(settings.tolerations[1].operator, TolerationOperator::Equal);
    assert_eq!(settings.tolerations[1].effect, None);
    assert_eq!(settings.tolerations[2].key, "");
    assert_eq!(settings.mig_layout["1g.10gb"], 7);
    assert_eq!(settings.sharing, Some(Mechanism::TimeSlicing));
    assert_eq!(settings.validate("H100-SXM5-80GB"), Ok(()));
    // Printed and read again, the same settings.
    assert_eq!(SettingsText::of(&settings).parse(), Ok(settings));
    let bad = SettingsText {
        node_labels: "just-a-key".into(),
        node_taints: "k:Sometimes".into(),
        tolerations: "k:Never".into(),
        mig_layout: "1g.10gb=0".into(),
        sharing: "mig".into(),
    };
    let paths: Vec<String> = bad
        .parse()
        .expect_err("bad")
        .into_iter()
        .map(|e| e.path)
        .collect();
    assert_eq!(
        paths,
        [
            "node_labels",
            "node_taints",
            "tolerations",
            "mig_layout",
            "sharing"
        ]
    );
}

#[test]
fn labels_taints_and_tolerations_follow_kubernetes_rules() {
    use crate::kueue::TaintEffect;
    let settings = FlavorSettings {
        node_labels: BTreeMap::from([
            ("nvidia.com/gpu.product".into(), "H100-SXM5-80GB".into()),
            ("Bad Key".into(), "x".into()),
            ("pool".into(), "-bad".into()),
        ]),
        node_taints: vec![Taint {
            key: "nvidia.com/gpu".into(),
            value: String::new(),
            effect: TaintEffect::NoSchedule,
        }],
        tolerations: vec![
            Toleration {
                key: String::new(),
                operator: TolerationOperator::Equal,
                value: "x".into(),
                effect: None,
            },
            Toleration {
                key: "nvidia.com/gpu".into(),
                operator: TolerationOperator::Exists,
                value: "x".into(),
                effect: Some(TaintEffect::NoSchedule),
            },
        ],
        mig_layout: BTreeMap::new(),
        sharing: Some(Mechanism::Mig),
    };
    let errors = settings.validate("H100-SXM5-80GB").expect_err("bad");
    assert_eq!(
        paths(&errors),
        [
            "node_labels.Bad Key",
            "node_labels.pool",
            "tolerations[0].operator",
            "tolerations[1].value",
            "sharing"
        ]
    );
}

#[test]
fn a_held_team_keeps_its_quota_and_its_queue_says_hold() {
    let world = QuotaWorld {
        held: vec!["search".to_owned()],
        ..world()
    };
    let setup = world.kueue_setup(day(TODAY));
    let held: Vec<(&str, bool, i64)> = setup
        .queues
        .iter()
        .map(|q| (q.cluster_queue.as_str(), q.held, q.quotas[0].nominal))
        .collect();
    assert_eq!(
        held,
        [
            ("research", false, 0),
            ("search", true, 24),
            ("solo", false, 0)
        ]
    );
}

#[test]
fn a_team_without_quota_in_force_keeps_its_queue_and_admits_nothing() {
    let setup = world().kueue_setup(day(TODAY));
    let research = setup
        .queues
        .iter()
        .find(|q| q.cluster_queue == "research")
        .expect("queue");
    assert_eq!(
        research.quotas,
        vec![Quota {
            flavor: "h100".into(),
            resource: "nvidia.com/gpu".into(),
            nominal: 0,
            borrowing_limit: Some(0),
            lending_limit: None
        }]
    );
    let search = setup
        .queues
        .iter()
        .find(|q| q.cluster_queue == "search")
        .expect("queue");
    assert_eq!(search.quotas[0].nominal, 24);
    // GPU Feature Discovery's label for an H100 SXM5 (NVML "NVIDIA H100 80GB HBM3").
    assert_eq!(
        setup.flavors[0].node_labels["nvidia.com/gpu.product"],
        "NVIDIA-H100-80GB-HBM3"
    );
}

#[test]
fn borrowing_nothing_says_why() {
    let mut w = world();
    let today = day(TODAY);
    assert_eq!(
        w.why_no_borrowing("solo", "h100", "nvidia.com/gpu", today)
            .as_deref(),
        Some("solo's queue is in no cohort: its quota is hard")
    );
    // search lends up to 8 of its 24 to research
    assert_eq!(
        w.why_no_borrowing("research", "h100", "nvidia.com/gpu", today),
        None
    );
    // research holds nothing, so it lends search nothing
    assert_eq!(
        w.why_no_borrowing("search", "h100", "nvidia.com/gpu", today)
            .as_deref(),
        Some("the rest of the cohort lends none of it")
    );
    w.approved.push(approved(
        2,
        "research",
        spec(&[("h100", 8, Some(0), None)], "2026-11-01"),
    ));
    assert_eq!(
        w.why_no_borrowing("research", "h100", "nvidia.com/gpu", today)
            .as_deref(),
        Some("research's borrowing limit is 0")
    );
    let impact = w.impact(
        "research",
        &spec(&[("h100", 8, Some(0), None)], TODAY),
        today,
    );
    assert_eq!(
        impact[0].why_no_borrowing.as_deref(),
        Some("research's borrowing limit is 0"),
        "the review's impact row says it"
    );
}

#[test]
fn a_past_start_is_explained_and_a_wrong_end_keeps_the_capacity_check() {
    let w = world();
    let mut s = spec(&[("h100", 41, None, None)], "2026-11-20");
    let checked = w.check("research", &s, day(TODAY));
    assert_eq!(paths(&checked.warnings), ["starts_on"]);
    assert!(
        checked.warnings[0]
            .message
            .contains("counts from the day it is approved")
    );
    // 41 + search's 24 > 64, and the end is before the start: both are said.
    s.ends_on = Some(day("2026-11-01"));
    let checked = w.check("research", &s, day(TODAY));
    assert_eq!(paths(&checked.errors), ["ends_on", "lines[0].nominal"]);
}

/// Kueue admits a Workload whole or not at all. Research (in the cohort) asks 16 H100s with a
/// borrowing limit of 8: a 24-GPU job fits 16 + 8 (it waits for borrowed quota, said as a
/// warning), a 25-GPU job never starts (an error at the field); without a borrowing limit it
/// may borrow all the cohort's unused quota, so only the warning. Solo (no cohort) borrows
/// nothing: 17 GPUs on 16 never start.
#[test]
fn the_largest_job_is_held_against_what_the_queue_may_hold() {
    let w = world();
    let ask = |team: &str, borrowing: Option<i64>, job: u32| {
        let mut s = spec(&[("h100", 16, borrowing, None)], TODAY);
        s.largest_job_gpus = Some(job);
        w.check(team, &s, day(TODAY))
    };
    let fits = ask("research", Some(8), 16);
    assert!(
        fits.errors.is_empty() && fits.warnings.is_empty(),
        "{fits:?}"
    );
    let borrows = ask("research", Some(8), 24);
    assert_eq!(
        (paths(&borrows.errors), paths(&borrows.warnings)),
        (vec![], vec!["largest_job_gpus"])
    );
    assert!(borrows.warnings[0].message.contains("at most 16"));
    let never = ask("research", Some(8), 25);
    assert_eq!(paths(&never.errors), ["largest_job_gpus"]);
    assert!(
        never.errors[0]
            .message
            .starts_with("a job of 25 GPUs would never start: Kueue admits a job whole or not at all, and this queue may hold at most 24 GPUs"),
        "{}",
        never.errors[0].message
    );
    let unlimited = ask("research", None, 40);
    assert_eq!(
        (paths(&unlimited.errors), paths(&unlimited.warnings)),
        (vec![], vec!["largest_job_gpus"])
    );
    let solo = ask("solo", None, 17);
    assert_eq!(paths(&solo.errors), ["largest_job_gpus"]);
    assert!(solo.errors[0].message.contains("it is in no cohort"));
    assert_eq!(
        paths(&ask("research", None, 0).errors),
        ["largest_job_gpus"]
    );
}

#[test]
fn a_project_name_is_bounded() {
    let mut s = spec(&[("h100", 8, None, None)], TODAY);
    s.project = Some("x".repeat(crate::quota::MAX_PROJECT_CHARS + 1));
    let checked = world().check("research", &s, day(TODAY));
    assert_eq!(paths(&checked.errors), ["project"]);
    s.project = Some("llama-70b pre-training".into());
    assert!(world().check("research", &s, day(TODAY)).errors.is_empty());
}
