//! `breakerbox status | trip | reset | disable` against operator slips and odd keys: typo'd
//! names, `--for 0s`, names that cannot round-trip, passwords in URLs, keys that are not
//! UTF-8 or not breakers. Real binary, real redis-server.

#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used)]

#[path = "support/cli.rs"]
mod cli;
#[path = "../../breakerbox-redis/tests/support/redis_server.rs"]
mod redis_server;

use cli::{assert_ok, run, stderr, stdout};
use redis_server::RedisServer;

fn ops(redis: &RedisServer, args: &[&str]) -> std::process::Output {
    let url = redis.url();
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--redis", url.as_str()]);
    run(&all)
}

fn keys(redis: &RedisServer) -> Vec<Vec<u8>> {
    let mut conn = redis::Client::open(redis.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let mut keys: Vec<Vec<u8>> = redis::cmd("KEYS").arg("*").query(&mut conn).unwrap();
    keys.sort();
    keys
}

#[test]
fn trip_reset_and_disable_on_a_name_that_does_not_exist_fail_unless_create() {
    let redis = RedisServer::start();
    for args in [
        vec!["trip", "paymnts"],
        vec!["reset", "paymnts"],
        vec!["disable", "paymnts"],
    ] {
        let out = ops(&redis, &args);
        assert!(
            !out.status.success(),
            "{args:?} succeeded on a missing breaker"
        );
        assert!(
            stderr(&out).contains("no breaker named \"paymnts\""),
            "{}",
            stderr(&out)
        );
        assert!(stderr(&out).contains("--create"), "{}", stderr(&out));
    }
    assert!(
        keys(&redis).is_empty(),
        "a failed command created {:?}",
        keys(&redis)
    );
    let out = ops(&redis, &["trip", "payments", "--create"]);
    assert_ok(&out);
    assert!(stdout(&out).contains("forced_open"), "{}", stdout(&out));
    assert_ok(&ops(&redis, &["reset", "payments"]));
}

#[test]
fn trip_for_zero_seconds_is_an_error_not_a_trip_until_reset() {
    let redis = RedisServer::start();
    for op in ["trip", "disable"] {
        let out = ops(&redis, &[op, "x", "--for", "0s", "--create"]);
        assert!(!out.status.success(), "{op} --for 0s succeeded");
        assert!(stderr(&out).contains("above zero"), "{}", stderr(&out));
    }
    assert!(keys(&redis).is_empty());
}

#[test]
fn names_that_cannot_round_trip_through_a_key_are_rejected() {
    let redis = RedisServer::start();
    for name in ["a}b", "a{b", "", "tab\there", "esc\u{1b}[2J"] {
        let out = ops(&redis, &["trip", name, "--create"]);
        assert!(!out.status.success(), "trip {name:?} succeeded");
        assert!(
            stderr(&out).contains("invalid breaker name"),
            "{}",
            stderr(&out)
        );
        assert!(
            !stderr(&out).contains('\u{1b}'),
            "an escape sequence was printed raw"
        );
    }
    assert!(keys(&redis).is_empty(), "{:?}", keys(&redis));
}

#[test]
fn a_redis_url_password_is_never_printed() {
    let redis = RedisServer::start_with(&["--requirepass", "right-pw-8c1"], Some("right-pw-8c1"));
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    for url in [
        format!("redis://:wrong-pw-4f2@127.0.0.1:{}/", redis.port()),
        format!("redis://user:wrong-pw-4f2@127.0.0.1:{closed}/"),
        "redis://:wrong-pw-4f2@127.0.0.1:notaport/".to_string(),
    ] {
        for args in [
            vec!["status"],
            vec!["status", "payments"],
            vec!["trip", "payments", "--create"],
        ] {
            let mut all = args.clone();
            all.extend(["--redis", url.as_str()]);
            let out = run(&all);
            assert!(!out.status.success(), "{all:?}");
            let text = format!("{}{}", stdout(&out), stderr(&out));
            assert!(
                !text.contains("wrong-pw-4f2"),
                "{all:?} printed the password:\n{text}"
            );
        }
    }
}

#[test]
fn status_reports_a_key_that_is_not_utf8_and_lists_the_others_touching_nothing() {
    let redis = RedisServer::start();
    assert_ok(&ops(&redis, &["trip", "payments", "--create"]));
    let mut conn = redis::Client::open(redis.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let bad: &[u8] = b"bb:{bad\xff}";
    let _: () = redis::cmd("HSET")
        .arg(bad)
        .arg("v")
        .arg("1")
        .arg("p")
        .arg("junk")
        .query(&mut conn)
        .unwrap();
    let before: Vec<Vec<u8>> = redis::cmd("HGETALL").arg(bad).query(&mut conn).unwrap();
    let out = ops(&redis, &["status"]);
    let text = stdout(&out);
    assert!(text.contains("payments"), "{text}\n{}", stderr(&out));
    assert!(
        text.contains("bad\\xff"),
        "the odd key is not reported: {text}"
    );
    assert!(text.contains("not valid UTF-8"), "{text}");
    let after: Vec<Vec<u8>> = redis::cmd("HGETALL").arg(bad).query(&mut conn).unwrap();
    assert_eq!(before, after, "status changed a key");
}

#[test]
fn status_name_exits_non_zero_when_its_row_is_an_error() {
    let redis = RedisServer::start();
    let mut conn = redis::Client::open(redis.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("bb:{corrupt}")
        .arg("not a breaker")
        .query(&mut conn)
        .unwrap();
    let out = ops(&redis, &["status", "corrupt"]);
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(stdout(&out).contains("not a breaker"), "{}", stdout(&out));
    let value: String = redis::cmd("GET")
        .arg("bb:{corrupt}")
        .query(&mut conn)
        .unwrap();
    assert_eq!(value, "not a breaker");
}
