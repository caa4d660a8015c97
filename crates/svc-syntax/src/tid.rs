use crate::SyntaxError;
use std::sync::atomic::{AtomicU64, Ordering};

const ALPHABET: &[u8; 32] = b"234567abcdefghijklmnopqrstuvwxyz";

/// A timestamp identifier: 13 characters of base32-sortable, the first one below `k` (the top
/// bit of the 64-bit value is always zero).
pub fn check_tid(value: &str) -> Result<(), SyntaxError> {
    let b = value.as_bytes();
    let ok = b.len() == 13
        && b.iter().all(|c| ALPHABET.contains(c))
        && b"234567abcdefghij".contains(&b[0]);
    if ok {
        Ok(())
    } else {
        Err(SyntaxError::new("tid"))
    }
}

/// Makes standard TIDs (53-bit microseconds since the epoch << 10 | a 10-bit clock id) that
/// strictly increase within the process, even when the clock stands still or steps back.
#[derive(Debug)]
pub struct TidGenerator {
    clock_id: u64,
    last: AtomicU64,
}

impl TidGenerator {
    pub fn new(clock_id: u16) -> Self {
        TidGenerator {
            clock_id: u64::from(clock_id) & 0x3ff,
            last: AtomicU64::new(0),
        }
    }

    pub fn next_tid(&self) -> String {
        let now_us = crate::now_unix_micros() as u64 & ((1 << 53) - 1);
        let mut previous = self.last.load(Ordering::Relaxed);
        let micros = loop {
            let candidate = now_us.max(previous + 1);
            match self.last.compare_exchange_weak(
                previous,
                candidate,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => break candidate,
                Err(seen) => previous = seen,
            }
        };
        encode((micros << 10) | self.clock_id)
    }
}

pub(crate) fn encode(mut value: u64) -> String {
    let mut out = [b'2'; 13];
    for slot in out.iter_mut().rev() {
        *slot = ALPHABET[(value & 31) as usize];
        value >>= 5;
    }
    out.iter().map(|&b| char::from(b)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_tids_are_valid_and_increase() {
        let generator = TidGenerator::new(7);
        let tids: Vec<String> = (0..1000).map(|_| generator.next_tid()).collect();
        for pair in tids.windows(2) {
            assert!(pair[0] < pair[1], "{} !< {}", pair[0], pair[1]);
        }
        for tid in &tids {
            check_tid(tid).unwrap();
        }
    }

    #[test]
    fn tid_shape() {
        assert!(check_tid("3jzfcijpj2z2a").is_ok());
        assert!(check_tid("3jzfcijpj2z2").is_err());
        assert!(check_tid("zjzfcijpj2z2a").is_err());
        assert!(check_tid("3jzfcijpj2z21").is_err());
        assert_eq!(encode(0), "2222222222222");
    }
}
