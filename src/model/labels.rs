//! Display names and orders of the model's keys: ISAs, precisions and their families, rate
//! units, memory levels.

/// ISA display name.
pub fn isa_label(isa: &str) -> String {
    match isa {
        "scalar" => "scalar".into(),
        "sse" => "SSE".into(),
        "avx" => "AVX".into(),
        "avx2" => "AVX2".into(),
        "avx512" => "AVX-512".into(),
        other => other.to_ascii_uppercase(),
    }
}

/// Order of ISAs from narrow to wide, AMX tiles above AVX-512 (unknown ones last).
pub fn isa_rank(isa: &str) -> usize {
    ["scalar", "sse", "avx", "avx2", "avx512", "amx"]
        .iter()
        .position(|i| *i == isa)
        .unwrap_or(6)
}

/// The number format a precision key's roofs belong to, so that work of one format on two
/// machines is read against comparable roofs: a GPU's tensor cores (`tensor_bf16`) and a
/// CPU's AMX tiles or dot products (`bf16`) are both `bf16`; `tensor_fp64` is `double`,
/// `tensor_fp16` `half`. Other keys are their own family.
pub fn precision_family(precision: &str) -> &str {
    match precision.strip_prefix("tensor_") {
        Some("fp64") => "double",
        Some("fp16") => "half",
        Some(t) => t,
        None => precision,
    }
}

/// Display name of a precision: `FP64`, `FP32`, `FP16`, `BF16`, `INT8`, `INT16`, and for a
/// GPU's tensor cores `BF16 tensor`.
pub fn precision_label(precision: &str) -> String {
    let base = |p: &str| match p {
        "double" | "fp64" => "FP64".to_string(),
        "single" | "fp32" => "FP32".to_string(),
        "half" | "fp16" => "FP16".to_string(),
        other => other.to_ascii_uppercase(),
    };
    match precision.strip_prefix("tensor_") {
        Some(t) => format!("{} tensor", base(t)),
        None if precision == "tensor" => "tensor".into(),
        None => base(precision),
    }
}

/// Whether a precision's work is integer operations (CPU int8/int16: `flops.int_ops`), whose
/// rates are GOP/s, never GFLOP/s. (A GPU's `tensor_int8` ops are ncu's tensor ops, in W.)
pub fn is_integer_precision(precision: &str) -> bool {
    matches!(precision, "int8" | "int16")
}

/// `GOP/s` for integer precisions, else `GFLOP/s`.
pub fn rate_unit(precision: &str) -> &'static str {
    if is_integer_precision(precision) || precision == "tensor_int8" {
        "GOP/s"
    } else {
        "GFLOP/s"
    }
}

/// Order of memory levels from the core outwards.
pub fn level_rank(level: &str) -> usize {
    ["core", "l1", "l2", "l3", "dram"].iter().position(|l| *l == level).unwrap_or(5)
}

/// Display name of a level: `L1`, `DRAM`, `core`.
pub fn level_label(level: &str) -> String {
    match level {
        "core" | "stack" => level.to_string(),
        other => other.to_ascii_uppercase(),
    }
}
