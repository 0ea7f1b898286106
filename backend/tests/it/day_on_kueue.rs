//! Planned vs measured on real history: a day of two teams' training and evaluations run on the
//! real Kueue in compressed time (an hour of the week in [`HOUR`] of real time), recorded by
//! gpufleet's workload recorder, moved to a past week at full scale, and replayed by the week
//! engine through `GET /api/plan/replay` (what `gpufleet plan replay` prints). The measured side
//! is what real Kueue did, not a model of it, and is checked against the test's own watch of
//! Kueue's Workloads; the planned side must evict as Kueue did and hold as many GPU-hours, to
//! the second Kubernetes stamps. Its waits are printed, not held: in compressed time Kueue's
//! one-second requeue of waiting jobs ([`drive`]) is a quarter of an hour of the week for
//! each job that waited, and it adds up along a queue (docs/planning.md).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::http::Method;
use serde_json::json;
use shared::{
    kueue::{INFERENCE_PRIORITY, TRAINING_PRIORITY, priority_class},
    planning::replay::{Figure, Replay},
};
use sqlx::PgPool;

use crate::{
    cluster::{call, reconcile},
    common::real_cluster::{Names, eventually, real},
    drive::{self, Clock, Timed},
    real_cluster::{approve, job, real_rig},
};

/// Real time per hour of the week. Kubernetes stamps conditions in whole seconds, so a
/// recorded time is known to within `3_600 / HOUR` seconds of the week: 15 minutes. A run's
/// recorded length (admission to finish) is then off by up to two of them, 30 minutes, less
/// than [`ARRIVAL`]: a job the replay ends late still ends before the next hour's arrivals.
/// (At 3 s an hour, 40 minutes against 40, the replay once evicted a job Kueue did not.)
const HOUR: Duration = Duration::from_secs(4);
/// How far into its hour a job is created: past Kueue's requeue of the jobs waiting when
/// others completed at the hour's start (a second later, [`drive`]), as it would be in a week
/// where the second is nothing.
const ARRIVAL: Duration = Duration::from_millis(2_500);

/// Every job's GPUs: one node.
const GPUS: u32 = 8;

/// The day's jobs of one team, [`GPUS`] each: training at the training priority,
/// (hour it is created, hours it works); evaluations at the inference priority, an hour each.
struct TeamDay {
    team: &'static str,
    training: &'static [(u32, u32)],
    evaluations: &'static [u32],
}

/// research (16 GPUs of quota) and search (8) in one cohort: research borrows search's idle
/// quota, search's evaluation and training take it back, evaluations preempt training.
const DAY: [TeamDay; 2] = [
    TeamDay {
        team: "research",
        training: &[
            (0, 4),
            (0, 3),
            (1, 5),
            (2, 2),
            (3, 6),
            (5, 4),
            (6, 3),
            (8, 5),
            (9, 2),
            (11, 4),
            (12, 3),
            (14, 5),
        ],
        evaluations: &[4, 10],
    },
    TeamDay {
        team: "search",
        training: &[(0, 3), (2, 5), (4, 2), (7, 4), (9, 6), (13, 3)],
        evaluations: &[6],
    },
];

fn now_ms() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970");
    i64::try_from(since.as_millis()).expect("ms")
}

