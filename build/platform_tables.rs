//! `platforms/*.toml` as Rust data: the source of `machine::platform_tables` (OUT_DIR/
//! platform_tables.rs), static `TableData` values of strings and slices that
//! `Platform::embedded()` turns into `Platform`s, so a program built without the `analysis`
//! feature parses nothing at run time and compiles no deserializer for the tables. The fields
//! and their defaults are those of `Platform`, `Identify`, `Pipes`, `Latency` and `EventSpec`
//! (src/machine/platform.rs), unknown fields refused as there; the library's unit tests compare
//! every generated table with what `Platform::parse` reads from the same file.

use std::collections::BTreeMap;

use crate::toml_subset::{Table, Value};

struct Pipes {
    fma: u32,
    add: u32,
    mul: u32,
}

#[derive(Default)]
struct Latency {
    fma: Option<u32>,
    fadd: Option<u32>,
}

impl Pipes {
    /// The `Pipes` literal.
    fn rust(&self) -> String {
        format!("Pipes {{ fma: {}, add: {}, mul: {} }}", self.fma, self.add, self.mul)
    }
}

impl Latency {
    /// The `Latency` literal.
    fn rust(&self) -> String {
        format!("Latency {{ fma: {:?}, fadd: {:?} }}", self.fma, self.fadd)
    }
}

struct Identify {
    vendor: String,
    families: Vec<u32>,
    models: Vec<u32>,
    requires: Vec<String>,
    lacks: Vec<String>,
    priority: i32,
    l2_kib: Option<[u32; 2]>,
    l3_kib: Option<[u32; 2]>,
}

struct Event {
    name: String,
    pmu: String,
    event: u64,
    umask: u64,
    cmask: u64,
    inv: bool,
    edge: bool,
    config1: u64,
    counters: Option<Vec<u32>>,
    quantity: String,
    class: Option<String>,
    weight: f64,
    paired: bool,
    unreliable: bool,
    caveat: Option<String>,
    optional: bool,
    rdwrmask: u64,
    perf_name: Option<String>,
    aliases: Vec<String>,
    unchecked: Option<String>,
    part_of: Option<String>,
}

struct Platform {
    key: String,
    name: String,
    identify: Identify,
    fp_pipes: BTreeMap<String, Pipes>,
    fp_pipes_e: BTreeMap<String, Pipes>,
    fp512_units_vary: bool,
    bytes_per_cycle: BTreeMap<String, f64>,
    mixed_ops_per_cycle: BTreeMap<String, f64>,
    mixed_unrated: BTreeMap<String, String>,
    core_counters: Option<u32>,
    core_counters_smt_off: Option<u32>,
    llc_inclusive: Option<bool>,
    latency: Latency,
    events: Vec<Event>,
    notes: Vec<String>,
}

/// The fields of one TOML table, taken one by one; what is left at the end is refused.
struct Fields<'a> {
    origin: &'a str,
    /// Where the table is, for messages: `identify.`, `events[3].` (empty: the file's top).
    what: String,
    table: Table,
}

impl<'a> Fields<'a> {
    fn new(origin: &'a str, what: impl Into<String>, table: Table) -> Self {
        Fields {
            origin,
            what: what.into(),
            table,
        }
    }

    fn fail(&self, key: &str, why: &str) -> ! {
        panic!(
            "{}: `{}{key}` {why} (see platforms/README.md for the format)",
            self.origin, self.what
        )
    }

    /// Every field was taken: anything else is unknown.
    fn done(self) {
        if let Some(key) = self.table.keys().next() {
            self.fail(key, "is not a known field");
        }
    }

    fn take(&mut self, key: &str) -> Option<Value> {
        self.table.remove(key)
    }

    fn required<T>(&mut self, key: &str, get: fn(&mut Self, &str) -> Option<T>) -> T {
        get(self, key).unwrap_or_else(|| self.fail(key, "is missing"))
    }

