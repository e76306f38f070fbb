//! The wall clock as every Toolplane process reads it: Unix milliseconds and seconds, 0 for a
//! clock set before 1970, saturating far in the future. Stamps in records, deadlines in seals
//! and signatures, and expiry checks all read it here.

use std::time::{SystemTime, UNIX_EPOCH};

/// Unix milliseconds now.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Unix seconds now.
pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn seconds_and_milliseconds_read_the_same_clock() {
        let (ms, secs) = (super::now_ms(), super::now_secs());
        assert!(ms > 1_700_000_000_000, "{ms}");
        assert!(secs.abs_diff(ms / 1000) <= 1, "{secs} {ms}");
    }
}