#[sqlx::test(migrator = "backend::MIGRATOR")]
async fn a_day_real_kueue_ran_replays_close_to_what_it_measured(pool: PgPool) {
    let names = Names::new("week");
    let rig = real_rig(&pool, &names).await;
    let flavor = names.of("h200-train");
    for (who, team, nominal) in [(&rig.rita, "research", 16), (&rig.sam, "search", 8)] {
        let line = json!({"flavor": flavor, "resource": "nvidia.com/gpu", "nominal": nominal});
        approve(&rig, who, team, json!([line])).await;
    }
    reconcile(&rig).await;
    for team in ["research", "search"] {
        eventually(30, &format!("{team}'s ClusterQueue active"), async || {
            let cq = real().object("ClusterQueue", None, &names.of(team)).await?;
            let conditions = cq["status"]["conditions"].as_array()?;
            let active = conditions.iter().find(|c| c["type"] == "Active")?;
            (active["status"] == "True").then_some(())
        })
        .await;
    }
    let recorder = backend::cluster::history::spawn(rig.state.clone()).expect("a cluster is read");

    let (mut jobs, mut team_of) = (Vec::new(), Vec::new());
    for (t, day) in DAY.iter().enumerate() {
        let namespace = names.of(day.team);
        let mut add = |name: String, priority: i32, (at, runs): (u32, u32)| {
            let manifest = job(&namespace, day.team, &name, GPUS, &priority_class(priority));
            jobs.push(Timed { manifest, at, runs });
            team_of.push(t);
        };
        for (n, &work) in day.training.iter().enumerate() {
            add(format!("train-{n}"), TRAINING_PRIORITY, work);
        }
        for (n, &at) in day.evaluations.iter().enumerate() {
            add(format!("eval-{n}"), INFERENCE_PRIORITY, (at, 1));
        }
    }
    let client = real().client().await;
    let mut watches = Vec::new();
    for day in &DAY {
        watches.push(drive::watch(&client, &names.of(day.team)).await);
    }
    let clock = Clock {
        unit: HOUR,
        arrival: ARRIVAL,
        quiet_units: 3,
        max_units: 48,
    };
    let started_ms = now_ms();
    let seen = drive::run(&client, &jobs, watches, &clock).await;
    let finished = seen
        .iter()
        .filter(|s| s.change == drive::Change::Finished)
        .count();
    assert_eq!(
        finished,
        jobs.len(),
        "every job finished on Kueue: {seen:?}"
    );

    let namespaces: Vec<String> = DAY.iter().map(|d| names.of(d.team)).collect();
    eventually(30, "every Workload recorded as finished", async || {
        let recorded: i64 = sqlx::query_scalar(
            "select count(*) from workload_history where namespace = any($1) and finished_at is not null",
        )
        .bind(&namespaces)
        .fetch_one(&pool)
        .await
        .ok()?;
        (recorded == i64::try_from(jobs.len()).ok()?).then_some(())
    })
    .await;
    recorder.abort();

    // The recorded day becomes the first day of the week two weeks ago, at full scale, under
    // the quotas approved a week before it; their requests say no checkpoints, as the driver's
    // Jobs start their work again after an eviction.
    let from = backend::clock::today().plus(-14);
    let from_ms = i64::from(from.days_since_epoch()) * 86_400_000;
    scale_history(
        &pool,
        &namespaces,
        (started_ms, from_ms),
        3_600_000 / HOUR.as_millis() as i64,
    )
    .await;
    sqlx::query(
        "update quota_requests set spec = jsonb_set(jsonb_set(spec, '{starts_on}', to_jsonb($1::text)), \
         '{checkpoint_interval_min}', 'null')",
    )
    .bind(from.plus(-7).to_string())
    .execute(&pool)
    .await
    .expect("quotas in force");

    let replay: Replay = call(
        &rig,
        Method::GET,
        &format!("/api/plan/replay?from={from}"),
        &rig.alex,
        None,
    )
    .await
    .json();
    let table = table(&replay);
    eprintln!("{table}");
    assert_eq!(replay.workloads, jobs.len() as u64, "{table}");
    // The measured side is what the watch saw Kueue do, to the second Kubernetes stamps.
    for (t, day) in DAY.iter().enumerate() {
        let watched = watched(&jobs, &seen, |j| team_of[j] == t);
        let measured = |f: Figure| figure(&replay, day.team, f).1;
        assert_eq!(
            measured(Figure::Evictions),
            Some(watched.evictions),
            "{}: {table}",
            day.team
        );
        for (f, minutes) in [
            (Figure::WaitP50Minutes, watched.p50),
            (Figure::WaitP95Minutes, watched.p95),
        ] {
            let m = measured(f).expect("measured");
            assert!(
                (m - minutes).abs() <= STAMP_MINUTES + 1.0,
                "{} {f:?}: {m} against {minutes} watched: {table}",
                day.team
            );
        }
        let (planned, m) = figure(&replay, day.team, Figure::AdmittedGpuHours);
        let m = m.expect("measured");
        let within = watched.runs * f64::from(GPUS) * 2.0 * STAMP_MINUTES / 60.0;
        // The replay's own side: Kueue's evictions, and the GPU-hours each run held (the
        // replay works each job's recorded last run).
        let planned_evictions = figure(&replay, day.team, Figure::Evictions).0;
        assert_eq!(
            planned_evictions,
            Some(watched.evictions),
            "{}: {table}",
            day.team
        );
        let planned = planned.expect("planned");
        assert!(
            (planned - m).abs() <= within,
            "{}: {planned} planned GPU-hours: {table}",
            day.team
        );
        assert!(
            (m - watched.gpu_hours).abs() <= within,
            "{}: {m} GPU-hours against {} watched: {table}",
            day.team,
            watched.gpu_hours
        );
    }
}

