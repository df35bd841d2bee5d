//! GPU kernel names: identity and display.
//!
//! A kernel's identity is the whole name the profiler gave: the mangled name where ncu printed
//! it (`--print-kernel-base mangled`), else the whole demangled signature. Launches are grouped
//! by it, never by a shortened form: templated kernels (ATen's `vectorized_elementwise_kernel`,
//! `reduce_kernel`, …) differ only inside their template arguments.
//!
//! The display name comes from a parse of the demangled C++ (mangled names are demangled with
//! `cpp_demangle`): balanced `<>`, `()`, `[]`, `{}`; return types; `operator()`; lambdas
//! (`{lambda(float)#1}` from the demangler, `[lambda(float) (instance 1)]` from ncu);
//! `(anonymous namespace)` / ncu's `<unnamed>`; literal casts (`(int)4`, `(unsigned long)2`).
//! The base form is `namespace::function<…>` (the innermost named namespace, template arguments
//! elided). Kernels whose base forms coincide keep the shortest template argument (at any depth,
//! its own arguments elided from the right) that no other kernel of that group has:
//! `native::vectorized_elementwise_kernel<…MulFunctor<double>…>`. Names that are not C++
//! (Triton's `triton_poi_fused_*`, cuBLAS's `nvjet_*`, `sm90_xmma_*`) are their own display names.

use std::collections::{BTreeMap, BTreeSet};

/// One `::`-separated component of a qualified name.
#[derive(Debug, Clone, PartialEq)]
pub enum Component {
    /// An identifier (namespace, class, function, builtin type such as `unsigned int`) with its
    /// template arguments (`None`: no `<…>`), parameters dropped.
    Named { ident: String, args: Option<Vec<Node>> },
    /// `(anonymous namespace)`, `<unnamed>`, `_GLOBAL__N_…`.
    Anonymous,
    /// A lambda; `params` is its parameter text (`float`, `int, float`).
    Lambda { params: String },
    /// `operator()`, `operator+`, ….
    Operator(String),
}

/// A template argument or a whole name: a qualified name, or a literal (`4`, `true`, a cast).
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Name { parts: Vec<Component>, suffix: String },
    Literal(String),
}

/// Depth-aware scan: positions of `sep` (a string) at bracket depth 0.
fn split_top(s: &str, sep: &str) -> Vec<String> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'<' | b'(' | b'[' | b'{' => depth += 1,
            b'>' | b')' | b']' | b'}' => depth = (depth - 1).max(0),
            _ => {}
        }
        if depth == 0 && s[i..].starts_with(sep) {
            out.push(s[start..i].to_string());
            i += sep.len();
            start = i;
            continue;
        }
        i += 1;
    }
    out.push(s[start..].to_string());
    out
}

