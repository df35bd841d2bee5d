use super::*;
use serde_json::json;

/// Every `roofline.report/1` document under `tests/fixtures`, with its path.
fn fixture_reports() -> Vec<(std::path::PathBuf, Value)> {
    fn walk(dir: &std::path::Path, out: &mut Vec<(std::path::PathBuf, Value)>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "json")
                && let Ok(v) = serde_json::from_str::<Value>(&std::fs::read_to_string(&path).unwrap())
                && v.get("schema").and_then(Value::as_str) == Some(crate::schema::report::REPORT_SCHEMA)
            {
                out.push((path, v));
            }
        }
    }
    let mut out = Vec::new();
    walk(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures"), &mut out);
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// An `extra` object read as [`PointExtras`] and written back: the same JSON, text included.
fn assert_round_trip(extra: &Value, what: &str) {
    let typed: PointExtras = serde_json::from_value(extra.clone()).unwrap_or_else(|e| panic!("{what}: {e}"));
    let back = serde_json::to_value(&typed).unwrap();
    assert_eq!(&back, extra, "{what}");
    assert_eq!(
        serde_json::to_string_pretty(&typed).unwrap(),
        serde_json::to_string_pretty(extra).unwrap(),
        "{what}"
    );
}

#[test]
fn fixture_reports_keep_their_extras_through_the_types() {
    let reports = fixture_reports();
    assert!(reports.len() >= 10, "found {} fixture reports", reports.len());
    let mut typed_seen = 0;
    for (path, doc) in &reports {
        for (i, p) in doc["points"].as_array().unwrap().iter().enumerate() {
            let Some(extra) = p.get("extra") else { continue };
            assert_round_trip(extra, &format!("{} point {i}", path.display()));
            let typed: PointExtras = serde_json::from_value(extra.clone()).unwrap();
            if (PointExtras {
                other: BTreeMap::new(),
                ..typed
            }) != PointExtras::default()
            {
                typed_seen += 1;
            }
        }
        // The whole document still reads (old fixtures included).
        let text = serde_json::to_string(doc).unwrap();
        crate::schema::Report::from_json(&text, &path.display().to_string()).unwrap();
    }
    assert!(typed_seen > 0, "no fixture point carries a typed figure");
}

#[test]
fn fixture_figures_land_in_their_fields() {
    let gpu = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ncu/gpu_run_dgemm_cublas.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(gpu).unwrap()).unwrap();
    let typed: PointExtras = serde_json::from_value(doc["points"][0]["extra"].clone()).unwrap();
    assert!(typed.library.is_some() && typed.library_gflops.is_some(), "{typed:?}");
    assert!(!typed.other.contains_key("library") && !typed.other.contains_key("library_gflops"));
}

#[test]
fn unknown_keys_are_kept_in_place() {
    let extra = json!({
        "a_tool_of_its_own": {"nested": [1, 2.5, null]},
        "calls": 3,
        "effective_ghz": 2.95,
        "kernel": "triad",
        "zz_last": "kept",
    });
    let typed: PointExtras = serde_json::from_value(extra.clone()).unwrap();
    assert_eq!(
        (typed.calls, typed.effective_ghz, typed.kernel.as_deref()),
        (Some(3), Some(2.95), Some("triad"))
    );
    assert_eq!(typed.other.keys().collect::<Vec<_>>(), ["a_tool_of_its_own", "zz_last"]);
    assert_round_trip(&extra, "unknown keys");
    // Sorted together: the typed keys sit between the others, as in one map.
    let text = serde_json::to_string(&typed).unwrap();
    assert_eq!(
        text,
        r#"{"a_tool_of_its_own":{"nested":[1,2.5,null]},"calls":3,"effective_ghz":2.95,"kernel":"triad","zz_last":"kept"}"#
    );
}

