//! A reader of the TOML that `platforms/*.toml` use, for build.rs, which has no dependencies:
//! with the `toml` crate as a build-dependency every regions-only dependent compiled toml,
//! toml_parser, winnow, serde_spanned and a second serde before roofline could start (about
//! 9 s of CPU, docs/region-api.md). It reads comments, `key = value` lines with bare, quoted
//! and dotted keys, `[table]`, `[a.b]` and `[[array]]` headers, basic strings, decimal and
//! hexadecimal integers, floats, booleans and arrays over several lines; anything else (literal
//! and multi-line strings, inline tables, dates, special floats) stops the build with the file,
//! line and what it met. The library's unit tests compare every table built from what this
//! reads with what the `toml` crate reads from the same file.

use std::collections::BTreeMap;
use std::fmt::Display;

/// A TOML value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    Array(Vec<Value>),
    Table(Table),
}

/// A TOML table, keys in sorted order.
pub type Table = BTreeMap<String, Value>;

/// The document `text` (from `origin`, for messages) as a table; panics with `origin:line:
/// what` on anything outside the subset or not TOML.
pub fn read(text: &str, origin: &str) -> Table {
    let mut r = Reader {
        origin,
        chars: text.chars().collect(),
        pos: 0,
        line: 1,
    };
    let mut doc = Document::default();
    loop {
        r.skip_blank();
        match r.peek() {
            None => break,
            Some('#' | '\r' | '\n') => r.end_of_line(),
            Some('[') => doc.header(&mut r),
            Some(_) => doc.key_value(&mut r),
        }
    }
    doc.root
}

/// The document read so far and the table that `key = value` lines go into.
#[derive(Default)]
struct Document {
    root: Table,
    /// Path of the table of the last header (empty: the root).
    current: Vec<String>,
    /// Headers seen, `[a.b]` as "a.b": a table is defined once.
    defined: Vec<String>,
    /// Paths that `[[…]]` headers made arrays of tables of.
    table_arrays: Vec<String>,
}

impl Document {
    /// `[a.b]` or `[[a.b]]`, then the end of the line.
    fn header(&mut self, r: &mut Reader) {
        r.bump();
        let array = r.peek() == Some('[');
        if array {
            r.bump();
        }
        r.skip_blank();
        let path = r.key();
        r.skip_blank();
        r.expect(']');
        if array {
            r.expect(']');
        }
        let name = path.join(".");
        if array {
            let (last, parent) = path.split_last().expect("a key has a part");
            let known = self.table_arrays.contains(&name);
            let table = descend(&mut self.root, parent, r);
            match table.get_mut(last) {
                None => {
                    table.insert(last.clone(), Value::Array(vec![Value::Table(Table::new())]));
                }
                Some(Value::Array(v)) if known => v.push(Value::Table(Table::new())),
                Some(_) => r.fail(format!("[[{name}]]: `{name}` is already a value")),
            }
            if !known {
                self.table_arrays.push(name);
            }
        } else {
            if self.defined.contains(&name) || self.table_arrays.contains(&name) {
                r.fail(format!("[{name}] is defined twice"));
            }
            descend(&mut self.root, &path, r);
            self.defined.push(name);
        }
        self.current = path;
        r.end_of_line();
    }

    /// `key = value`, then the end of the line.
    fn key_value(&mut self, r: &mut Reader) {
        let path = r.key();
        r.skip_blank();
        r.expect('=');
        r.skip_blank();
        let value = r.value();
        let (last, parent) = path.split_last().expect("a key has a part");
        let table = descend(&mut self.root, &self.current, r);
        let table = descend(table, parent, r);
        if table.insert(last.clone(), value).is_some() {
            r.fail(format!("`{}` is defined twice", path.join(".")));
        }
        r.end_of_line();
    }
}

/// The table at `path` below `table` (the last element of an array of tables), made where
/// missing.
fn descend<'t>(mut table: &'t mut Table, path: &[String], r: &Reader) -> &'t mut Table {
    for part in path {
        let v = table.entry(part.clone()).or_insert_with(|| Value::Table(Table::new()));
        table = match v {
            Value::Table(t) => t,
            Value::Array(a) => match a.last_mut() {
                Some(Value::Table(t)) => t,
                _ => r.fail(format!("`{part}` is an array, not a table")),
            },
            _ => r.fail(format!("`{part}` is a value, not a table")),
        };
    }
    table
}

struct Reader<'a> {
    origin: &'a str,
    chars: Vec<char>,
    pos: usize,
    line: usize,
}

