//! With the `tracing` feature, every breaker event is emitted through `tracing`.
#![cfg(feature = "tracing")]

use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use breakerbox::{CircuitBreaker, ManualClock};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

#[derive(Default, Clone)]
struct Recorder(Arc<Mutex<Vec<String>>>);

struct Fields(String);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0.push_str(&format!(" {}={:?}", field.name(), value));
    }
}

impl Subscriber for Recorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields(format!(
            "{} {}",
            event.metadata().level(),
            event.metadata().target()
        ));
        event.record(&mut fields);
        if let Ok(mut lines) = self.0.lock() {
            lines.push(fields.0);
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[test]
fn transitions_rejections_and_stale_results_are_traced() {
    let recorder = Recorder::default();
    let lines = recorder.0.clone();
    tracing::subscriber::with_default(recorder, || {
        let breaker = CircuitBreaker::builder()
            .name("payments")
            .consecutive_failures(1)
            .clock(ManualClock::new())
            .build()
            .unwrap();
        let old = breaker.try_acquire().unwrap();
        breaker.try_acquire().unwrap().failure();
        assert!(breaker.try_acquire().is_err());
        old.success();
    });
    let lines = lines.lock().unwrap();
    let joined = lines.join("\n");
    assert!(
        joined.contains("INFO breakerbox")
            && joined.contains("breaker=\"payments\"")
            && joined.contains("from=\"closed\"")
            && joined.contains("to=\"open\"")
            && joined.contains("reason=\"consecutive_failures\""),
        "{joined}"
    );
    assert!(
        joined.contains("TRACE breakerbox") && joined.contains("call rejected"),
        "{joined}"
    );
    assert!(
        joined.contains("DEBUG breakerbox") && joined.contains("stale result dropped"),
        "{joined}"
    );
}
