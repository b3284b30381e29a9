//! Two processes share one breaker through Redis: process `a` sees a dependency fail and
//! trips the breaker; process `b` learns it within milliseconds (pub/sub), without having
//! made a single failing call, and rejects locally until the shared breaker recovers.
//!
//! ```text
//! cargo run -p breakerbox-redis --example two_processes
//! REDIS_URL=redis://127.0.0.1:6379/ cargo run -p breakerbox-redis --example two_processes
//! ```
//!
//! With `REDIS_URL` unset it starts its own `redis-server` on a free loopback port (and
//! stops it at the end), if `redis-server` is installed.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use breakerbox::{CallError, Clock, Config, MonotonicClock, Phase};
use breakerbox_redis::RedisBreaker;

type Error = Box<dyn std::error::Error>;

fn config() -> Result<Config, Error> {
    Ok(Config::builder()
        .consecutive_failures(3)
        .recovery_timeout(Duration::from_secs(2))
        .required_successes(2)
        .build()?)
}

async fn breaker(url: &str, name: &str) -> Result<RedisBreaker, Error> {
    Ok(RedisBreaker::builder(url, name)
        .config(config()?)
        .build()
        .await?)
}

/// The dependency: down while `healthy` is false.
async fn dependency(healthy: bool) -> Result<&'static str, &'static str> {
    tokio::time::sleep(Duration::from_millis(5)).await;
    if healthy {
        Ok("200 OK")
    } else {
        Err("503 Service Unavailable")
    }
}

async fn wait_for(b: &RedisBreaker, phase: Phase, limit: Duration) -> Option<Duration> {
    let clock = MonotonicClock;
    let start = clock.now();
    while b.phase() != phase {
        if clock.now().saturating_sub(start).as_duration() > limit {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    Some(clock.now().saturating_sub(start).as_duration())
}

async fn node_a(url: &str, name: &str) -> Result<(), Error> {
    let b = breaker(url, name).await?;
    tokio::time::sleep(Duration::from_millis(300)).await; // let b subscribe
    for _ in 0..3 {
        let result = b.call(dependency(false)).await;
        println!("a: call -> {result:?}");
    }
    b.flush().await;
    println!("a: three failures; shared phase is now {}", b.phase());
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    for _ in 0..2 {
        match b.acquire().await {
            Ok(permit) => {
                let probe = permit.is_probe();
                let result = dependency(true).await;
                permit.success().await;
                println!("a: probe={probe} -> {result:?}");
            }
            Err(open) => println!("a: rejected ({open})"),
        }
    }
    println!("a: shared phase is now {}", b.phase());
    Ok(())
}

async fn node_b(url: &str, name: &str) -> Result<(), Error> {
    let b = breaker(url, name).await?;
    match wait_for(&b, Phase::Open, Duration::from_secs(5)).await {
        Some(after) => {
            println!("b: saw the trip {after:?} after starting to watch, without a failing call")
        }
        None => println!("b: never saw the trip"),
    }
    match b.call(dependency(true)).await {
        Err(CallError::Open(open)) => println!("b: rejected locally: {open}"),
        other => println!("b: call -> {other:?}"),
    }
    match wait_for(&b, Phase::Closed, Duration::from_secs(10)).await {
        Some(_) => println!("b: the shared breaker closed again; calls flow"),
        None => println!("b: still {} after 10 s", b.phase()),
    }
    println!("b: call -> {:?}", b.call(dependency(true)).await);
    Ok(())
}

/// Starts a throwaway redis-server on a free loopback port.
fn start_redis() -> Result<(Child, String), Error> {
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("REDIS_URL is unset and redis-server could not start: {e}"))?;
    let url = format!("redis://127.0.0.1:{port}/");
    let client = redis::Client::open(url.as_str())?;
    for _ in 0..100 {
        if let Ok(mut conn) = client.get_connection() {
            if redis::cmd("PING").query::<String>(&mut conn).is_ok() {
                return Ok((child, url));
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err("redis-server did not answer PING".into())
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    if let Ok(role) = std::env::var("BB_EXAMPLE_ROLE") {
        let url = std::env::var("REDIS_URL")?;
        let name = std::env::var("BB_EXAMPLE_NAME")?;
        return match role.as_str() {
            "a" => node_a(&url, &name).await,
            _ => node_b(&url, &name).await,
        };
    }
    let (mut server, url) = match std::env::var("REDIS_URL") {
        Ok(url) => (None, url),
        Err(_) => {
            let (child, url) = start_redis()?;
            (Some(child), url)
        }
    };
    println!(
        "sharing breaker `demo-{}` through {url}",
        std::process::id()
    );
    let exe = std::env::current_exe()?;
    let spawn = |role: &str| {
        Command::new(&exe)
            .env("BB_EXAMPLE_ROLE", role)
            .env("REDIS_URL", &url)
            .env("BB_EXAMPLE_NAME", format!("demo-{}", std::process::id()))
            .spawn()
    };
    let b = spawn("b")?;
    let a = spawn("a")?;
    for mut child in [a, b] {
        child.wait()?;
    }
    if let Some(server) = server.as_mut() {
        let _ = server.kill();
        let _ = server.wait();
    }
    Ok(())
}