impl Reader<'_> {
    fn fail(&self, what: impl Display) -> ! {
        panic!(
            "{}:{}: {what} (build.rs reads a subset of TOML: build/toml_subset.rs)",
            self.origin, self.line
        )
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += 1;
        if c == '\n' {
            self.line += 1;
        }
        Some(c)
    }

    fn expect(&mut self, want: char) {
        match self.peek() {
            Some(c) if c == want => {
                self.bump();
            }
            Some(c) => self.fail(format!("expected `{want}`, found `{}`", c.escape_debug())),
            None => self.fail(format!("expected `{want}`, found the end of the file")),
        }
    }

    /// Spaces and tabs.
    fn skip_blank(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t')) {
            self.bump();
        }
    }

    /// Blanks, a comment, then a newline or the end of the file.
    fn end_of_line(&mut self) {
        self.skip_blank();
        if self.peek() == Some('#') {
            while !matches!(self.peek(), None | Some('\n' | '\r')) {
                self.bump();
            }
        }
        if self.peek() == Some('\r') {
            self.bump();
            if self.peek() != Some('\n') {
                self.fail("a carriage return without a newline");
            }
        }
        match self.peek() {
            None => {}
            Some('\n') => {
                self.bump();
            }
            Some(c) => self.fail(format!("expected the end of the line, found `{}`", c.escape_debug())),
        }
    }

    /// Blanks, newlines and comments (inside an array).
    fn skip_blank_lines(&mut self) {
        loop {
            self.skip_blank();
            match self.peek() {
                Some('#' | '\r' | '\n') => self.end_of_line(),
                _ => return,
            }
        }
    }

    /// A key: bare or quoted parts joined by dots.
    fn key(&mut self) -> Vec<String> {
        let mut parts = vec![self.simple_key()];
        loop {
            self.skip_blank();
            if self.peek() != Some('.') {
                return parts;
            }
            self.bump();
            self.skip_blank();
            parts.push(self.simple_key());
        }
    }

    fn simple_key(&mut self) -> String {
        if self.peek() == Some('"') {
            return self.string();
        }
        let mut k = String::new();
        while let Some(c) = self.peek().filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-') {
            k.push(c);
            self.bump();
        }
        if k.is_empty() {
            match self.peek() {
                Some(c) => self.fail(format!("expected a key, found `{}`", c.escape_debug())),
                None => self.fail("expected a key, found the end of the file"),
            }
        }
        k
    }

    fn value(&mut self) -> Value {
        match self.peek() {
            Some('"') => Value::Str(self.string()),
            Some('[') => self.array(),
            Some('\'') => self.fail("literal strings ('…') are outside the subset: use \"…\""),
            Some('{') => self.fail("inline tables are outside the subset: use a [table]"),
            Some(_) => self.scalar(),
            None => self.fail("expected a value, found the end of the file"),
        }
    }

    /// A basic string, `"…"` on one line, with TOML's escapes.
    fn string(&mut self) -> String {
        self.expect('"');
        if self.peek() == Some('"') && self.chars.get(self.pos + 1) == Some(&'"') {
            self.fail("multi-line strings (\"\"\"…) are outside the subset");
        }
        let mut s = String::new();
        loop {
            let c = match self.peek() {
                None | Some('\n' | '\r') => self.fail("a string without its closing quote"),
                Some(c) => c,
            };
            self.bump();
            match c {
                '"' => return s,
                '\\' => {
                    let c = match self.bump() {
                        Some('b') => '\u{8}',
                        Some('t') => '\t',
                        Some('n') => '\n',
                        Some('f') => '\u{c}',
                        Some('r') => '\r',
                        Some('"') => '"',
                        Some('\\') => '\\',
                        Some('u') => self.unicode(4),
                        Some('U') => self.unicode(8),
                        _ => self.fail("an unknown escape in a string"),
                    };
                    s.push(c);
                }
                c if c.is_control() && c != '\t' => self.fail("a control character in a string"),
                c => s.push(c),
            }
        }
    }

    fn unicode(&mut self, digits: usize) -> char {
        let hex: String = (0..digits).filter_map(|_| self.bump()).collect();
        u32::from_str_radix(&hex, 16)
            .ok()
            .filter(|_| hex.len() == digits)
            .and_then(char::from_u32)
            .unwrap_or_else(|| self.fail(format!("`{hex}` is no Unicode scalar value")))
    }

    /// `[v, v, …]`, over several lines, a trailing comma allowed.
    fn array(&mut self) -> Value {
        self.expect('[');
        let mut items = Vec::new();
        loop {
            self.skip_blank_lines();
            if self.peek() == Some(']') {
                self.bump();
                return Value::Array(items);
            }
            items.push(self.value());
            self.skip_blank_lines();
            match self.peek() {
                Some(',') => {
                    self.bump();
                }
                Some(']') => {}
                _ => self.fail("expected `,` or `]` in an array"),
            }
        }
    }

    /// A boolean, an integer (decimal or `0x…`, `_` between digits) or a float.
    fn scalar(&mut self) -> Value {
        let mut token = String::new();
        while let Some(c) = self.peek().filter(|c| c.is_ascii_alphanumeric() || "_+-.:".contains(*c)) {
            token.push(c);
            self.bump();
        }
        match token.as_str() {
            "true" => return Value::Bool(true),
            "false" => return Value::Bool(false),
            _ => {}
        }
        let bad = || -> ! {
            self.fail(format!(
                "`{token}` is not a value the subset reads (string, integer, float, boolean, array)"
            ))
        };
        let digits_ok = |s: &str, radix: u32| !s.is_empty() && s.split('_').all(|g| !g.is_empty() && g.chars().all(|c| c.is_digit(radix)));
        if let Some(hex) = token.strip_prefix("0x") {
            if !digits_ok(hex, 16) {
                bad();
            }
            return i64::from_str_radix(&hex.replace('_', ""), 16)
                .map(Value::Int)
                .unwrap_or_else(|_| bad());
        }
        let unsigned = token.strip_prefix(['+', '-']).unwrap_or(&token);
        if unsigned.contains(['.', 'e', 'E']) {
            // Digits on both sides of the point; an exponent of digits with an optional sign.
            let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
                Some(i) => (&unsigned[..i], Some(&unsigned[i + 1..])),
                None => (unsigned, None),
            };
            let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, "0"));
            let exponent_ok = exponent.is_none_or(|e| digits_ok(e.strip_prefix(['+', '-']).unwrap_or(e), 10));
            if !(digits_ok(whole, 10) && digits_ok(fraction, 10) && exponent_ok) || (whole.len() > 1 && whole.starts_with('0')) {
                bad();
            }
            return token.replace('_', "").parse().map(Value::Float).unwrap_or_else(|_| bad());
        }
        if !digits_ok(unsigned, 10) || (unsigned.len() > 1 && unsigned.starts_with('0')) {
            bad();
        }
        token.replace('_', "").parse().map(Value::Int).unwrap_or_else(|_| bad())
    }
}
