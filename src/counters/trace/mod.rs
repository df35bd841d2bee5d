//! The trace backend (issue 6): ptrace + iced-x86 decoding, exact W and core-side Q.
