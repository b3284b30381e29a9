//! `status NNN` reasons for every code, built at compile time so judging allocates nothing.

const LEN: usize = "status 100".len();
const CODES: usize = 900;

const fn build() -> [[u8; LEN]; CODES] {
    let mut table = [[0u8; LEN]; CODES];
    let mut i = 0;
    while i < CODES {
        let code = i + 100;
        let prefix = b"status ";
        let mut j = 0;
        while j < prefix.len() {
            table[i][j] = prefix[j];
            j += 1;
        }
        table[i][7] = b'0' + (code / 100) as u8;
        table[i][8] = b'0' + (code / 10 % 10) as u8;
        table[i][9] = b'0' + (code % 10) as u8;
        i += 1;
    }
    table
}

static BYTES: [[u8; LEN]; CODES] = build();

/// `"status 503"` for 503: a static string for every code from 100 to 999.
pub(crate) fn status_reason(code: u16) -> &'static str {
    let index = usize::from(code).wrapping_sub(100);
    match BYTES.get(index).map(|bytes| std::str::from_utf8(bytes)) {
        Some(Ok(reason)) => reason,
        _ => "status out of range",
    }
}

#[cfg(test)]
mod tests {
    use super::status_reason;

    #[test]
    fn every_code_has_its_own_reason() {
        assert_eq!(status_reason(100), "status 100");
        assert_eq!(status_reason(503), "status 503");
        assert_eq!(status_reason(999), "status 999");
        assert_eq!(status_reason(42), "status out of range");
    }
}
