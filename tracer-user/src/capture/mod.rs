//! The kernel half's user-space side: resolve offsets, load, attach, decode.
