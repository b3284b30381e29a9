#![allow(clippy::unwrap_used, clippy::disallowed_methods, missing_docs)]
use breakerbox::model::PermitKind;
use breakerbox::{Config, Verdict};
use breakerbox_redis::{BatchItem, OutcomeArg, RedisStore, StoreOptions};
use std::time::{Duration, Instant};
#[tokio::main(flavor = "current_thread")]
async fn main() {
    let client = redis::Client::open("redis://127.0.0.1:6379/").unwrap();
    let config = Config::builder().consecutive_failures(5).build().unwrap();
    let store = RedisStore::new(
        client,
        &format!("scratch{}", std::process::id()),
        &config,
        &StoreOptions::default(),
    );
    let n: usize = std::env::args().nth(1).map_or(465, |a| a.parse().unwrap());
    let items: Vec<BatchItem> = (0..n)
        .map(|_| {
            BatchItem::Outcome(OutcomeArg::new(
                0,
                PermitKind::Normal,
                Verdict::Success,
                Duration::from_micros(300),
            ))
        })
        .collect();
    store.record_batch(&items, None, 0.0).await.unwrap();
    for _ in 0..5 {
        let t = Instant::now();
        store.record_batch(&items, None, 0.0).await.unwrap();
        println!("{n} items: {:?}", t.elapsed());
    }
}