#[test]
fn absent_stays_absent_and_empty_is_an_empty_object() {
    assert_eq!(serde_json::to_string(&PointExtras::default()).unwrap(), "{}");
    let typed: PointExtras = serde_json::from_value(json!({})).unwrap();
    assert_eq!(typed, PointExtras::default());
    let mut one = PointExtras::default();
    one.insert("repeats", 5);
    assert_eq!(serde_json::to_string(&one).unwrap(), r#"{"repeats":5}"#);
    assert_eq!(one.other.get("repeats"), Some(&json!(5)));
}

/// A small deterministic generator (no dependency): xorshift64.
struct Draw(u64);

impl Draw {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn f64(&mut self) -> f64 {
        // Whole and fractional values, tiny and large: each prints as the writers print it.
        let x = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        match self.below(4) {
            0 => (x * 1e6).floor(),
            1 => x * 1e-6,
            2 => x * 1e12,
            _ => x,
        }
    }
    fn word(&mut self) -> String {
        ["dram", "l2", "fp64", "bf16", "CAS.WR", "x y", "é", ""][self.below(8) as usize].to_string()
    }
}

/// One random `extra` object in the shapes this program writes, typed keys and others mixed.
fn random_extra(d: &mut Draw) -> Value {
    let mut m = serde_json::Map::new();
    let row = |d: &mut Draw, line: bool| {
        let mut r = json!({
            "function": d.word(),
            "instructions": d.below(1 << 40),
            "flops": d.below(1 << 40),
            "core_bytes": d.below(1 << 40),
        });
        if line {
            r["line"] = json!(format!("a.c:{}", d.below(100)));
            r["chains"] = json!([{"frames": [{"function": "f", "line": null}], "instructions": 1, "flops": 2}]);
            if d.below(2) == 0 {
                r["chains_left_off"] = json!(d.below(9));
            }
        } else {
            r["flops_by_class"] = json!({"packed256_double": d.below(1000)});
            r["stack_bytes"] = json!(d.below(1000));
        }
        r
    };
    for key in [
        "by_function",
        "by_line",
        "calls",
        "coalescing",
        "counts",
        "effective_ghz",
        "fixed_seconds",
        "fma_flops_counted",
        "imbalance",
        "instances",
        "instruction_roofline",
        "instructions",
        "kernel",
        "kernel_demangled",
        "kernels",
        "launches",
        "library",
        "library_gflops",
        "multiplex_running_ratio",
        "not_counted",
        "regime",
        "regime_reason",
        "region",
        "roof_bound",
        "roof_gflops",
        "simulated_dram_split",
        "tensor_ops_by_type",
        "tensor_used",
        "time_share",
        "repeats",
        "trace",
        "model",
        "working_set_bytes",
        "unclassified",
        "runs",
    ] {
        if d.below(2) == 0 {
            continue;
        }
        let v = match key {
            "by_function" => json!((0..d.below(3)).map(|_| row(d, false)).collect::<Vec<_>>()),
            "by_line" => json!((0..d.below(3)).map(|_| row(d, true)).collect::<Vec<_>>()),
            "calls" | "instances" | "instructions" | "launches" | "repeats" | "working_set_bytes" | "unclassified" => {
                json!(d.below(1 << 50))
            }
            "coalescing" | "counts" | "imbalance" | "multiplex_running_ratio" | "tensor_ops_by_type" => {
                json!({ d.word(): d.f64(), d.word(): d.f64() })
            }
            "kernel" | "kernel_demangled" | "library" | "regime" | "regime_reason" | "region" | "roof_bound" => {
                json!(d.word())
            }
            "not_counted" => json!([d.word(), d.word()]),
            "kernels" => json!([{"name": d.word(), "launches": d.below(9), "seconds": d.f64(),
                "time_share": if d.below(2) == 0 { Value::Null } else { json!(d.f64()) }}]),
            "simulated_dram_split" => json!([d.f64(), d.f64()]),
            "tensor_used" => json!(d.below(2) == 0),
            "instruction_roofline" | "trace" | "model" => json!({"x": d.f64(), "y": null, "z": {"w": [d.word()]}}),
            "runs" => json!([{"seconds": d.f64(), "counts": {"cycles": null}}]),
            _ => json!(d.f64()),
        };
        m.insert(key.to_string(), v);
    }
    Value::Object(m)
}

#[test]
fn random_extras_round_trip() {
    let mut d = Draw(0x9e37_79b9_7f4a_7c15);
    for i in 0..2000 {
        let extra = random_extra(&mut d);
        assert_round_trip(&extra, &format!("draw {i}: {extra}"));
    }
}

#[test]
fn every_typed_field_is_listed_once_under_its_key() {
    let all = PointExtras {
        by_function: Some(vec![]),
        by_line: Some(vec![]),
        calls: Some(1),
        coalescing: Some(BTreeMap::new()),
        counts: Some(BTreeMap::new()),
        effective_ghz: Some(1.0),
        energy: Some(Default::default()),
        fixed_seconds: Some(1.0),
        fma_flops_counted: Some(1.0),
        imbalance: Some(BTreeMap::new()),
        instances: Some(1),
        instruction_roofline: Some(json!({})),
        instructions: Some(1.into()),
        kernel: Some(String::new()),
        kernel_demangled: Some(String::new()),
        kernels: Some(vec![]),
        launches: Some(1),
        library: Some(String::new()),
        library_gflops: Some(1.0),
        multiplex_running_ratio: Some(BTreeMap::new()),
        not_counted: Some(vec![]),
        regime: Some(String::new()),
        regime_reason: Some(String::new()),
        region: Some(String::new()),
        roof_bound: Some(String::new()),
        roof_gflops: Some(1.0),
        simulated_dram_split: Some((1.0, 2.0)),
        tensor_ops_by_type: Some(BTreeMap::new()),
        tensor_used: Some(true),
        time_share: Some(1.0),
        other: BTreeMap::new(),
    };
    let keys: Vec<String> = all.to_json().as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys, PointExtras::TYPED_KEYS);
    // `extend` takes every one of them.
    let mut taken = PointExtras::default();
    taken.extend(all.clone());
    assert_eq!(taken, all);
    // and leaves what `more` does not set.
    taken.extend(PointExtras {
        calls: Some(7),
        ..PointExtras::default()
    });
    assert_eq!((taken.calls, taken.launches), (Some(7), Some(1)));
}

