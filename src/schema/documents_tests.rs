use super::*;
use serde_json::json;

fn roof(key: &str) -> CompareRoof {
    CompareRoof {
        key: key.into(),
        label: "AVX-512 FMA".into(),
        gflops: 1234.5,
        empirical: false,
    }
}

fn compare_row() -> CompareRow {
    CompareRow {
        kernel: "dgemm".into(),
        cpu: "dgemm@dram".into(),
        gpu: "dgemm_kernel".into(),
        cpu_seconds: 0.5,
        gpu_seconds: 0.001,
        cpu_gflops: Some(100.0),
        gpu_gflops: None,
        cpu_roof_fraction: Some(0.25),
        gpu_roof_fraction: None,
        speedup_time: Some(500.0),
        speedup_rate: None,
        caveats: vec!["GPU dgemm_kernel: compute-bound at 10% of its roof".into()],
        cpu_precision: "double".into(),
        gpu_precision: "double".into(),
        cpu_roof: Some(roof("double.avx512.fma")),
        gpu_roof: None,
        same_precision: true,
        energy: None,
    }
}

/// The document as `json!` built it before it had a type: every key, in the same order.
#[test]
fn compare_is_written_as_the_untyped_document_was() {
    let doc = CompareDocument {
        schema: COMPARE_SCHEMA.into(),
        rows: vec![compare_row()],
    };
    let r = roof("double.avx512.fma");
    let old = json!({"schema": "roofline.compare/1", "rows": [
        json!({"kernel": "dgemm", "cpu": "dgemm@dram", "gpu": "dgemm_kernel", "cpu_seconds": 0.5, "gpu_seconds": 0.001,
        "cpu_gflops": 100.0, "gpu_gflops": null, "cpu_roof_fraction": 0.25, "gpu_roof_fraction": null,
        "speedup_time": 500.0, "speedup_rate": null, "caveats": ["GPU dgemm_kernel: compute-bound at 10% of its roof"],
        "cpu_precision": "double", "gpu_precision": "double",
        "cpu_roof": json!({"key": r.key, "label": r.label, "gflops": r.gflops, "empirical": r.empirical}),
        "gpu_roof": null,
        "same_precision": true})
    ]});
    assert_eq!(doc.to_json(), serde_json::to_string_pretty(&old).unwrap());
    // Keys sorted in every object, the rows' included.
    let text = doc.to_json();
    assert!(text.find("\"caveats\"").unwrap() < text.find("\"kernel\"").unwrap(), "{text}");
    assert!(text.find("\"rows\"").unwrap() < text.find("\"schema\"").unwrap(), "{text}");
    assert_eq!(CompareDocument::from_json(&text, "compare.json").unwrap(), doc);
}

#[test]
fn events_is_written_as_the_untyped_document_was() {
    let doc = EventsDocument {
        schema: EVENTS_SCHEMA.into(),
        platform: "zen4".into(),
        platform_name: "AMD Zen 4".into(),
        platform_from: "platform option".into(),
        smt: true,
        gp_counters: 6,
        perf_command: "perf stat -x, -e 'a' -- ./triad".into(),
        event_args: vec!["duration_time,task-clock".into(), "{a,b}".into()],
        system_wide: false,
        events: vec![EventEntry {
            name: "fp_ret_sse_avx_ops.all".into(),
            perf: "cpu/event=0x03,umask=0xff/".into(),
            pmu: "cpu".into(),
            quantity: "flops".into(),
            class: None,
            weight: 1.0,
            counters: Some(vec![0, 1]),
            paired: true,
            unreliable: false,
            optional: false,
            caveat: Some("counts merged FMAs twice".into()),
        }],
        notes: vec!["no uncore".into()],
    };
    let old = json!({
        "schema": "roofline.events/1", "platform": "zen4", "platform_name": "AMD Zen 4",
        "platform_from": "platform option", "smt": true, "gp_counters": 6,
        "perf_command": "perf stat -x, -e 'a' -- ./triad",
        "event_args": ["duration_time,task-clock", "{a,b}"], "system_wide": false,
        "events": [json!({
            "name": "fp_ret_sse_avx_ops.all", "perf": "cpu/event=0x03,umask=0xff/", "pmu": "cpu", "quantity": "flops",
            "class": null, "weight": 1.0, "counters": [0, 1], "paired": true,
            "unreliable": false, "optional": false, "caveat": "counts merged FMAs twice",
        })],
        "notes": ["no uncore"],
    });
    assert_eq!(doc.to_json(), serde_json::to_string_pretty(&old).unwrap());
    assert_eq!(EventsDocument::from_json(&doc.to_json(), "events.json").unwrap(), doc);
}

/// A row type of the layer above, serialize-only like `validate::Row`.
#[derive(Serialize)]
struct Row {
    kernel: &'static str,
    ok: bool,
    dram_measured: Option<u64>,
}

