//! Differential test: random operation sequences run through the Lua scripts (with an
//! explicit time) and through the pure model give identical decisions and states.

#![allow(clippy::unwrap_used)] // tests unwrap

#[path = "support/redis_server.rs"]
mod redis_server;

use std::time::Duration;

use breakerbox::model::{Decision, ModelState, Operation, PermitKind, Transition};
use breakerbox::{Config, Nanos, Phase, Verdict};
use breakerbox_redis::{ManualOp, OutcomeArg, RedisStore, ReplyDecision, StoreOptions};
use redis_server::RedisServer;

/// A small deterministic generator (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// Configs whose open durations are whole microseconds (dyadic factors only), so the
/// model in nanoseconds and the scripts in microseconds compute the same instants.
fn random_config(rng: &mut Rng) -> Config {
    loop {
        let mut b = Config::builder();
        let consecutive = rng.chance(60);
        if consecutive {
            b = b.consecutive_failures(1 + rng.below(4) as u32);
        }
        let slow = rng.chance(50);
        if slow {
            b = b.slow_call_threshold(Duration::from_micros(5_000));
        }
        let rate = rng.chance(65) || !consecutive;
        if rate {
            let mut any = false;
            if rng.chance(70) || !slow {
                b = b.failure_rate(rng.pick(&[0.25, 0.5, 0.6, 1.0]));
                any = true;
            }
            if slow && (rng.chance(50) || !any) {
                b = b.slow_call_rate(rng.pick(&[0.3, 0.5, 1.0]));
            }
            if rng.chance(50) {
                let size = 1 + rng.below(8) as u32;
                b = b
                    .count_window(size)
                    .min_calls(1 + rng.below(u64::from(size)) as u32);
            } else {
                let buckets = 1 + rng.below(5) as u32;
                let width_us = rng.pick(&[1_000u64, 50_000, 300_000]);
                b = b
                    .time_window(
                        Duration::from_micros(width_us * u64::from(buckets)),
                        buckets,
                    )
                    .min_calls(1 + rng.below(6) as u32);
            }
        }
        let recovery = Duration::from_micros(65_536 * rng.pick(&[1u64, 2, 3]));
        b = b.recovery_timeout(recovery);
        if rng.chance(60) {
            b = b.backoff(
                rng.pick(&[1.0, 1.5, 2.0]),
                recovery * rng.pick(&[1u32, 2, 4, 8]),
            );
        }
        if rng.chance(40) {
            b = b.jitter(rng.pick(&[0.25, 0.5]));
        }
        b = b
            .max_probes(1 + rng.below(3) as u32)
            .required_successes(1 + rng.below(3) as u32)
            .half_open_timeout(Duration::from_micros(
                rng.pick(&[100_000u64, 300_000, 1_000_000]),
            ));
        if let Ok(config) = b.build() {
            return config;
        }
    }
}

#[derive(Debug)]
enum Op {
    Acquire,
    Outcomes(Vec<(u64, PermitKind, Verdict, u64)>),
    Release(u64, PermitKind),
    ForceOpen(Option<u64>),
    Disable(Option<u64>),
    Reset,
}

fn random_op(rng: &mut Rng, held: &mut Vec<(u64, PermitKind)>, generation: u64) -> Op {
    let roll = rng.below(100);
    let mut permit = |rng: &mut Rng| -> (u64, PermitKind) {
        if !held.is_empty() && rng.chance(85) {
            let i = rng.below(held.len() as u64) as usize;
            held.swap_remove(i)
        } else {
            let kind = rng.pick(&[
                PermitKind::Normal,
                PermitKind::Probe,
                PermitKind::Passthrough,
            ]);
            (generation.saturating_sub(rng.below(2)), kind)
        }
    };
    let verdict = |rng: &mut Rng| {
        rng.pick(&[
            Verdict::Success,
            Verdict::Failure,
            Verdict::Failure,
            Verdict::Ignore,
        ])
    };
    let latency = |rng: &mut Rng| rng.pick(&[0u64, 4_999, 5_000, 5_001, 20_000]);
    match roll {
        0..=39 => Op::Acquire,
        40..=74 => {
            let n = if rng.chance(30) { 1 + rng.below(5) } else { 1 };
            let mut outcomes = Vec::new();
            for _ in 0..n {
                let (g, k) = permit(rng);
                outcomes.push((g, k, verdict(rng), latency(rng)));
            }
            Op::Outcomes(outcomes)
        }
        75..=86 => {
            let (g, k) = permit(rng);
            Op::Release(g, k)
        }
        87..=90 => Op::ForceOpen(rng.chance(60).then(|| rng.pick(&[50_000u64, 400_000]))),
        91..=94 => Op::Disable(rng.chance(60).then(|| rng.pick(&[50_000u64, 400_000]))),
        _ => Op::Reset,
    }
}

fn model_transitions(reply: &breakerbox_redis::Reply) -> Vec<String> {
    vec![format!("phase {}", reply.state.phase)]
}

fn ns(us: u64) -> Nanos {
    Nanos(us * 1_000)
}

