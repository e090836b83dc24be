//! The process clock the counters, rates and stick tables run on: milliseconds since the first
//! read (the first model built), readable anywhere without a model at hand. A leaf: it imports
//! nothing of the crate.

static CLOCK: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// Milliseconds since the first model was built: the clock every counter runs on (rates,
/// `lastsess`), readable where no model is at hand.
pub fn clock_ms() -> u64 {
    CLOCK
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_millis() as u64
}
