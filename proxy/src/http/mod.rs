//! HTTP: the strict HTTP/1 codec (`h1`, sans-I/O), message heads (`head`), ACL conditions and
//! sample fetches (`acl`, `sample`), the responses HAProxy generates itself (`errors`), and the L7
//! proxy session (`proxy`, the I/O shell).

pub mod acl;
pub mod errors;
pub mod h1;
pub mod h2;
pub mod head;
pub mod proxy;
pub mod rules;
pub mod sample;
pub mod stats;
