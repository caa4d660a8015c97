//! Identifiers and times as values: each identifier is checked once, when it is made, and
//! carries its format from then on; each time carries its unit. These are what cross the
//! layers of svc (changes, events, the catalog, the XRPC client, the resolver).

use crate::{
    SyntaxError, check_at_uri, check_cid, check_did, check_handle, check_nsid, check_record_key,
    check_tid,
};
use std::fmt;

/// A string of one atproto format, checked when it was made.
macro_rules! checked_string {
    ($(#[$doc:meta])* $name:ident, $check:path) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(Box<str>);

        impl $name {
            /// `value`, if it has the format.
            pub fn new(value: impl Into<String>) -> Result<$name, SyntaxError> {
                let value = value.into();
                $check(&value)?;
                Ok($name(value.into_boxed_str()))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        // The derived Hash and Eq are those of the text, so maps keyed by it look up by `&str`.
        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&*self.0, f)
            }
        }

        impl std::str::FromStr for $name {
            type Err = SyntaxError;
            fn from_str(value: &str) -> Result<$name, SyntaxError> {
                $name::new(value)
            }
        }

        impl TryFrom<String> for $name {
            type Error = SyntaxError;
            fn try_from(value: String) -> Result<$name, SyntaxError> {
                $name::new(value)
            }
        }

        impl TryFrom<&str> for $name {
            type Error = SyntaxError;
            fn try_from(value: &str) -> Result<$name, SyntaxError> {
                $name::new(value)
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> String {
                value.0.into()
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                &*self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                &*self.0 == *other
            }
        }
    };
}

checked_string!(
    /// A DID: `did:<method>:<identifier>`.
    Did,
    check_did
);
checked_string!(
    /// A handle: a domain name.
    Handle,
    check_handle
);
checked_string!(
    /// A namespaced identifier: a record's collection.
    Nsid,
    check_nsid
);
checked_string!(
    /// A record key.
    RecordKey,
    check_record_key
);
checked_string!(
    /// A timestamp identifier: a repository revision, or a record key made of a time.
    Tid,
    check_tid
);
checked_string!(
    /// A CID in its string form.
    Cid,
    check_cid
);

impl RecordKey {
    /// A TID is a record key.
    pub fn from_tid(tid: Tid) -> RecordKey {
        RecordKey(tid.0)
    }
}

impl Tid {
    /// The TID of a time and a 10-bit clock id, the form `TidGenerator` makes: for writers that
    /// keep their own clock (a test repository, a replayed one). Times before the epoch or past
    /// the 53 bits a TID holds are clamped to them.
    pub fn from_time(time: UnixMicros, clock_id: u16) -> Tid {
        let micros = time.0.clamp(0, (1 << 53) - 1) as u64;
        let value = (micros << 10) | (u64::from(clock_id) & 0x3ff);
        Tid(crate::tid::encode(value).into_boxed_str())
    }

    /// The time a TID stands for: its bits above the 10-bit clock id.
    pub fn time(&self) -> UnixMicros {
        UnixMicros((self.value() >> 10) as i64)
    }

    /// The TID right after this one (its value plus one): a newer revision within the same
    /// microsecond, or the next one's first.
    pub fn successor(&self) -> Tid {
        let next = (self.value() + 1).min((1 << 63) - 1);
        Tid(crate::tid::encode(next).into_boxed_str())
    }

    /// The 63-bit value the TID's characters spell.
    fn value(&self) -> u64 {
        self.0.bytes().fold(0u64, |value, c| {
            let digit = match c {
                b'2'..=b'7' => c - b'2',
                _ => c - b'a' + 6,
            };
            (value << 5) | u64::from(digit)
        })
    }
}

/// An AT-URI, owned: `at://<authority>[/<collection>[/<rkey>]]`, checked when it was made.
/// Its parts are read from it without another check.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AtUri {
    text: Box<str>,
    /// Where the authority ends, and where the collection ends (both the text's length when
    /// absent).
    authority_end: usize,
    collection_end: usize,
}

impl AtUri {
    /// `value`, if it is an AT-URI.
    pub fn new(value: impl Into<String>) -> Result<AtUri, SyntaxError> {
        let text = value.into();
        let parts = check_at_uri(&text)?;
        let authority_end = "at://".len() + parts.authority.len();
        let collection_end = parts
            .collection
            .map_or(text.len(), |c| authority_end + 1 + c.len());
        Ok(AtUri {
            text: text.into_boxed_str(),
            authority_end,
            collection_end,
        })
    }