fn check_state(
    ctx: &str,
    model: &ModelState,
    reply: &breakerbox_redis::Reply,
    window: Option<breakerbox::model::WindowCounts>,
    now_us: u64,
) {
    let s = &reply.state;
    if std::env::var("DIFF_TRACE").is_ok() {
        eprintln!("{ctx}\n  lua {s:?}\n  model {model:?}");
    }
    assert_eq!(s.phase, model.phase, "{ctx}: phase");
    assert_eq!(s.generation, model.generation, "{ctx}: generation");
    assert_eq!(ns(s.since_us), model.since, "{ctx}: since");
    let model_until = if model.open_until == Nanos::MAX {
        None
    } else {
        Some(model.open_until)
    };
    assert_eq!(s.until_us.map(ns), model_until, "{ctx}: open_until");
    assert_eq!(s.trips, model.trips, "{ctx}: trips");
    assert_eq!(s.in_flight, model.in_flight, "{ctx}: in_flight");
    assert_eq!(
        s.probe_successes, model.probe_successes,
        "{ctx}: probe_successes"
    );
    if model.phase == Phase::Closed {
        assert_eq!(
            s.consecutive_failures, model.consecutive_failures,
            "{ctx}: consecutive_failures"
        );
        if let Some(counts) = window {
            assert_eq!(counts, model.window.counts(ns(now_us)), "{ctx}: window");
        }
    }
}

