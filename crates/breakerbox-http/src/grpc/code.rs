//! The 17 gRPC status codes, by number and by canonical name.

use std::fmt;
use std::str::FromStr;

use crate::HttpJudgeError;

macro_rules! codes {
    ($($variant:ident = $number:literal, $name:literal, $doc:literal;)*) => {
        /// A gRPC status code, as the `grpc-status` trailer carries it: a number from 0 to
        /// 16, with a canonical name (`UNAVAILABLE` for 14).
        ///
        /// ```
        /// use breakerbox_http::GrpcCode;
        ///
        /// assert_eq!(GrpcCode::from_number(14), Some(GrpcCode::Unavailable));
        /// assert_eq!(GrpcCode::Unavailable.number(), 14);
        /// assert_eq!(GrpcCode::Unavailable.name(), "UNAVAILABLE");
        /// // Names in any case, or the number, as config files write them.
        /// assert_eq!("unavailable".parse::<GrpcCode>()?, GrpcCode::Unavailable);
        /// assert_eq!("14".parse::<GrpcCode>()?, GrpcCode::Unavailable);
        /// assert!("NOPE".parse::<GrpcCode>().is_err());
        /// # Ok::<(), breakerbox_http::HttpJudgeError>(())
        /// ```
        #[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[repr(u8)]
        pub enum GrpcCode {
            $(#[doc = $doc] $variant = $number,)*
        }

        impl GrpcCode {
            /// Every code, in the order of their numbers (`ALL[n]` has number `n`).
            pub const ALL: [GrpcCode; 17] = [$(GrpcCode::$variant,)*];

            /// The canonical name: `UNAVAILABLE`, `NOT_FOUND`, `OK`.
            pub const fn name(self) -> &'static str {
                match self {
                    $(GrpcCode::$variant => $name,)*
                }
            }

            /// The reason of a judgement by this code: `grpc UNAVAILABLE`.
            pub const fn reason(self) -> &'static str {
                match self {
                    $(GrpcCode::$variant => concat!("grpc ", $name),)*
                }
            }
        }
    };
}

codes! {
    Ok = 0, "OK", "Not an error: the call succeeded.";
    Cancelled = 1, "CANCELLED", "The call was cancelled, typically by the caller.";
    Unknown = 2, "UNKNOWN", "An unknown error (an error the server did not map to a code).";
    InvalidArgument = 3, "INVALID_ARGUMENT", "The client gave an invalid argument.";
    DeadlineExceeded = 4, "DEADLINE_EXCEEDED", "The deadline expired before the call completed.";
    NotFound = 5, "NOT_FOUND", "Some requested entity was not found.";
    AlreadyExists = 6, "ALREADY_EXISTS", "The entity the client tried to create already exists.";
    PermissionDenied = 7, "PERMISSION_DENIED", "The caller may not do this.";
    ResourceExhausted = 8, "RESOURCE_EXHAUSTED", "Some resource (a quota, the server's capacity) is exhausted.";
    FailedPrecondition = 9, "FAILED_PRECONDITION", "The system is not in a state the call requires.";
    Aborted = 10, "ABORTED", "The call was aborted (a concurrency conflict, a transaction abort).";
    OutOfRange = 11, "OUT_OF_RANGE", "The call went past the valid range.";
    Unimplemented = 12, "UNIMPLEMENTED", "The method is not implemented or not supported.";
    Internal = 13, "INTERNAL", "An internal error: an invariant of the server is broken.";
    Unavailable = 14, "UNAVAILABLE", "The service is currently unavailable (transient).";
    DataLoss = 15, "DATA_LOSS", "Unrecoverable data loss or corruption.";
    Unauthenticated = 16, "UNAUTHENTICATED", "The call has no valid credentials.";
}

impl GrpcCode {
    /// The code's number, 0 to 16.
    #[inline]
    pub const fn number(self) -> u8 {
        self as u8
    }

    /// The code with this number, if it is one of the 17.
    #[inline]
    pub fn from_number(number: u32) -> Option<GrpcCode> {
        usize::try_from(number)
            .ok()
            .and_then(|n| GrpcCode::ALL.get(n).copied())
    }

    /// Parses a number (`14`) or a name in any case (`UNAVAILABLE`, `unavailable`); the
    /// error message quotes the text but names no key.
    pub(crate) fn parse(text: &str) -> Result<GrpcCode, String> {
        let text = text.trim();
        if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
            return text
                .parse::<u32>()
                .ok()
                .and_then(GrpcCode::from_number)
                .ok_or_else(|| format!("unknown gRPC code {text} (codes are 0 to 16)"));
        }
        GrpcCode::ALL
            .into_iter()
            .find(|code| code.name().eq_ignore_ascii_case(text))
            .ok_or_else(|| {
                format!(
                    "unknown gRPC code \"{text}\" (expected a name like UNAVAILABLE or a number from 0 to 16)"
                )
            })
    }
}

impl fmt::Display for GrpcCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for GrpcCode {
    type Err = HttpJudgeError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        GrpcCode::parse(text)
            .map_err(|message| HttpJudgeError::new(format!("grpc.codes.\"{text}\""), text, message))
    }
}

impl serde::Serialize for GrpcCode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for GrpcCode {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = crate::config::StringOrNumber::deserialize(deserializer)?.0;
        GrpcCode::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::GrpcCode;

    #[test]
    fn every_code_has_its_number_as_its_index() {
        for (i, code) in GrpcCode::ALL.into_iter().enumerate() {
            assert_eq!(usize::from(code.number()), i);
            assert_eq!(GrpcCode::from_number(i as u32), Some(code));
            assert_eq!(code.reason(), format!("grpc {}", code.name()));
        }
        assert_eq!(GrpcCode::from_number(17), None);
        assert_eq!(GrpcCode::from_number(u32::MAX), None);
    }

    #[test]
    fn names_and_numbers_parse_in_any_case_and_nothing_else_does() {
        assert_eq!(
            GrpcCode::parse("deadline_exceeded"),
            Ok(GrpcCode::DeadlineExceeded)
        );
        assert_eq!(GrpcCode::parse("Not_Found"), Ok(GrpcCode::NotFound));
        assert_eq!(GrpcCode::parse("0"), Ok(GrpcCode::Ok));
        assert_eq!(GrpcCode::parse("016"), Ok(GrpcCode::Unauthenticated));
        for bad in [
            "17",
            "-1",
            "",
            "UNAVAILABLE!",
            "unavail",
            "99999999999999999999",
        ] {
            assert!(GrpcCode::parse(bad).is_err(), "{bad:?} parsed");
        }
    }
}
