//! Analysis: what the rules decide from a connection or a request. Sample fetches and converters
//! (`sample`), ACLs and conditions (`acl`), the compiled per-proxy rules (`rules`) and the
//! `tcp-request` rule helpers (`tcp`). Pure: nothing here imports the engine or the stream layer;
//! callers hand in a [`sample::SampleCtx`] and get a verdict back.

pub mod acl;
pub mod auth;
pub mod capture;
pub mod conv;
pub mod last_rule;
pub mod normalize;
pub mod rdp;
pub mod rewrite;
pub mod rules;
pub mod sample;
pub mod script;
pub mod sticking;
pub mod stkey;
pub mod tcp;
pub mod vars;
