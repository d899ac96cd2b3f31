//! The in-process backend: real threads, node memory as atomics. (Being written.)
