use std::borrow::Cow;

use super::*;

fn read_all(text: &str, unit: TimeUnit) -> (Vec<TraceEvent<'static>>, Vec<Malformed>) {
    let mut reader = TraceReader::new(text.as_bytes(), unit);
    let mut events = Vec::new();
    let mut bad = Vec::new();
    loop {
        match reader.next_event().unwrap() {
            Next::Event(e) => events.push(TraceEvent {
                error_code: e.error_code.map(|c| Cow::Owned(c.into_owned())),
                ..e
            }),
            Next::Malformed(m) => bad.push(m),
            Next::End => break,
        }
    }
    (events, bad)
}

#[test]
fn csv_with_a_header_reads_every_field() {
    let (events, bad) = read_all(
        "timestamp,status,latency_ms,error_code\n1000,200,12.5,\n1010,,3,\n1020,503,4,E001\r\n",
        TimeUnit::Ms,
    );
    assert!(bad.is_empty(), "{bad:?}");
    assert_eq!(events.len(), 3);
    assert_eq!(events[0].timestamp, 1_000_000_000);
    assert_eq!(events[0].latency, 12_500_000);
    assert_eq!(events[1].status, 0);
    assert_eq!(events[2].error_code.as_deref(), Some("E001"));
}

#[test]
fn csv_columns_follow_the_header_order() {
    let (events, bad) = read_all("status,latency_ms,timestamp\n503,1,2.5\n", TimeUnit::S);
    assert!(bad.is_empty(), "{bad:?}");
    assert_eq!(events[0].timestamp, 2_500_000_000);
    assert_eq!(events[0].status, 503);
}

#[test]
fn csv_without_a_header_uses_the_default_order() {
    let (events, _) = read_all("5,200,1\n", TimeUnit::Ms);
    assert_eq!((events[0].timestamp, events[0].status), (5_000_000, 200));
}

#[test]
fn malformed_lines_are_reported_with_their_line_number() {
    let (events, bad) = read_all(
        "timestamp,status,latency_ms\n1,200,1\nx,200,1\n\n3,2000,1\n4,200\n5,200,-1\n6,200,1\n",
        TimeUnit::Ms,
    );
    assert_eq!(events.len(), 2);
    let lines: Vec<u64> = bad.iter().map(|m| m.line).collect();
    assert_eq!(lines, [3, 5, 6, 7], "{bad:?}");
    assert!(bad[0].message.contains("timestamp"), "{bad:?}");
    assert!(bad[1].message.contains("status"), "{bad:?}");
    assert!(bad[2].message.contains("latency_ms"), "{bad:?}");
    assert!(bad[3].message.contains("latency_ms"), "{bad:?}");
}

#[test]
fn a_header_without_a_needed_column_is_reported() {
    let (_, bad) = read_all("time,status,latency_ms\n1,200,1\n", TimeUnit::Ms);
    assert_eq!(bad[0].line, 1);
    assert!(bad[0].message.contains("timestamp"), "{bad:?}");
}

#[test]
fn json_lines_read_numbers_strings_and_nulls() {
    let (events, bad) = read_all(
        concat!(
            "{\"timestamp\": 1.5, \"status\": 200, \"latency_ms\": 2, \"extra\": true}\n",
            "{\"timestamp\": \"2\", \"status\": null, \"latency_ms\": 0.5}\n",
            "{\"timestamp\": 3, \"status\": \"503\", \"latency_ms\": 1, \"error_code\": 42}\n",
            "{\"timestamp\": \"1970-01-01T00:00:04Z\", \"status\": 200}\n",
            "{\"status\": 200}\n",
            "{not json}\n",
        ),
        TimeUnit::S,
    );
    assert_eq!(events.len(), 4, "{bad:?}");
    assert_eq!(events[0].timestamp, 1_500_000_000);
    assert_eq!(events[1].status, 0);
    assert_eq!(events[1].latency, 500_000);
    assert_eq!(events[2].error_code.as_deref(), Some("42"));
    assert_eq!(events[3].timestamp, 4_000_000_000);
    let lines: Vec<u64> = bad.iter().map(|m| m.line).collect();
    assert_eq!(lines, [5, 6]);
}