/// What Kubernetes' whole-second stamps leave unknown of a time of the week, in minutes.
const STAMP_MINUTES: f64 = 3_600.0 / HOUR.as_secs() as f64 / 60.0;

/// What the watch saw of the jobs `of` selects, in the week's hours and minutes: evictions,
/// waits to the first admission (p50 and p95, the week's rule: the sorted waits' element at
/// round((n − 1) × q)), GPU-hours held, and the runs that make them up.
struct Watched {
    evictions: f64,
    p50: f64,
    p95: f64,
    gpu_hours: f64,
    runs: f64,
}

fn watched(jobs: &[Timed], seen: &[drive::Seen], of: impl Fn(usize) -> bool) -> Watched {
    let hours = |at: Duration| at.as_secs_f64() / HOUR.as_secs_f64();
    let mut out = Watched {
        evictions: 0.0,
        p50: 0.0,
        p95: 0.0,
        gpu_hours: 0.0,
        runs: 0.0,
    };
    let mut waits = Vec::new();
    for (j, job) in jobs.iter().enumerate().filter(|(j, _)| of(*j)) {
        let (mut since, mut first) = (None, true);
        for s in seen.iter().filter(|s| s.job == j) {
            match s.change {
                drive::Change::Admitted { .. } => {
                    if first {
                        let created = f64::from(job.at) + hours(ARRIVAL);
                        waits.push((hours(s.at) - created) * 60.0);
                        first = false;
                    }
                    since = Some(s.at);
                }
                drive::Change::Evicted | drive::Change::Finished => {
                    out.evictions += f64::from(u8::from(s.change == drive::Change::Evicted));
                    let from = since.take().expect("admitted before");
                    out.gpu_hours += f64::from(GPUS) * hours(s.at - from);
                    out.runs += 1.0;
                }
            }
        }
    }
    waits.sort_by(f64::total_cmp);
    let at = |q: f64| waits[((waits.len() - 1) as f64 * q).round() as usize];
    (out.p50, out.p95) = (at(0.5), at(0.95));
    out
}

/// Moves the Workloads of `namespaces` recorded from `started_ms` to `from_ms`, each time
/// `factor` times as far from the start.
async fn scale_history(
    pool: &PgPool,
    namespaces: &[String],
    (started_ms, from_ms): (i64, i64),
    factor: i64,
) {
    let at = |column: &str| {
        format!(
            "{column} = to_timestamp(($1 + (extract(epoch from {column}) * 1000 - $2) * $3) / 1000.0)"
        )
    };
    let columns = [
        "created_at",
        "quota_reserved_at",
        "admitted_at",
        "last_admitted_at",
        "finished_at",
        "first_seen_at",
        "last_seen_at",
        "gone_at",
    ];
    let sets: Vec<String> = columns.iter().map(|c| at(c)).collect();
    let history = format!(
        "update workload_history set {}, evicted = case when evicted is null then null else \
         jsonb_set(evicted, '{{at_ms}}', to_jsonb($1 + ((evicted->>'at_ms')::bigint - $2) * $3)) end \
         where namespace = any($4)",
        sets.join(", ")
    );
    let evictions = format!(
        "update workload_evictions set {} where uid in \
         (select uid from workload_history where namespace = any($4))",
        at("at")
    );
    for statement in [history, evictions] {
        sqlx::query(&statement)
            .bind(from_ms)
            .bind(started_ms)
            .bind(factor)
            .bind(namespaces)
            .execute(pool)
            .await
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
    }
}

/// The replay's figures, team by team, planned against measured.
fn table(replay: &Replay) -> String {
    let mut out =
        String::from("| team | figure | planned | measured | error % |\n|---|---|---|---|---|\n");
    for team in replay.teams.iter().chain([&replay.total]) {
        for f in &team.figures {
            let show = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.1}"));
            out += &format!(
                "| {} | {:?} | {} | {} | {} |\n",
                team.team,
                f.figure,
                show(f.planned),
                show(f.measured),
                show(f.error_pct)
            );
        }
    }
    out + &format!("problems: {:?}\n", replay.problems)
}

/// `team`'s `figure`, planned and measured.
fn figure(replay: &Replay, team: &str, figure: Figure) -> (Option<f64>, Option<f64>) {
    let comparison = replay.teams.iter().find(|t| t.team == team).expect("team");
    let f = comparison
        .figures
        .iter()
        .find(|f| f.figure == figure)
        .expect("figure");
    (f.planned, f.measured)
}
