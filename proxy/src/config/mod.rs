//! HAProxy's configuration language: lexer (quotes, `\` escapes, `"${ENV}"`), sections, keyword
//! tables, the typed model (`model`) and diagnostics with file:line (`diag`). Pure: the caller
//! supplies file contents and the environment.

pub mod model;
