//! Load-balancing algorithms (pure): roundrobin (smooth weighted), leastconn, first, source.