#[test]
fn a_known_key_of_another_type_stays_unread_and_is_written_back() {
    let extra = json!({
        "calls": "three",
        "counts": {"cycles": "many"},
        "effective_ghz": null,
        "kernel": 7,
        "launches": 4,
    });
    let typed: PointExtras = serde_json::from_value(extra.clone()).unwrap();
    assert_eq!(
        (typed.calls, typed.counts.as_ref(), typed.effective_ghz, typed.kernel.as_deref()),
        (None, None, None, None)
    );
    assert_eq!(typed.launches, Some(4));
    assert_eq!(
        typed.other.keys().collect::<Vec<_>>(),
        ["calls", "counts", "effective_ghz", "kernel"]
    );
    assert_round_trip(&extra, "known keys of other types");
    // The report around it still reads.
    let mut doc: Value = serde_json::from_str(
        &std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reports/before.json")).unwrap(),
    )
    .unwrap();
    doc["points"][0]["extra"] = extra;
    crate::schema::Report::from_json(&doc.to_string(), "edited.json").unwrap();
}

#[test]
fn a_typed_field_set_over_an_unread_value_is_the_one_written() {
    let mut typed: PointExtras = serde_json::from_value(json!({"regime": 3})).unwrap();
    assert_eq!(typed.regime, None);
    typed.regime = Some("compute".into());
    assert_eq!(typed.to_json(), json!({"regime": "compute"}));
}