    fn string(&mut self, key: &str) -> Option<String> {
        let v = self.take(key)?;
        Some(as_string(v).unwrap_or_else(|| self.fail(key, "is not a string")))
    }

    fn boolean(&mut self, key: &str) -> Option<bool> {
        match self.take(key)? {
            Value::Bool(b) => Some(b),
            _ => self.fail(key, "is not true or false"),
        }
    }

    fn int<T: TryFrom<i64>>(&mut self, key: &str) -> Option<T> {
        let v = self.take(key)?;
        Some(as_int(v).unwrap_or_else(|| self.fail(key, "is not an integer in range")))
    }

    /// A float; an integer is taken as one (as serde does for an `f64` field).
    fn float(&mut self, key: &str) -> Option<f64> {
        let v = self.take(key)?;
        Some(as_float(v).unwrap_or_else(|| self.fail(key, "is not a number")))
    }

    fn strings(&mut self, key: &str) -> Option<Vec<String>> {
        let v = self.take(key)?;
        Some(as_array(v, as_string).unwrap_or_else(|| self.fail(key, "is not an array of strings")))
    }

    fn ints<T: TryFrom<i64>>(&mut self, key: &str) -> Option<Vec<T>> {
        let v = self.take(key)?;
        Some(as_array(v, as_int).unwrap_or_else(|| self.fail(key, "is not an array of integers in range")))
    }

    fn range(&mut self, key: &str) -> Option<[u32; 2]> {
        let v: Vec<u32> = self.ints(key)?;
        Some(v.try_into().unwrap_or_else(|_| self.fail(key, "is not an array of two integers")))
    }

    fn table(&mut self, key: &str) -> Option<Fields<'a>> {
        let what = format!("{}{key}.", self.what);
        match self.take(key)? {
            Value::Table(t) => Some(Fields::new(self.origin, what, t)),
            _ => self.fail(key, "is not a table"),
        }
    }

    /// A table of values, each read by `get` (a `BTreeMap` field of the library's types).
    fn map<T>(&mut self, key: &str, get: fn(&mut Self, &str) -> Option<T>) -> BTreeMap<String, T> {
        let Some(mut t) = self.table(key) else { return BTreeMap::new() };
        let keys: Vec<String> = t.table.keys().cloned().collect();
        let map = keys
            .iter()
            .map(|k| (k.clone(), get(&mut t, k).expect("a key of the table")))
            .collect();
        t.done();
        map
    }

    fn pipes(&mut self, key: &str) -> Option<Pipes> {
        let mut t = self.table(key)?;
        let p = Pipes {
            fma: t.int("fma").unwrap_or(0),
            add: t.int("add").unwrap_or(0),
            mul: t.int("mul").unwrap_or(0),
        };
        t.done();
        Some(p)
    }
}

fn as_string(v: Value) -> Option<String> {
    match v {
        Value::Str(s) => Some(s),
        _ => None,
    }
}

fn as_int<T: TryFrom<i64>>(v: Value) -> Option<T> {
    match v {
        Value::Int(i) => T::try_from(i).ok(),
        _ => None,
    }
}

fn as_float(v: Value) -> Option<f64> {
    match v {
        Value::Float(f) => Some(f),
        Value::Int(i) => Some(i as f64),
        _ => None,
    }
}

fn as_array<T>(v: Value, item: fn(Value) -> Option<T>) -> Option<Vec<T>> {
    match v {
        Value::Array(a) => a.into_iter().map(item).collect(),
        _ => None,
    }
}

fn identify(mut f: Fields) -> Identify {
    let i = Identify {
        vendor: f.required("vendor", Fields::string),
        families: f.required("families", Fields::ints),
        models: f.ints("models").unwrap_or_default(),
        requires: f.strings("requires").unwrap_or_default(),
        lacks: f.strings("lacks").unwrap_or_default(),
        priority: f.int("priority").unwrap_or(0),
        l2_kib: f.range("l2_kib"),
        l3_kib: f.range("l3_kib"),
    };
    f.done();
    i
}

