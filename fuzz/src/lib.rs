//! Helpers shared by the fuzz targets: a reference model of the chunked grammar the HTTP/1
//! decoder implements, and a small runtime for the CLI dispatcher.

pub mod chunked_model;
pub mod cli_model;
