//! Status rules resolved once into a lookup table.

use std::collections::BTreeMap;

use breakerbox::Verdict;

use crate::StatusSelector;

/// The verdict for every status code from 100 to 999, resolved from the rules at build time.
#[derive(Clone)]
pub(crate) struct StatusTable {
    verdicts: Box<[Verdict]>,
}

impl std::fmt::Debug for StatusTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Show only codes that differ from their class's default, to keep it short.
        let mut list = f.debug_map();
        for (i, verdict) in self.verdicts.iter().enumerate() {
            let code = i as u16 + 100;
            if *verdict != default_class(code) {
                list.entry(&code, verdict);
            }
        }
        list.finish()
    }
}

/// The default verdict of a code's class: 5xx fail, 4xx and 1xx are ignored, 2xx and 3xx
/// succeed; codes outside the five classes fail (the server is not speaking HTTP properly).
fn default_class(code: u16) -> Verdict {
    match code / 100 {
        1 | 4 => Verdict::Ignore,
        2 | 3 => Verdict::Success,
        _ => Verdict::Failure,
    }
}

/// Codes with a default of their own: 408 Request Timeout and 429 Too Many Requests say the
/// dependency is struggling, whatever the 4xx class says; 101 Switching Protocols is the
/// successful end of an upgrade's handshake (a WebSocket's), the only 1xx that is final.
fn default_code(code: u16) -> Option<Verdict> {
    match code {
        408 | 429 => Some(Verdict::Failure),
        101 => Some(Verdict::Success),
        _ => None,
    }
}

impl StatusTable {
    /// Resolves `rules` over the defaults: code > range (narrowest first) > class, and at
    /// the same level a configured rule beats a default.
    pub(crate) fn new(rules: &BTreeMap<StatusSelector, Verdict>) -> StatusTable {
        let mut ranges: Vec<(u16, u16, Verdict)> = rules
            .iter()
            .filter_map(|(selector, verdict)| match *selector {
                StatusSelector::Range(from, to) => Some((from, to, *verdict)),
                _ => None,
            })
            .collect();
        // Narrowest first; equal widths keep the map's order (lower start first).
        ranges.sort_by_key(|(from, to, _)| to - from);
        let verdicts = (100u16..=999)
            .map(|code| {
                rules
                    .get(&StatusSelector::Code(code))
                    .copied()
                    .or_else(|| default_code(code))
                    .or_else(|| {
                        ranges
                            .iter()
                            .find(|(from, to, _)| (*from..=*to).contains(&code))
                            .map(|(_, _, verdict)| *verdict)
                    })
                    .or_else(|| {
                        u8::try_from(code / 100)
                            .ok()
                            .and_then(|class| rules.get(&StatusSelector::Class(class)).copied())
                    })
                    .unwrap_or_else(|| default_class(code))
            })
            .collect();
        StatusTable { verdicts }
    }

    /// The verdict for `code`.
    #[inline]
    pub(crate) fn verdict(&self, code: u16) -> Verdict {
        self.verdicts
            .get(usize::from(code).wrapping_sub(100))
            .copied()
            .unwrap_or(Verdict::Failure)
    }
}