fn latency(f: Option<Fields>) -> Latency {
    let Some(mut f) = f else { return Latency::default() };
    let l = Latency {
        fma: f.int("fma"),
        fadd: f.int("fadd"),
    };
    f.done();
    l
}

fn event(mut f: Fields) -> Event {
    let e = Event {
        name: f.required("name", Fields::string),
        pmu: f.string("pmu").unwrap_or_else(|| "cpu".into()),
        event: f.required("event", Fields::int),
        umask: f.int("umask").unwrap_or(0),
        cmask: f.int("cmask").unwrap_or(0),
        inv: f.boolean("inv").unwrap_or(false),
        edge: f.boolean("edge").unwrap_or(false),
        config1: f.int("config1").unwrap_or(0),
        counters: f.ints("counters"),
        quantity: f.required("quantity", Fields::string),
        class: f.string("class"),
        weight: f.float("weight").unwrap_or(1.0),
        paired: f.boolean("paired").unwrap_or(false),
        unreliable: f.boolean("unreliable").unwrap_or(false),
        caveat: f.string("caveat"),
        optional: f.boolean("optional").unwrap_or(false),
        rdwrmask: f.int("rdwrmask").unwrap_or(0),
        perf_name: f.string("perf_name"),
        aliases: f.strings("aliases").unwrap_or_default(),
        unchecked: f.string("unchecked"),
        part_of: f.string("part_of"),
    };
    f.done();
    e
}

/// One platform file's table, as `Platform::parse` would read it (without its checks, which
/// the library's tests run on every embedded file).
fn platform(table: Table, origin: &str) -> Platform {
    let mut f = Fields::new(origin, "", table);
    let events = match f.take("events") {
        None => Vec::new(),
        Some(Value::Array(a)) => a
            .into_iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::Table(t) => event(Fields::new(origin, format!("events[{i}]."), t)),
                _ => f.fail("events", "is not an array of tables"),
            })
            .collect(),
        Some(_) => f.fail("events", "is not an array of tables"),
    };
    let identify_table = f.required("identify", Fields::table);
    let latency_table = f.table("latency");
    if !f.table.contains_key("fp_pipes") {
        f.fail("fp_pipes", "is missing");
    }
    let p = Platform {
        key: f.required("key", Fields::string),
        name: f.required("name", Fields::string),
        identify: identify(identify_table),
        fp_pipes: f.map("fp_pipes", Fields::pipes),
        fp_pipes_e: f.map("fp_pipes_e", Fields::pipes),
        fp512_units_vary: f.boolean("fp512_units_vary").unwrap_or(false),
        bytes_per_cycle: f.map("bytes_per_cycle", Fields::float),
        mixed_ops_per_cycle: f.map("mixed_ops_per_cycle", Fields::float),
        mixed_unrated: f.map("mixed_unrated", Fields::string),
        core_counters: f.int("core_counters"),
        core_counters_smt_off: f.int("core_counters_smt_off"),
        llc_inclusive: f.boolean("llc_inclusive"),
        latency: latency(latency_table),
        events,
        notes: f.strings("notes").unwrap_or_default(),
    };
    f.done();
    p
}

