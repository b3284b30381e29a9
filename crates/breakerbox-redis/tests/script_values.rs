//! Every check `load` (lua/common.lua) makes of a stored value, one value at a time on
//! each side of it: a read of a value just inside a check answers, one just outside it is
//! reported corrupt (and left alone). Kills the mutants of `scripts/lua_mutants.py` in
//! `nonneg`, `parse_leases` and `load` that the differential test cannot reach (it never
//! stores a value the scripts did not write).

#![allow(clippy::unwrap_used)] // tests unwrap

#[path = "support/redis_server.rs"]
mod redis_server;

use std::time::Duration;

use breakerbox::model::PermitKind;
use breakerbox::{Config, Verdict};
use breakerbox_redis::{OutcomeArg, RedisStore, StoreError, StoreOptions};
use redis_server::RedisServer;

/// A stored value changed: fields set (`Some`) or removed (`None`).
type Change = &'static [(&'static str, Option<&'static str>)];

/// (change, the text a corrupt report contains, or `None`: the value is fine)
const CASES: &[(Change, Option<&str>)] = &[
    // nonneg: digits only, at most 16 of them, present.
    (&[("gen", Some("1234567890123456"))], None),
    (&[("gen", Some("12345678901234567"))], Some("field gen")),
    (&[("gen", Some("1e3"))], Some("field gen is 1e3")),
    (&[("gen", Some("0x10"))], Some("field gen is 0x10")),
    (&[("gen", None)], Some("field gen is false")),
    // `until` alone may be -1 (never).
    (&[("until", Some("-1"))], None),
    (&[("gen", Some("-1"))], Some("field gen is -1")),
    (&[("until", Some("x"))], Some("field until is x")),
    // The phase is one of five.
    (&[("phase", Some("4"))], None),
    (&[("phase", Some("5"))], Some("field phase is 5")),
    // The format, and a hash of someone else.
    (&[("v", Some("1"))], Some("field v is 1")),
    (&[("v", None)], Some("field v is missing")),
    (&[("wsig", None)], Some("field wsig is missing")),
    // Leases: one per slot in flight, "token:deadline", tokens up to 20 digits,
    // deadlines up to 16, the whole field up to 8 KiB.
    (
        &[("inflight", Some("1"))],
        Some("field inflight is 1 for 0 leases"),
    ),
    (
        &[
            ("inflight", Some("1")),
            ("leases", Some("12345678901234567890:1234567890123456")),
        ],
        None,
    ),
    (
        &[
            ("inflight", Some("1")),
            ("leases", Some("123456789012345678901:5")),
        ],
        Some("field leases"),
    ),
    (
        &[
            ("inflight", Some("1")),
            ("leases", Some("5:12345678901234567")),
        ],
        Some("field leases"),
    ),
    (
        &[("inflight", Some("1")), ("leases", Some("5:"))],
        Some("field leases"),
    ),
    (
        &[("inflight", Some("1")), ("leases", Some("x"))],
        Some("field leases"),
    ),
    (
        &[("inflight", Some("2")), ("leases", Some("5:1,,6:2"))],
        None,
    ),
    // No leases field: none in flight (`raw == false`).
    (&[("leases", None)], None),
    // Optional fields: absent is fine, garbage is not.
    (
        &[
            ("ss", None),
            ("shadow", None),
            ("shrej", None),
            ("rs", None),
            ("rn", None),
        ],
        None,
    ),
    (&[("ss", Some("x"))], Some("field ss is x")),
    (&[("shadow", Some("1"))], None),
    (&[("shadow", Some("0"))], None),
    (&[("shadow", Some("2"))], Some("field shadow is 2")),
    (&[("shrej", Some("x"))], Some("field shrej is x")),
    (&[("rs", Some("-1"))], None),
    (&[("rs", Some("7"))], None),
    (&[("rs", Some("x"))], Some("field rs is x")),
    (&[("rn", Some("x"))], Some("field rn is x")),
    // The count window (size 4): at most 4 calls, the position before 4, at most as many
    // failures and slow calls as calls, as many calls as the ring holds.
    (
        &[("rlen", Some("4")), ("cc", Some("4")), ("rpos", Some("3"))],
        None,
    ),
    (
        &[("rlen", Some("5")), ("cc", Some("5"))],
        Some("count window"),
    ),
    (&[("rpos", Some("4"))], Some("count window")),
    (&[("cf", Some("1")), ("cs", Some("1"))], None),
    (&[("cf", Some("2"))], Some("count window")),
    (&[("cs", Some("2"))], Some("count window")),
    (&[("cc", Some("2"))], Some("count window")),
];