    /// The uri of a record: its repository, collection and key, each already checked.
    pub fn of_record(did: &Did, collection: &Nsid, rkey: &RecordKey) -> AtUri {
        let text = format!("at://{did}/{collection}/{rkey}");
        let authority_end = "at://".len() + did.len();
        AtUri {
            collection_end: authority_end + 1 + collection.len(),
            authority_end,
            text: text.into_boxed_str(),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The DID or handle the uri names.
    pub fn authority(&self) -> &str {
        &self.text["at://".len()..self.authority_end]
    }

    /// The repository's DID, when the authority is one (not a handle).
    pub fn did(&self) -> Option<Did> {
        Did::new(self.authority()).ok()
    }

    pub fn collection(&self) -> Option<&str> {
        (self.authority_end < self.text.len())
            .then(|| &self.text[self.authority_end + 1..self.collection_end])
    }

    pub fn rkey(&self) -> Option<&str> {
        (self.collection_end < self.text.len()).then(|| &self.text[self.collection_end + 1..])
    }

    /// The repository, collection and key of a record's uri; `None` for the uri of a
    /// repository or a collection, or one whose authority is a handle.
    pub fn record_parts(&self) -> Option<(Did, Nsid, RecordKey)> {
        Some((
            self.did()?,
            Nsid(self.collection()?.into()),
            RecordKey(self.rkey()?.into()),
        ))
    }
}

impl std::ops::Deref for AtUri {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

impl AsRef<str> for AtUri {
    fn as_ref(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for AtUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for AtUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.text, f)
    }
}

impl std::str::FromStr for AtUri {
    type Err = SyntaxError;
    fn from_str(value: &str) -> Result<AtUri, SyntaxError> {
        AtUri::new(value)
    }
}

impl TryFrom<String> for AtUri {
    type Error = SyntaxError;
    fn try_from(value: String) -> Result<AtUri, SyntaxError> {
        AtUri::new(value)
    }
}

impl From<AtUri> for String {
    fn from(value: AtUri) -> String {
        value.text.into()
    }
}

impl PartialEq<str> for AtUri {
    fn eq(&self, other: &str) -> bool {
        &*self.text == other
    }
}

impl PartialEq<&str> for AtUri {
    fn eq(&self, other: &&str) -> bool {
        &*self.text == *other
    }
}

/// A time, in microseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UnixMicros(pub i64);

/// A time, in milliseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct UnixMillis(pub i64);

impl UnixMicros {
    /// Now, by the system clock (0 on a clock set before the epoch): the one place svc reads
    /// the time of day.
    pub fn now() -> UnixMicros {
        UnixMicros(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_micros() as i64)
                .unwrap_or(0),
        )
    }

    pub fn millis(self) -> UnixMillis {
        UnixMillis(self.0.div_euclid(1000))
    }
}

impl UnixMillis {
    pub fn now() -> UnixMillis {
        UnixMicros::now().millis()
    }
}

/// A little noise from the clock (its sub-second nanoseconds), where values only need to
/// differ between processes or attempts (a backoff's jitter, a TID's clock id); never for
/// anything secret.
pub fn clock_noise() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_checked_when_made() {
        assert!(Did::new("did:plc:z72i7hdynmk6r22z27h6tvur").is_ok());
        assert_eq!(Did::new("plc:z72").unwrap_err().format, "did");
        assert!(Nsid::new("dev.svc.bounty").is_ok());
        assert!(Nsid::new("bounty").is_err());
        assert!(RecordKey::new("..").is_err());
        assert!(Tid::new("3lqlhxw5rslq4").is_ok());
        assert!(Tid::new("3lqlhxw5rslq").is_err());
        assert!(Cid::new("bafyreib2rxk3rh6kzwq").is_ok());
    }

    #[test]
    fn a_tids_successor_is_the_next_value_carrying_into_the_time() {
        let tid = Tid::new("3kaaaaaaaaa22").unwrap();
        assert_eq!(tid.successor().as_str(), "3kaaaaaaaaa23");
        let last_clock = Tid::from_time(UnixMicros(5), 1023);
        assert_eq!(last_clock.successor(), Tid::from_time(UnixMicros(6), 0));
        assert!(tid.successor() > tid);
    }

    #[test]
    fn an_at_uri_gives_its_parts_without_another_check() {
        let uri = AtUri::new("at://did:plc:a/dev.svc.bounty/3lqlhxw5rslq4").unwrap();
        assert_eq!(uri.authority(), "did:plc:a");
        assert_eq!(uri.collection(), Some("dev.svc.bounty"));
        assert_eq!(uri.rkey(), Some("3lqlhxw5rslq4"));
        let (did, collection, rkey) = uri.record_parts().unwrap();
        assert_eq!(AtUri::of_record(&did, &collection, &rkey), uri);
        let repository = AtUri::new("at://alice.example.com").unwrap();
        assert_eq!(repository.authority(), "alice.example.com");
        assert_eq!((repository.collection(), repository.rkey()), (None, None));
        assert!(repository.record_parts().is_none());
        let collection = AtUri::new("at://did:plc:a/dev.svc.bounty").unwrap();
        assert_eq!(collection.collection(), Some("dev.svc.bounty"));
        assert_eq!(collection.rkey(), None);
        assert!(AtUri::new("at://did:plc:a/dev.svc.bounty/a/b").is_err());
    }

    #[test]
    fn a_tid_tells_its_time() {
        let micros = 1_700_000_000_000_000u64;
        let tid = crate::TidGenerator::new(0);
        let made = Tid::new(crate::tid::encode(micros << 10)).unwrap();
        assert_eq!(made.time(), UnixMicros(micros as i64));
        assert!(Tid::new(tid.next_tid()).unwrap().time() <= UnixMicros::now());
        assert_eq!(UnixMicros(1_999).millis(), UnixMillis(1));
        let from_time = Tid::from_time(UnixMicros(micros as i64), 5);
        assert_eq!(from_time.time(), UnixMicros(micros as i64));
        assert!(check_tid(&from_time).is_ok());
        assert!(from_time < Tid::from_time(UnixMicros(micros as i64), 6));
        assert_eq!(Tid::from_time(UnixMicros(-1), 0).as_str(), "2222222222222");
        assert_eq!(
            Tid::from_time(UnixMicros(i64::MAX), 0).time(),
            UnixMicros((1 << 53) - 1)
        );
    }
}
