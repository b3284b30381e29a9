//! A batch on the wire: `record.lua`'s arguments, with runs of like outcomes sent once.
//!
//! A node in local-view mode sends its closed-phase outcomes in batches, mostly long runs
//! of successes. Sending each as its own seven arguments made a second's batch (hundreds
//! of outcomes) cost the client, the wire and Redis about a millisecond, and a failure
//! queued behind it reached Redis that much later. A run of successes (or of ignores)
//! of one generation, with the same slow-call class, within the call deadline (rule 22: a
//! late call is a failure to the scripts, and travels alone), no retry hint and no lease
//! token, is sent as one entry with a count; the script applies the entry once per outcome, so
//! the state is the same as for the outcomes sent one by one:
//! - every outcome of a run is filed at the script's time and judged slow or not alike;
//! - a success ends the failure streak if it completed after the streak began (rule 19),
//!   so of a run only the youngest completion matters, which the entry carries.

use std::time::Duration;

use breakerbox::model::PermitKind;
use breakerbox::Verdict;

use crate::store::{BatchItem, OutcomeArg};
use crate::wire::{kind_code, micros};

/// One entry of the wire batch: an item, and how many like items it stands for.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Entry {
    item: BatchItem,
    count: u64,
}

/// Whether `o` may stand in a run: a success or an ignore of a closed-phase call, with
/// no retry hint and no lease token.
fn mergeable(o: &OutcomeArg) -> bool {
    matches!(o.verdict, Verdict::Success | Verdict::Ignore)
        && o.kind == PermitKind::Normal
        && o.retry_hint.is_none()
        && o.token == 0
}

/// The items as runs: like neighbours merged (see the module docs). `slow_us`: the
/// slow-call threshold in microseconds, as the scripts compare it (`None`: none);
/// `late_us`: a normal call's deadline (rule 22) likewise: a call the scripts judge late is
/// a failure to them, and failures are never merged (each one's age may move the streak's
/// start, rule 19), so a late call always travels alone.
fn runs(items: &[BatchItem], slow_us: Option<u64>, late_us: Option<u64>) -> Vec<Entry> {
    let over = |limit: Option<u64>, latency: Duration| {
        limit.is_some_and(|threshold| micros(latency) > threshold)
    };
    let slow = |latency: Duration| over(slow_us, latency);
    let on_time = |latency: Duration| !over(late_us, latency);
    let mut out: Vec<Entry> = Vec::with_capacity(items.len().min(64));
    for item in items {
        if let (
            Some(Entry {
                item: BatchItem::Outcome(run),
                count,
            }),
            BatchItem::Outcome(o),
        ) = (out.last_mut(), item)
        {
            if mergeable(run)
                && mergeable(o)
                && on_time(run.latency)
                && on_time(o.latency)
                && run.verdict == o.verdict
                && run.generation == o.generation
                && slow(run.latency) == slow(o.latency)
            {
                run.age = run.age.min(o.age);
                *count += 1;
                continue;
            }
        }
        out.push(Entry {
            item: *item,
            count: 1,
        });
    }
    out
}