/// Index just past the bracket group opening at `open` (which must hold an opening bracket),
/// or None when it never closes.
fn close_of(s: &str, open: usize) -> Option<usize> {
    let mut depth = 0i32;
    for (i, c) in s[open..].char_indices() {
        match c {
            '<' | '(' | '[' | '{' => depth += 1,
            '>' | ')' | ']' | '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// Whether the brackets of `s` balance (a name ncu cut short does not).
fn balanced(s: &str) -> bool {
    let mut stack = Vec::new();
    for c in s.chars() {
        match c {
            '<' | '(' | '[' | '{' => stack.push(c),
            '>' | ')' | ']' | '}' => {
                let want = match c {
                    '>' => '<',
                    ')' => '(',
                    ']' => '[',
                    _ => '{',
                };
                if stack.pop() != Some(want) {
                    return false;
                }
            }
            _ => {}
        }
    }
    stack.is_empty()
}

const QUALIFIERS: [&str; 6] = ["const", "volatile", "struct", "class", "enum", "typename"];

/// Parse a (demangled) name or type. `None` when the brackets do not balance.
pub fn parse(text: &str) -> Option<Node> {
    let s = text.trim().replace("<unnamed>", "(anonymous namespace)");
    if !balanced(&s) {
        return None;
    }
    Some(parse_node(&s))
}

fn parse_node(s: &str) -> Node {
    let s = s.trim();
    // A literal: a number, `true`/`false`, or a cast `(T)v` (nsys's `(int)4`).
    if s.starts_with('(')
        && !s.starts_with("(anonymous namespace)")
        && let Some(end) = close_of(s, 0)
    {
        let v = s[end..].trim();
        if !v.is_empty() && !v.starts_with("::") {
            return Node::Literal(v.trim_end_matches(['u', 'l', 'U', 'L']).to_string());
        }
    }
    let first = s.chars().next().unwrap_or(' ');
    if first.is_ascii_digit() || first == '-' || s == "true" || s == "false" {
        return Node::Literal(s.trim_end_matches(['u', 'l', 'U', 'L']).to_string());
    }
    // Drop a return type and qualifiers: words at depth 0 before the name. `operator ()`
    // (ncu's spelling) keeps its word together with what follows.
    let mut words = split_top(s, " ");
    words.retain(|w| !w.is_empty());
    let mut merged: Vec<String> = Vec::new();
    for w in words {
        match merged.last_mut() {
            Some(prev) if prev.ends_with("operator") || prev.ends_with("::") || w.starts_with("::") => prev.push_str(&w),
            _ => merged.push(w),
        }
    }
    let mut suffix = String::new();
    while let Some(last) = merged.last() {
        if merged.len() > 1 && (QUALIFIERS.contains(&last.as_str()) || last.chars().all(|c| c == '*' || c == '&')) {
            suffix = format!("{}{suffix}", last.replace("const", ""));
            merged.pop();
        } else {
            break;
        }
    }
    // Builtin multi-word types (`unsigned int`, `long long`) stay whole.
    let builtin = |w: &str| ["unsigned", "signed", "long", "short", "int", "char", "double", "float"].contains(&w);
    let name = if merged.len() > 1 && merged.iter().all(|w| builtin(w.trim_end_matches(['*', '&']))) {
        merged.join(" ")
    } else {
        merged.into_iter().rfind(|w| !QUALIFIERS.contains(&w.as_str())).unwrap_or_default()
    };
    let mut name = name.as_str();
    while let Some(stripped) = name.strip_suffix(['*', '&']) {
        suffix.insert(0, name.as_bytes()[name.len() - 1] as char);
        name = stripped.trim_end();
    }
    let parts = split_top(name, "::")
        .iter()
        .filter(|p| !p.trim().is_empty())
        .map(|p| parse_component(p.trim()))
        .collect();
    Node::Name { parts, suffix }
}

fn parse_component(p: &str) -> Component {
    if p.starts_with("(anonymous namespace)") || p.starts_with("_GLOBAL__N") {
        return Component::Anonymous;
    }
    if let Some(rest) = p
        .strip_prefix('{')
        .or_else(|| p.strip_prefix('['))
        .and_then(|i| i.strip_prefix("lambda"))
    {
        let params = rest
            .find('(')
            .and_then(|o| close_of(rest, o).map(|c| rest[o + 1..c - 1].to_string()));
        return Component::Lambda {
            params: params.unwrap_or_default(),
        };
    }
    if let Some(op) = p.strip_prefix("operator") {
        let op = op.trim_start();
        let sym = if op.starts_with("()") {
            "()".to_string()
        } else {
            op.split('(').next().unwrap_or("").trim().to_string()
        };
        return Component::Operator(sym);
    }
    let cut = p.find(['<', '(']).unwrap_or(p.len());
    let ident = p[..cut].trim().to_string();
    let mut args = None;
    if p[cut..].starts_with('<')
        && let Some(end) = close_of(p, cut)
    {
        let inner = &p[cut + 1..end - 1];
        args = Some(if inner.trim().is_empty() {
            Vec::new()
        } else {
            split_top(inner, ",").iter().map(|a| parse_node(a)).collect()
        });
    }
    Component::Named { ident, args }
}

/// How a node is written: `depth` levels of template arguments shown (deeper ones `…`),
/// namespaces dropped (only a name's last component, or `enclosing::lambda`).
fn render(n: &Node, depth: usize) -> String {
    match n {
        Node::Literal(v) => v.clone(),
        Node::Name { parts, suffix } => {
            let named: Vec<&Component> = parts.iter().filter(|c| !matches!(c, Component::Anonymous)).collect();
            let mut out = match named.last() {
                Some(Component::Lambda { params }) => {
                    // `f(…)::{lambda()#1}::operator()() const::{lambda(float)#1}` → `f::lambda(float)`
                    let owner = named.iter().rev().find_map(|c| match c {
                        Component::Named { ident, .. } => Some(ident.clone()),
                        _ => None,
                    });
                    format!("{}lambda({params})", owner.map(|o| o + "::").unwrap_or_default())
                }
                Some(c) => render_component(c, depth),
                None => String::new(),
            };
            out.push_str(suffix.trim());
            out
        }
    }
}

fn render_component(c: &Component, depth: usize) -> String {
    match c {
        Component::Named { ident, args: None } => ident.clone(),
        Component::Named { ident, args: Some(a) } if a.is_empty() => format!("{ident}<>"),
        Component::Named { ident, args: Some(a) } => {
            if depth == 0 {
                format!("{ident}<…>")
            } else {
                let inner: Vec<String> = a.iter().map(|x| render(x, depth - 1)).collect();
                format!("{ident}<{}>", inner.join(", "))
            }
        }
        Component::Anonymous => String::new(),
        Component::Lambda { params } => format!("lambda({params})"),
        Component::Operator(s) => format!("operator{s}"),
    }
}

/// A parsed kernel name: the function's namespace (innermost named one), the function
/// component, and the whole tree.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelName {
    pub namespace: Option<String>,
    pub function: Component,
}

/// Demangle an Itanium-mangled name (`_Z…`); anything else comes back as it is.
pub fn demangle(name: &str) -> String {
    if name.starts_with("_Z")
        && let Ok(sym) = cpp_demangle::Symbol::new(name)
        && let Ok(d) = sym.demangle()
    {
        return d;
    }
    name.to_string()
}

/// The kernel's function and namespace, from its (mangled or demangled) name; None for names
/// that do not parse as C++ (they display as they are).
pub fn kernel_name(name: &str) -> Option<KernelName> {
    let Node::Name { parts, .. } = parse(&demangle(name))? else {
        return None;
    };
    // The function: the last component that is not a lambda's `operator()`.
    let fi = parts.iter().rposition(|c| matches!(c, Component::Named { .. }))?;
    let namespace = parts[..fi].iter().rev().find_map(|c| match c {
        Component::Named { ident, .. } => Some(ident.clone()),
        _ => None,
    });
    Some(KernelName {
        namespace,
        function: parts[fi].clone(),
    })
}

/// The bare function name (`triad` of `triad(double *, …)`, `reduce_kernel` of an ATen
/// reduction, mangled or not): what a kernel is called across machines and builds.
pub fn function_name(name: &str) -> String {
    match kernel_name(name).map(|k| k.function) {
        Some(Component::Named { ident, .. }) => ident,
        _ => name.trim().to_string(),
    }
}

impl KernelName {
    /// `namespace::function<…>` (template arguments elided).
    pub fn base(&self) -> String {
        let f = render_component(&self.function, 0);
        match &self.namespace {
            Some(ns) => format!("{ns}::{f}"),
            None => f,
        }
    }

    fn args(&self) -> &[Node] {
        match &self.function {
            Component::Named { args: Some(a), .. } => a,
            _ => &[],
        }
    }

    /// Every way of writing one of the template arguments, at any depth: each argument with its
    /// own arguments shown to every depth and cut from the right (`AUnaryFunctor<float, …>`).
    fn candidates(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        fn walk(n: &Node, out: &mut BTreeSet<String>) {
            out.insert(render(n, 0));
            if let Node::Name { parts, .. } = n {
                for c in parts {
                    if let Component::Named { ident, args: Some(a) } = c {
                        out.insert(format!("{ident}<…>"));
                        for depth in 1..=3 {
                            for k in 1..=a.len() {
                                let shown: Vec<String> = a[..k].iter().map(|x| render(x, depth - 1)).collect();
                                let more = if k < a.len() { ", …" } else { "" };
                                out.insert(format!("{ident}<{}{more}>", shown.join(", ")));
                            }
                        }
                        for x in a {
                            walk(x, out);
                        }
                    }
                }
            }
        }
        for a in self.args() {
            walk(a, &mut out);
        }
        out.retain(|c| !c.is_empty());
        out
    }

    /// `namespace::function<a, b, …>` with `depth` levels of arguments.
    fn with_depth(&self, depth: usize) -> String {
        let f = render_component(&self.function, depth);
        match &self.namespace {
            Some(ns) => format!("{ns}::{f}"),
            None => f,
        }
    }
}

/// A literal is a poor name for a kernel: numbers and booleans come after any named argument.
fn is_literal(s: &str) -> bool {
    !s.chars().any(|c| c.is_ascii_alphabetic()) || s == "true" || s == "false"
}

/// Display names for kernels given by identity (whole names), in the same order: distinct
/// identities get distinct display names.
pub fn display_names(identities: &[String]) -> Vec<String> {
    let parsed: Vec<Option<KernelName>> = identities.iter().map(|n| kernel_name(n)).collect();
    let mut out: Vec<String> = identities
        .iter()
        .zip(&parsed)
        .map(|(id, p)| p.as_ref().map(|k| k.base()).unwrap_or_else(|| id.trim().to_string()))
        .collect();
    // Groups of distinct identities that share a base form.
    let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    for (i, id) in identities.iter().enumerate() {
        if seen.insert(id.clone()) {
            groups.entry(out[i].clone()).or_default().push(i);
        }
    }
    for members in groups.values().filter(|m| m.len() > 1) {
        let cands: Vec<BTreeSet<String>> = members
            .iter()
            .map(|&i| parsed[i].as_ref().map(|k| k.candidates()).unwrap_or_default())
            .collect();
        for (mi, &i) in members.iter().enumerate() {
            let Some(k) = &parsed[i] else { continue };
            let unique = cands[mi]
                .iter()
                .filter(|c| cands.iter().enumerate().all(|(j, o)| j == mi || !o.contains(*c)))
                .min_by_key(|c| (is_literal(c), c.chars().count(), (*c).clone()));
            if let Some(c) = unique {
                let f = match &k.function {
                    Component::Named { ident, .. } => ident.clone(),
                    other => render_component(other, 0),
                };
                out[i] = match &k.namespace {
                    Some(ns) => format!("{ns}::{f}<…{c}…>"),
                    None => format!("{f}<…{c}…>"),
                };
            } else {
                // No single argument tells it apart: show arguments level by level.
                let others: Vec<&KernelName> = members.iter().filter(|&&j| j != i).filter_map(|&j| parsed[j].as_ref()).collect();
                if let Some(d) = (1..=6).find(|&d| others.iter().all(|o| o.with_depth(d) != k.with_depth(d))) {
                    out[i] = k.with_depth(d);
                }
            }
        }
    }
    // Whatever still coincides (names that differ only in what the display drops) is numbered.
    let mut by_display: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    let mut first_of: BTreeMap<&String, usize> = BTreeMap::new();
    for (i, id) in identities.iter().enumerate() {
        let f = *first_of.entry(id).or_insert(i);
        if f == i {
            by_display.entry(out[i].clone()).or_default().push(i);
        }
    }
    for members in by_display.values().filter(|m| m.len() > 1) {
        for (n, &i) in members.iter().enumerate().skip(1) {
            out[i] = format!("{} #{}", out[i], n + 1);
        }
    }
    for (i, id) in identities.iter().enumerate() {
        let f = first_of[id];
        if f != i {
            out[i] = out[f].clone();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        display_names(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    // ncu 2025.3 demangled names from tests/fixtures/ncu/torch_app_demangled.csv (H100).
    const VEC_MUL_F: &str = "void native::vectorized_elementwise_kernel<4, native::AUnaryFunctor<float, float, float, binary_internal::MulFunctor<float>>, std::array<char *, 2>>(int, T2, T3)";
    const VEC_MUL_D: &str = "void native::vectorized_elementwise_kernel<2, native::AUnaryFunctor<double, double, double, binary_internal::MulFunctor<double>>, std::array<char *, 2>>(int, T2, T3)";
    const VEC_ADD_D: &str =
        "void native::vectorized_elementwise_kernel<2, native::CUDAFunctor_add<double>, std::array<char *, 3>>(int, T2, T3)";
    const VEC_CAST_H: &str = "void native::vectorized_elementwise_kernel<8, native::float16_copy_kernel_cuda(at::TensorIteratorBase &)::[lambda(float) (instance 1)], std::array<char *, 2>>(int, T2, T3)";
    const VEC_MUL_H: &str = "void native::vectorized_elementwise_kernel<8, native::AUnaryFunctor<c10::Half, c10::Half, c10::Half, binary_internal::MulFunctor<float>>, std::array<char *, 2>>(int, T2, T3)";
    const RED_MEAN: &str = "void native::reduce_kernel<512, 1, native::ReduceOp<float, native::MeanOps<float, float, float, float>, unsigned int, float, 4, 4>>(T3)";
    const RED_NORM: &str = "void native::reduce_kernel<512, 1, native::ReduceOp<float, native::NormTwoOps<float, float, float, 1>, unsigned int, float, 4, 4>>(T3)";
    const SOFTMAX: &str = "void <unnamed>::softmax_warp_forward<c10::Half, c10::Half, float, 10, 0, 0>(T2 *, const T1 *, int, int, int, const bool *, int, bool)";

    #[test]
    fn aten_elementwise_kernels_are_told_apart_by_their_functor() {
        let d = names(&[VEC_MUL_F, VEC_MUL_D, VEC_ADD_D, VEC_CAST_H, VEC_MUL_H]);
        assert_eq!(d[1], "native::vectorized_elementwise_kernel<…MulFunctor<double>…>");
        // The shortest argument unique to it: the three-pointer array of a binary op.
        assert_eq!(d[2], "native::vectorized_elementwise_kernel<…array<char*, 3>…>");
        assert_eq!(d[4], "native::vectorized_elementwise_kernel<…Half…>");
        assert_eq!(d[0], "native::vectorized_elementwise_kernel<…AUnaryFunctor<float, …>…>");
        assert_eq!(
            d[3],
            "native::vectorized_elementwise_kernel<…float16_copy_kernel_cuda::lambda(float)…>"
        );
        assert_eq!(d.iter().collect::<BTreeSet<_>>().len(), 5);
    }

    #[test]
    fn reduce_kernels_and_a_lone_kernel() {
        let d = names(&[RED_MEAN, RED_NORM, SOFTMAX]);
        assert_eq!(d[0], "native::reduce_kernel<…MeanOps<…>…>");
        assert_eq!(d[1], "native::reduce_kernel<…NormTwoOps<…>…>");
        // Alone in its form: arguments elided; `<unnamed>` is no namespace to show.
        assert_eq!(d[2], "softmax_warp_forward<…>");
    }

    #[test]
    fn mangled_distribution_kernels_demangle_and_differ() {
        // From tests/fixtures/ncu/torch_app_mangled.csv: torch.randn (float, double), torch.rand.
        let normal_f = "_ZN2at6native54_GLOBAL__N__d8ceb000_21_DistributionNormal_cu_0c5b6e8543distribution_elementwise_grid_stride_kernelIfLi4EZNS0_9templates4cuda20normal_and_transformIffPNS_17CUDAGeneratorImplEZZZNS4_13normal_kernelIS7_EEvRKNS_10TensorBaseEddT_ENKUlvE_clEvENKUlvE0_clEvEUlfE_EEvRNS_18TensorIteratorBaseET1_T2_EUlP24curandStatePhilox4_32_10E0_ZNS1_27distribution_nullary_kernelIff6float4S7_SM_SF_EEvSH_SJ_RKT3_T4_EUlifE_EEvlNS_15PhiloxCudaStateESI_SJ_";
        let uniform_f = "_ZN2at6native55_GLOBAL__N__11f7a751_22_DistributionUniform_cu_67fa25cf43distribution_elementwise_grid_stride_kernelIfLi4EZNS0_9templates4cuda21uniform_and_transformIffPNS_17CUDAGeneratorImplEZZZNS4_14uniform_kernelIS7_EEvRNS_18TensorIteratorBaseEddT_ENKUlvE_clEvENKUlvE0_clEvEUlfE_EEvSA_T1_T2_EUlP24curandStatePhilox4_32_10E0_ZNS1_27distribution_nullary_kernelIff6float4S7_SJ_SE_EEvSA_SG_RKT3_T4_EUlifE_EEvlNS_15PhiloxCudaStateESF_SG_";
        let normal_d = "_ZN2at6native54_GLOBAL__N__d8ceb000_21_DistributionNormal_cu_0c5b6e8543distribution_elementwise_grid_stride_kernelIdLi2EZNS0_9templates4cuda20normal_and_transformIddPNS_17CUDAGeneratorImplEZZZNS4_13normal_kernelIS7_EEvRKNS_10TensorBaseEddT_ENKUlvE_clEvENKUlvE_clEvEUldE_EEvRNS_18TensorIteratorBaseET1_T2_EUlP24curandStatePhilox4_32_10E_ZNS1_27distribution_nullary_kernelIdd7double2S7_SM_SF_EEvSH_SJ_RKT3_T4_EUlidE_EEvlNS_15PhiloxCudaStateESI_SJ_";
        let k = kernel_name(normal_f).unwrap();
        assert_eq!(k.base(), "native::distribution_elementwise_grid_stride_kernel<…>");
        let d = names(&[normal_f, uniform_f, normal_d]);
        assert_eq!(
            d[0],
            "native::distribution_elementwise_grid_stride_kernel<…normal_and_transform<float, …>…>"
        );
        assert_eq!(
            d[1],
            "native::distribution_elementwise_grid_stride_kernel<…uniform_and_transform<…>…>"
        );
        assert_eq!(d[2], "native::distribution_elementwise_grid_stride_kernel<…double…>");
        assert_eq!(
            d[1],
            "native::distribution_elementwise_grid_stride_kernel<…uniform_and_transform<…>…>"
        );
    }

    #[test]
    fn library_kernels_of_cublas_cudnn_triton_cub_cutlass_flash() {
        // cuBLAS, cuDNN, Triton names are C identifiers: shown as they are.
        for n in [
            "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT",
            "sm90_xmma_gemm_f64f64_f64f64_f64_nn_n_tilesize128x64x16_stage3_warpsize2x2x1_tensor16x8x8_execute_kernel__5x_cublas",
            "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0",
            "triton_per_fused_add_div_gelu_linalg_vector_norm_mul_0",
            "triton_poi_fused_mul_sigmoid_0",
        ] {
            assert_eq!(names(&[n])[0], n);
        }
        // CUB, as cpp_demangle writes it (torch.sort, torch_app_mangled.csv).
        let cub = "_ZN14at_cuda_detail3cub6detail10radix_sort29DeviceRadixSortOnesweepKernelINS1_5radix10policy_hubIfN2at4cuda3cub6detail10OpaqueTypeILi8EEEyE10Policy1000ELNS0_9SortOrderE0EfSB_yiiNS1_21identity_decomposer_tEEEvPT5_SH_PT3_PKSI_PT1_PKSM_PT2_PKSQ_T4_iiT6_";
        assert_eq!(names(&[cub])[0], "radix_sort::DeviceRadixSortOnesweepKernel<…>");
        // CUTLASS (nsys/ncu tables of public projects): Kernel2 told apart by its operator.
        let c = names(&[
            "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_256x128_16x3_nn_align4>(cutlass_80_tensorop_s1688gemm_256x128_16x3_nn_align4::Params)",
            "void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nt_align1>(T1::Params)",
        ]);
        assert_eq!(c[0], "cutlass::Kernel2<…cutlass_80_tensorop_s1688gemm_256x128_16x3_nn_align4…>");
        assert_eq!(c[1], "cutlass::Kernel2<…cutlass_80_simt_sgemm_256x128_8x4_nt_align1…>");
        // flash-attention 2 (an ncu report of a public project), and nsys's `(int)128` literals.
        let fa = "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, 0, 0, bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, bfloat16_t>>, 0, 0, 0, 0, 1, 1, 0, 0>(Flash_fwd_params)";
        let fa_fp16 = fa.replace("bfloat16_t", "half_t");
        let f = names(&[fa, &fa_fp16]);
        assert_eq!(f[0], "flash_fwd_kernel<…bfloat16_t…>");
        assert_eq!(f[1], "flash_fwd_kernel<…half_t…>");
        let nsys = "void at::native::vectorized_elementwise_kernel<(int)4, at::native::CUDAFunctor_add<float>, std::array<char *, (unsigned long)3>>(int, T2, T3)";
        let Some(Node::Name { parts, .. }) = parse(nsys) else { panic!() };
        let Component::Named { args: Some(a), .. } = parts.last().unwrap() else {
            panic!()
        };
        assert_eq!(a[0], Node::Literal("4".into()));
        assert_eq!(render(&a[2], 3), "array<char*, 3>");
    }

    #[test]
    fn function_names_across_manglings() {
        assert_eq!(
            function_name("triad(double *, const double *, const double *, double, unsigned long)"),
            "triad"
        );
        assert_eq!(function_name(VEC_MUL_D), "vectorized_elementwise_kernel");
        assert_eq!(
            function_name("_ZN2at6native29vectorized_elementwise_kernelILi2ENS0_15CUDAFunctor_addIdEESt5arrayIPcLm3EEEEviT0_T1_"),
            "vectorized_elementwise_kernel"
        );
        assert_eq!(
            function_name("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"),
            "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT"
        );
    }

    #[test]
    fn parser_edge_cases() {
        // operator() as ncu spells it, a return type, const, pointers.
        let Some(Node::Name { parts, .. }) =
            parse("void at::native::sum_functor<float, float, float>::operator ()(at::TensorIterator &) const")
        else {
            panic!()
        };
        assert_eq!(parts.last(), Some(&Component::Operator("()".into())));
        assert_eq!(parts.len(), 4);
        // Unbalanced (a name cut short): not parsed, shown as it is.
        assert!(parse("void f<int(").is_none());
        assert_eq!(names(&["void f<int("])[0], "void f<int(");
        // Same form, no argument unique to either (one's arguments are the other's plus one):
        // shown level by level.
        let d = names(&["void k<A, B>(int)", "void k<A, B, C>(int)"]);
        assert_eq!(d[0], "k<A, B>");
        assert_eq!(d[1], "k<…C…>");
        // The same identity twice keeps one name; identical displays of distinct identities are numbered.
        let d = names(&[
            "void a::(anonymous namespace)::k<int>(int)",
            "void a::k<int>(int)",
            "void a::k<int>(int)",
        ]);
        assert_eq!(d[0], "a::k<…>");
        assert_eq!(d[1], "a::k<…> #2");
        assert_eq!(d[2], d[1]);
    }
}