#[test]
fn validate_documents_are_written_as_the_untyped_ones_were() {
    let rows = [
        Row {
            kernel: "triad",
            ok: true,
            dram_measured: Some(65536),
        },
        Row {
            kernel: "dgemm",
            ok: false,
            dram_measured: None,
        },
    ];
    for memory_mode in [false, true] {
        let doc = ValidateDocument {
            schema: VALIDATE_SCHEMA.into(),
            backend: "trace".into(),
            seed: u64::MAX,
            tolerance: Tolerance {
                flops: 0.0,
                core_bytes: Some(0.0),
                dram_bytes: memory_mode.then_some(0.02),
            },
            cache: memory_mode.then(|| "L1 4 KiB".to_string()),
            ok: false,
            rows: rows.iter().collect(),
        };
        let old = json!({
            "schema": "roofline.validate/1",
            "backend": "trace",
            "seed": u64::MAX,
            "tolerance": if memory_mode {
                json!({"flops": 0.0, "core_bytes": 0.0, "dram_bytes": 0.02})
            } else {
                json!({"flops": 0.0, "core_bytes": 0.0})
            },
            "cache": memory_mode.then(|| "L1 4 KiB".to_string()),
            "ok": false,
            "rows": rows,
        });
        assert_eq!(doc.to_json(), serde_json::to_string_pretty(&old).unwrap());
        // Read back with the rows left untyped.
        let back = ValidateDocument::<serde_json::Value>::from_json(&doc.to_json(), "v.json").unwrap();
        assert_eq!((back.seed, back.tolerance, back.rows.len()), (u64::MAX, doc.tolerance, 2));
        assert_eq!(back.rows[1]["dram_measured"], serde_json::Value::Null);
    }
    let perf = ValidatePerfDocument {
        schema: VALIDATE_PERF_SCHEMA.into(),
        backend: "simulated".into(),
        tolerance: Tolerance {
            flops: 0.01,
            core_bytes: None,
            dram_bytes: Some(0.1),
        },
        ok: true,
        validation: &rows[0],
    };
    let old = json!({
        "schema": "roofline.validate-perf/1",
        "backend": "simulated",
        "tolerance": {"flops": 0.01, "dram_bytes": 0.1},
        "ok": true,
        "validation": rows[0],
    });
    assert_eq!(perf.to_json(), serde_json::to_string_pretty(&old).unwrap());
}

#[test]
fn sweep_and_kernels_are_written_as_the_untyped_documents_were() {
    let sweep = json!({"kernel": "load", "threads": 1, "points": [[4096, 145.3]]});
    let doc = SweepDocument::new(&sweep);
    assert_eq!(
        doc.to_json(),
        serde_json::to_string_pretty(&json!({ "schema": "roofline.sweep/1", "sweep": sweep })).unwrap()
    );
    let back = SweepDocument::<serde_json::Value>::from_json(&doc.to_json(), "sweep.json").unwrap();
    assert_eq!(back.sweep, sweep);
    let kernels = KernelsDocument {
        kernels: vec![KernelInfo {
            name: "triad".into(),
            description: "a[i] = b[i] + s·c[i]".into(),
            precision: Precision::F64,
            size_unit: "elements".into(),
            default_variant: None,
            variants: vec![VariantInfo {
                name: "scalar".into(),
                runnable: true,
                formula: "W = 2·n".into(),
            }],
        }],
    };
    let old = json!({ "kernels": [json!({
        "name": "triad", "description": "a[i] = b[i] + s·c[i]", "precision": Precision::F64,
        "size_unit": "elements", "default_variant": null,
        "variants": [json!({"name": "scalar", "runnable": true, "formula": "W = 2·n"})],
    })]});
    assert_eq!(kernels.to_json(), serde_json::to_string_pretty(&old).unwrap());
}

#[test]
fn the_reader_refuses_other_documents_and_majors() {
    let doc = SweepDocument::new(json!({}));
    let text = doc.to_json();
    let err = CompareDocument::from_json(&text, "x.json").unwrap_err().to_string();
    assert!(err.contains("x.json") && err.contains("roofline.compare"), "{err}");
    let newer = text.replace("roofline.sweep/1", "roofline.sweep/2");
    let err = SweepDocument::<serde_json::Value>::from_json(&newer, "x.json")
        .unwrap_err()
        .to_string();
    assert!(err.contains("not supported"), "{err}");
    let err = SweepDocument::<serde_json::Value>::from_json("{", "x.json")
        .unwrap_err()
        .to_string();
    assert!(err.contains("not JSON"), "{err}");
    // The right schema but a field of the wrong type.
    let bad = json!({"schema": "roofline.compare/1", "rows": 3}).to_string();
    let err = CompareDocument::from_json(&bad, "x.json").unwrap_err().to_string();
    assert!(err.contains("not a valid roofline.compare/1 document"), "{err}");
}

#[test]
fn schema_constants_name_a_major_version() {
    for s in [SWEEP_SCHEMA, EVENTS_SCHEMA, VALIDATE_SCHEMA, VALIDATE_PERF_SCHEMA, COMPARE_SCHEMA] {
        let (name, major) = schema_parts(s);
        assert!(name.starts_with("roofline.") && major == 1, "{s}");
    }
}
