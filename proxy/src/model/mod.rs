//! Runtime model built from the configuration: proxies, servers, shared state.
