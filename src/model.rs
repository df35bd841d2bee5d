//! The model (issue 7): AI per level, attainable performance, bound classification, advice.
