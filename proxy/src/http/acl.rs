//! Placeholder: filled in by its slice of the foundation issue.