/// `record.lua`'s own arguments for `items`: the number of entries, then per entry its
/// generation, kind, verdict, latency, retry hint, lease token, age and count.
pub(crate) fn arguments(
    items: &[BatchItem],
    slow_us: Option<u64>,
    late_us: Option<u64>,
) -> Vec<String> {
    let entries = runs(items, slow_us, late_us);
    let mut rest = Vec::with_capacity(1 + entries.len() * 8);
    rest.push(entries.len().to_string());
    for Entry { item, count } in entries {
        let (generation, kind, verdict, latency, hint, token, age) = match item {
            BatchItem::Outcome(o) => (
                o.generation,
                o.kind,
                match o.verdict {
                    Verdict::Success => "0",
                    Verdict::Failure => "1",
                    Verdict::Ignore => "2",
                },
                micros(o.latency),
                o.retry_hint
                    .map_or(-1, |h| i64::try_from(micros(h)).unwrap_or(i64::MAX)),
                o.token,
                micros(o.age),
            ),
            BatchItem::Release(generation, kind, token) => (generation, kind, "3", 0, -1, token, 0),
        };
        rest.push(generation.to_string());
        rest.push(kind_code(kind).to_string());
        rest.push(verdict.to_string());
        rest.push(latency.to_string());
        rest.push(hint.to_string());
        rest.push(token.to_string());
        rest.push(age.to_string());
        rest.push(count.to_string());
    }
    rest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(verdict: Verdict, latency_us: u64, age_us: u64) -> BatchItem {
        BatchItem::Outcome(OutcomeArg {
            age: Duration::from_micros(age_us),
            ..OutcomeArg::new(
                3,
                PermitKind::Normal,
                verdict,
                Duration::from_micros(latency_us),
            )
        })
    }

    #[test]
    fn like_successes_are_one_entry_with_the_youngest_age() {
        let items = [
            outcome(Verdict::Success, 10, 900),
            outcome(Verdict::Success, 20, 500),
            outcome(Verdict::Success, 30, 700),
        ];
        let runs = runs(&items, Some(100), None);
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].count, 3);
        assert_eq!(runs[0].item, outcome(Verdict::Success, 10, 500));
    }

    #[test]
    fn failures_slow_calls_hints_tokens_and_releases_break_runs() {
        let hinted = BatchItem::Outcome(OutcomeArg {
            retry_hint: Some(Duration::from_secs(1)),
            ..OutcomeArg::new(3, PermitKind::Normal, Verdict::Success, Duration::ZERO)
        });
        let probe = BatchItem::Outcome(OutcomeArg {
            token: 9,
            ..OutcomeArg::new(3, PermitKind::Probe, Verdict::Success, Duration::ZERO)
        });
        let items = [
            outcome(Verdict::Success, 10, 0),
            outcome(Verdict::Failure, 10, 0),
            outcome(Verdict::Failure, 10, 0),
            outcome(Verdict::Success, 10, 0),
            outcome(Verdict::Success, 101, 0),
            hinted,
            probe,
            BatchItem::Release(3, PermitKind::Normal, 0),
            BatchItem::Release(3, PermitKind::Normal, 0),
            outcome(Verdict::Ignore, 10, 0),
            outcome(Verdict::Ignore, 10, 0),
        ];
        let counts: Vec<u64> = runs(&items, Some(100), None)
            .iter()
            .map(|e| e.count)
            .collect();
        assert_eq!(counts, [1, 1, 1, 1, 1, 1, 1, 1, 1, 2]);
        // Without a threshold nothing is slow: the two successes merge.
        let counts: Vec<u64> = runs(&items[3..5], None, None)
            .iter()
            .map(|e| e.count)
            .collect();
        assert_eq!(counts, [2]);
    }

    #[test]
    fn a_call_past_its_deadline_is_never_merged() {
        let items = [
            outcome(Verdict::Success, 0, 0),
            outcome(Verdict::Success, 4_000, 0),
            outcome(Verdict::Success, 5_001, 0),
            outcome(Verdict::Success, 5_002, 0),
            outcome(Verdict::Success, 5_000, 0),
        ];
        let counts: Vec<u64> = runs(&items, None, Some(5_000))
            .iter()
            .map(|e| e.count)
            .collect();
        assert_eq!(counts, [2, 1, 1, 1]);
        assert_eq!(runs(&items, None, None).len(), 1);
        // Late ignores are failures to the scripts: each keeps its own age (rule 19).
        let late = [
            outcome(Verdict::Ignore, 20_000, 1),
            outcome(Verdict::Ignore, 20_000, 0),
        ];
        let entries = runs(&late, None, Some(19_999));
        assert_eq!(entries.len(), 2);
    }

    #[test]
    fn another_generation_starts_a_new_run() {
        let other = BatchItem::Outcome(OutcomeArg::new(
            4,
            PermitKind::Normal,
            Verdict::Success,
            Duration::ZERO,
        ));
        let items = [outcome(Verdict::Success, 0, 0), other];
        assert_eq!(runs(&items, None, None).len(), 2);
        assert_eq!(arguments(&items, None, None).len(), 1 + 2 * 8);
    }
}