async fn run_sequence(
    store: &RedisStore,
    config: &Config,
    rng: &mut Rng,
    ops: usize,
    seen: &mut std::collections::BTreeSet<String>,
) {
    let mut model = ModelState::new(config);
    let mut now_us: u64 = 1_700_000_000_000_000 + rng.below(1_000_000_000);
    let mut held: Vec<(u64, PermitKind)> = Vec::new();
    for step in 0..ops {
        now_us += rng.pick(&[
            0u64, 1, 999, 1_000, 20_000, 65_536, 100_000, 300_000, 700_000,
        ]);
        let r = rng.below(8) as f64 / 8.0;
        let op = random_op(rng, &mut held, model.generation);
        let ctx = format!(
            "{} step {step} {op:?} at {now_us} with {config:?}",
            store.key()
        );
        let now = ns(now_us);
        match &op {
            Op::Acquire => {
                let step = model.apply(Operation::Acquire, now, config, r);
                let answer = store.acquire(Some(now_us), r).await.unwrap();
                let reply = answer.reply;
                match (step.decision, &reply.decision) {
                    (
                        Decision::Admitted { generation, kind },
                        ReplyDecision::Admitted {
                            generation: g,
                            kind: k,
                        },
                    ) => {
                        assert_eq!((generation, kind), (*g, *k), "{ctx}: admitted");
                        held.push((generation, kind));
                    }
                    (
                        Decision::Rejected { phase, retry_after },
                        ReplyDecision::Rejected {
                            phase: p,
                            retry_after_us,
                        },
                    ) => {
                        assert_eq!(phase, *p, "{ctx}: rejected phase");
                        assert_eq!(retry_after, retry_after_us.map(ns), "{ctx}: retry_after");
                    }
                    (m, l) => panic!("{ctx}: model {m:?} vs lua {l:?}"),
                }
                assert_eq!(
                    step.transition,
                    reply.transitions.last().copied(),
                    "{ctx}: transition"
                );
                seen.extend(
                    reply
                        .transitions
                        .iter()
                        .map(|t| t.reason.as_str().to_string()),
                );
                check_state(&ctx, &model, &reply, None, now_us);
                seen.insert(
                    format!("{:?}", reply.decision)
                        .split([' ', '{'])
                        .next()
                        .unwrap_or("")
                        .to_string(),
                );
                if let ReplyDecision::Admitted { kind, .. } = reply.decision {
                    seen.insert(format!("{kind:?}"));
                }
            }
            Op::Outcomes(outcomes) => {
                let mut decisions = Vec::new();
                let mut transitions: Vec<Transition> = Vec::new();
                let mut args = Vec::new();
                for &(generation, kind, verdict, latency_us) in outcomes {
                    let step = model.apply(
                        Operation::Outcome {
                            generation,
                            kind,
                            verdict,
                            latency: ns(latency_us),
                            retry_hint: None,
                        },
                        now,
                        config,
                        r,
                    );
                    decisions.push(step.decision == Decision::Recorded);
                    assert!(matches!(
                        step.decision,
                        Decision::Recorded | Decision::Stale
                    ));
                    transitions.extend(step.transition);
                    args.push(OutcomeArg {
                        generation,
                        kind,
                        verdict,
                        latency: Duration::from_micros(latency_us),
                    });
                }
                let reply = store.record(&args, Some(now_us), r).await.unwrap().reply;
                assert_eq!(
                    reply.decision,
                    ReplyDecision::Batch(decisions),
                    "{ctx}: outcomes"
                );
                assert_eq!(reply.transitions, transitions, "{ctx}: transitions");
                seen.extend(
                    reply
                        .transitions
                        .iter()
                        .map(|t| t.reason.as_str().to_string()),
                );
                check_state(&ctx, &model, &reply, None, now_us);
            }
            Op::Release(generation, kind) => {
                let step = model.apply(
                    Operation::Release {
                        generation: *generation,
                        kind: *kind,
                    },
                    now,
                    config,
                    r,
                );
                let reply = store
                    .release(*generation, *kind, Some(now_us), r)
                    .await
                    .unwrap()
                    .reply;
                let expected = match step.decision {
                    Decision::Recorded => ReplyDecision::Recorded,
                    Decision::Stale => ReplyDecision::Stale,
                    other => panic!("{ctx}: model release gave {other:?}"),
                };
                assert_eq!(reply.decision, expected, "{ctx}: release");
                assert_eq!(
                    step.transition,
                    reply.transitions.last().copied(),
                    "{ctx}: transition"
                );
                seen.extend(
                    reply
                        .transitions
                        .iter()
                        .map(|t| t.reason.as_str().to_string()),
                );
                check_state(&ctx, &model, &reply, None, now_us);
            }
            Op::ForceOpen(d) | Op::Disable(d) => {
                let until = d.map(|d| ns(now_us + d));
                let (operation, manual) = match op {
                    Op::ForceOpen(_) => (
                        Operation::ForceOpen { until },
                        ManualOp::ForceOpen(d.map(Duration::from_micros)),
                    ),
                    _ => (
                        Operation::Disable { until },
                        ManualOp::Disable(d.map(Duration::from_micros)),
                    ),
                };
                let step = model.apply(operation, now, config, r);
                let reply = store.manual(manual, Some(now_us), r).await.unwrap().reply;
                assert_eq!(reply.decision, ReplyDecision::Done, "{ctx}");
                assert_eq!(
                    step.transition,
                    reply.transitions.last().copied(),
                    "{ctx}: transition"
                );
                seen.extend(
                    reply
                        .transitions
                        .iter()
                        .map(|t| t.reason.as_str().to_string()),
                );
                check_state(&ctx, &model, &reply, None, now_us);
            }
            Op::Reset => {
                let step = model.apply(Operation::Reset, now, config, r);
                let reply = store
                    .manual(ManualOp::Reset, Some(now_us), r)
                    .await
                    .unwrap()
                    .reply;
                assert_eq!(
                    step.transition,
                    reply.transitions.last().copied(),
                    "{ctx}: transition"
                );
                seen.extend(
                    reply
                        .transitions
                        .iter()
                        .map(|t| t.reason.as_str().to_string()),
                );
                check_state(&ctx, &model, &reply, None, now_us);
            }
        }
        // A read at the same instant: the stored state and the window's counts.
        let read = store.read(Some(now_us)).await.unwrap().reply;
        for t in &model_transitions(&read) {
            seen.insert(t.clone());
        }
        let ReplyDecision::State(counts) = read.decision else {
            panic!("{ctx}: read gave {:?}", read.decision)
        };
        check_state(
            &format!("{ctx} (read)"),
            &model,
            &read,
            Some(counts),
            now_us,
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lua_scripts_and_pure_model_agree_on_600_random_sequences() {
    let server = RedisServer::start();
    let client = redis::Client::open(server.url()).unwrap();
    let seed: u64 = std::env::var("DIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x0B4E_A4E4_B0C5);
    let sequences: u64 = std::env::var("DIFF_SEQUENCES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(600);
    let options = StoreOptions {
        timeout: Duration::from_secs(5),
        ..StoreOptions::default()
    };
    let mut tasks = Vec::new();
    for lane in 0..4u64 {
        let client = client.clone();
        let options = options.clone();
        tasks.push(tokio::spawn(async move {
            let mut seen = std::collections::BTreeSet::new();
            let only: Option<u64> = std::env::var("DIFF_ONLY").ok().and_then(|s| s.parse().ok());
            for sequence in (lane..sequences).step_by(4) {
                if only.is_some_and(|o| o != sequence) {
                    continue;
                }
                let mut rng = Rng(seed ^ sequence.wrapping_mul(0x2545_F491_4F6C_DD1D));
                let config = random_config(&mut rng);
                let name = format!("diff-{sequence}");
                let store = RedisStore::new(client.clone(), &name, &config, &options);
                let ops = 40 + rng.below(60) as usize;
                run_sequence(&store, &config, &mut rng, ops, &mut seen).await;
            }
            seen
        }));
    }
    let mut seen = std::collections::BTreeSet::new();
    for task in tasks {
        seen.extend(task.await.unwrap());
    }
    // The sequences must reach every phase, admit probes and reject, or they prove little.
    for needed in [
        "phase closed",
        "phase open",
        "phase half_open",
        "phase forced_open",
        "phase disabled",
        "Probe",
        "Normal",
        "Passthrough",
        "Rejected",
        "consecutive_failures",
        "failure_rate",
        "slow_call_rate",
        "cooldown_elapsed",
        "probe_failed",
        "half_open_timed_out",
        "probes_succeeded",
        "override_expired",
        "forced_open",
        "disabled",
        "reset",
    ] {
        assert!(
            seen.contains(needed),
            "no sequence reached {needed}: {seen:?}"
        );
    }
}
