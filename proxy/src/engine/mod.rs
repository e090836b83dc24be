//! Worker threads and the I/O backends (io_uring, epoll).