/// The Rust source of `machine::platform_tables` from every `(file stem, TOML text)`, in the
/// order given.
pub fn rust(files: &[(String, String)]) -> String {
    let tables: Vec<Platform> = files
        .iter()
        .map(|(stem, text)| {
            let origin = format!("platforms/{stem}.toml");
            platform(crate::toml_subset::read(text, &origin), &origin)
        })
        .collect();
    let strs = |v: &[String]| format!("&{v:?}");
    let pairs = |v: Vec<String>| format!("&[{}]", v.join(", "));
    let hex = |v: &[u32]| pairs(v.iter().map(|n| format!("{n:#x}")).collect());
    let mut o = String::from(
        "// Generated by build.rs (build/platform_tables.rs) from platforms/*.toml: edit the TOML.\n\n\
         use super::platform::{EventData, IdentifyData, Latency, Pipes, TableData};\n\n\
         const E: EventData = EventData::DEFAULT;\n\n\
         pub(crate) static TABLES: &[TableData] = &[\n",
    );
    for p in &tables {
        let i = &p.identify;
        let pipes = |m: &BTreeMap<String, Pipes>| pairs(m.iter().map(|(k, v)| format!("({k:?}, {})", v.rust())).collect());
        let nums = |m: &BTreeMap<String, f64>| pairs(m.iter().map(|(k, v)| format!("({k:?}, {v:?})")).collect());
        o += &format!(
            "    TableData {{\n        key: {:?},\n        name: {:?},\n        identify: IdentifyData {{ vendor: {:?}, families: {}, models: {}, requires: {}, lacks: {}, priority: {}, l2_kib: {:?}, l3_kib: {:?} }},\n",
            p.key,
            p.name,
            i.vendor,
            hex(&i.families),
            hex(&i.models),
            strs(&i.requires),
            strs(&i.lacks),
            i.priority,
            i.l2_kib,
            i.l3_kib
        );
        o += &format!(
            "        fp_pipes: {},\n        fp_pipes_e: {},\n        fp512_units_vary: {},\n        bytes_per_cycle: {},\n        mixed_ops_per_cycle: {},\n        mixed_unrated: {},\n",
            pipes(&p.fp_pipes),
            pipes(&p.fp_pipes_e),
            p.fp512_units_vary,
            nums(&p.bytes_per_cycle),
            nums(&p.mixed_ops_per_cycle),
            pairs(p.mixed_unrated.iter().map(|(k, v)| format!("({k:?}, {v:?})")).collect())
        );
        o += &format!(
            "        core_counters: {:?},\n        core_counters_smt_off: {:?},\n        llc_inclusive: {:?},\n        latency: {},\n        events: &[\n",
            p.core_counters,
            p.core_counters_smt_off,
            p.llc_inclusive,
            p.latency.rust()
        );
        for e in &p.events {
            o += &format!("            EventData {{ {}, ..E }},\n", event_fields(e).join(", "));
        }
        o += &format!("        ],\n        notes: {},\n    }},\n", strs(&p.notes));
    }
    o + "];\n"
}

/// The fields of one `EventData` literal that differ from `EventData::DEFAULT` (the TOML's
/// defaults), the name, event and quantity always.
fn event_fields(e: &Event) -> Vec<String> {
    let mut f = vec![format!("name: {:?}", e.name)];
    if e.pmu != "cpu" {
        f.push(format!("pmu: {:?}", e.pmu));
    }
    f.push(format!("event: {:#x}", e.event));
    for (k, v) in [("umask", e.umask), ("cmask", e.cmask), ("config1", e.config1)] {
        if v != 0 {
            f.push(format!("{k}: {v:#x}"));
        }
    }
    for (k, v) in [
        ("inv", e.inv),
        ("edge", e.edge),
        ("paired", e.paired),
        ("unreliable", e.unreliable),
        ("optional", e.optional),
    ] {
        if v {
            f.push(format!("{k}: true"));
        }
    }
    if let Some(c) = &e.counters {
        f.push(format!("counters: Some(&{c:?})"));
    }
    f.push(format!("quantity: {:?}", e.quantity));
    if e.weight != 1.0 {
        f.push(format!("weight: {:?}", e.weight));
    }
    if e.rdwrmask != 0 {
        f.push(format!("rdwrmask: {}", e.rdwrmask));
    }
    if !e.aliases.is_empty() {
        f.push(format!("aliases: &{:?}", e.aliases));
    }
    for (k, v) in [
        ("class", &e.class),
        ("caveat", &e.caveat),
        ("perf_name", &e.perf_name),
        ("unchecked", &e.unchecked),
        ("part_of", &e.part_of),
    ] {
        if v.is_some() {
            f.push(format!("{k}: {v:?}"));
        }
    }
    f
}
