//! What a point's work is: its precision (the number format with the most work), the ISA it
//! runs at, its work W and rate in the unit of its roofs.

use crate::schema::report::Point;

use super::labels::{is_integer_precision, isa_rank};

/// The precision of a point's work: the number format with the most work among its classes
/// (`FlopClass::format`: `double`, `single`, `half`, `bf16`, `int8`, `int16`; AMX tile classes
/// are their format too: `tile_bf16` is `bf16`), double when none is known. GPU points (ncu's
/// classes) may also be `tensor_<type>` (tensor-core ops dominate; the type with most ops in
/// `extra.tensor_ops_by_type`: `tensor_bf16`, `tensor_fp64`, …), matching the GPU roofs' keys
/// (`gpu::roofs_from_machine`). The roofs a point is read against are those of this
/// precision ([`RoofSet::peak`](super::RoofSet::peak)).
pub fn point_precision(p: &Point) -> &'static str {
    // Work per format of `FORMATS` (the only ones a point's precision can be), most work
    // winning; ties go to the wider format (double, then single, …).
    const FORMATS: [&str; 6] = ["double", "single", "half", "bf16", "int16", "int8"];
    let mut by_format = [0.0f64; FORMATS.len()];
    let mut tensor = 0.0;
    for (k, v) in &p.flops.by_class {
        if k == "tensor" {
            tensor += v;
            continue;
        }
        let format = crate::kernels::FlopClass::from_key(k).and_then(|c| c.format()).or_else(|| {
            // Keys this version does not know: by their names.
            if k.starts_with("half") {
                Some("half")
            } else if k.contains("single") || k.contains("float") {
                Some("single")
            } else if k.contains("double") {
                Some("double")
            } else {
                None
            }
        });
        if let Some(i) = format.and_then(|f| FORMATS.iter().position(|&known| known == f)) {
            by_format[i] += v;
        }
    }
    let (top, top_work) = FORMATS
        .into_iter()
        .zip(by_format)
        .fold(("double", 0.0), |best, x| if x.1 > best.1 { x } else { best });
    if tensor > 0.0 && tensor > top_work {
        let top = p.extra.tensor_ops_by_type.as_ref().and_then(|m| {
            m.iter()
                .max_by(|a, b| a.1.total_cmp(b.1))
                .map(|(k, _)| k.split('_').next().unwrap_or(k).to_string())
        });
        return match top.as_deref() {
            Some("bf16") => "tensor_bf16",
            Some("fp16") => "tensor_fp16",
            Some("tf32") => "tensor_tf32",
            Some("fp64") => "tensor_fp64",
            Some("fp8") => "tensor_fp8",
            Some("int8") => "tensor_int8",
            _ => "tensor",
        };
    }
    top
}

/// W of a point in the unit of its precision's roofs: integer operations (`flops.int_ops`)
/// for an integer precision, else flops (`flops.total`).
pub fn point_work(p: &Point) -> f64 {
    if is_integer_precision(point_precision(p)) {
        p.flops.int_ops.unwrap_or(0.0)
    } else {
        p.flops.total
    }
}

/// The point's rate in its roofs' unit: GOP/s for integer work, else `gflops` (GFLOP/s).
pub fn point_rate(p: &Point) -> Option<f64> {
    if is_integer_precision(point_precision(p)) {
        (p.seconds > 0.0 && p.seconds.is_finite()).then(|| point_work(p) / p.seconds / 1e9)
    } else {
        p.gflops
    }
}

/// The widest ISA the point's work runs at, from its classes (`scalar_double` → scalar,
/// `packed128_*` → sse, `packed256_*` → avx2, `packed512_*` → avx512, `tile_*` → amx). None
/// when unknown.
pub fn point_isa(p: &Point) -> Option<&'static str> {
    p.flops
        .by_class
        .iter()
        .filter(|(_, v)| **v > 0.0)
        .filter_map(|(k, _)| {
            if k.starts_with("scalar") {
                Some("scalar")
            } else if k.starts_with("tile_") {
                Some("amx")
            } else if k.contains("512") {
                Some("avx512")
            } else if k.contains("256") {
                Some("avx2")
            } else if k.contains("128") {
                Some("sse")
            } else {
                None
            }
        })
        .max_by_key(|i| isa_rank(i))
}
