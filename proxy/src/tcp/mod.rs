//! `mode tcp`: the userspace passthrough relay.