#[tokio::test]
async fn a_read_tells_every_stored_value_just_inside_a_check_from_one_just_outside() {
    let server = RedisServer::start();
    let config = Config::builder()
        .failure_rate(0.5)
        .count_window(4)
        .min_calls(4)
        .build()
        .unwrap();
    let client = redis::Client::open(server.url()).unwrap();
    let options = StoreOptions {
        ttl: Duration::from_secs(60),
        timeout: Duration::from_secs(10),
        ..StoreOptions::default()
    };
    let store = RedisStore::new(client.clone(), "values", &config, &options);
    let ok = OutcomeArg::new(0, PermitKind::Normal, Verdict::Success, Duration::ZERO);
    store.record(&[ok], Some(1_000), 0.0).await.unwrap();
    let mut conn = client.get_connection().unwrap();
    let key = store.key().to_string();
    let pristine: Vec<(String, String)> = redis::cmd("HGETALL").arg(&key).query(&mut conn).unwrap();
    // The state the cases start from: one call, no failure, nothing in flight.
    let fields: std::collections::HashMap<_, _> = pristine.iter().cloned().collect();
    assert_eq!(
        (
            &fields["rlen"][..],
            &fields["cc"][..],
            &fields["cf"][..],
            &fields["inflight"][..]
        ),
        ("1", "1", "0", "0")
    );
    for (at, (change, corrupt)) in CASES.iter().enumerate() {
        let _: () = redis::cmd("DEL").arg(&key).query(&mut conn).unwrap();
        let _: () = redis::cmd("HSET")
            .arg(&key)
            .arg(&pristine)
            .query(&mut conn)
            .unwrap();
        for (field, value) in change.iter() {
            let cmd = match value {
                Some(value) => {
                    let mut cmd = redis::cmd("HSET");
                    cmd.arg(&key).arg(field).arg(value);
                    cmd
                }
                None => {
                    let mut cmd = redis::cmd("HDEL");
                    cmd.arg(&key).arg(field);
                    cmd
                }
            };
            let _: () = cmd.query(&mut conn).unwrap();
        }
        let read = store.read(Some(2_000 + at as u64)).await;
        match (corrupt, read) {
            (None, Ok(answer)) => assert_eq!(answer.repaired, None, "{change:?}"),
            (Some(why), Err(StoreError::Corrupt(found))) => {
                assert!(found.contains(why), "{change:?}: {found}");
            }
            (_, other) => panic!("{change:?}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_leases_field_may_fill_eight_kib_and_no_more() {
    let server = RedisServer::start();
    let config = Config::builder().consecutive_failures(2).build().unwrap();
    let client = redis::Client::open(server.url()).unwrap();
    let store = RedisStore::new(
        client.clone(),
        "leases",
        &config,
        &StoreOptions {
            timeout: Duration::from_secs(10),
            ..StoreOptions::default()
        },
    );
    let fail = OutcomeArg::new(0, PermitKind::Normal, Verdict::Failure, Duration::ZERO);
    store.record(&[fail], Some(1_000), 0.0).await.unwrap();
    let mut conn = client.get_connection().unwrap();
    // 2,048 leases of "1:1" and one token of two digits: 4 * 2,048 = 8,192 characters.
    let mut leases = vec!["1:1"; 2_048];
    leases[0] = "11:1";
    let full = leases.join(",");
    assert_eq!(full.len(), 8_192);
    for (value, fine) in [(full.clone(), true), (format!("{full},1:1"), false)] {
        let count = value.split(',').count().to_string();
        let _: () = redis::cmd("HSET")
            .arg(store.key())
            .arg("leases")
            .arg(&value)
            .arg("inflight")
            .arg(&count)
            .query(&mut conn)
            .unwrap();
        let read = store.read(Some(2_000)).await;
        match read {
            Ok(answer) if fine => assert_eq!(answer.reply.state.in_flight, 2_048),
            Err(StoreError::Corrupt(why)) if !fine => assert!(why.contains("leases"), "{why}"),
            other => panic!("{} characters: {other:?}", value.len()),
        }
    }
}
