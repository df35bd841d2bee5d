//! A small CSV record reader for Nsight Compute output, which mixes CSV records (always
//! fully quoted) with the profiled program's own output, `==PROF==`/`==WARNING==` lines
//! and blank lines, and whose rule descriptions may span several lines inside quotes.

/// One CSV record and the 1-based line it starts on.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub line: usize,
    pub fields: Vec<String>,
}

/// Split `text` into CSV records, skipping lines that are not CSV (not starting with `"`).
/// Returns the records and the skipped non-empty lines (program output, ncu messages).
pub fn records(text: &str) -> (Vec<Record>, Vec<String>) {
    let mut out = Vec::new();
    let mut noise = Vec::new();
    let lines: Vec<&str> = text.split('\n').collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim_end_matches('\r');
        if !line.starts_with('"') {
            if !line.trim().is_empty() {
                noise.push(line.to_string());
            }
            i += 1;
            continue;
        }
        let start = i;
        // Gather continuation lines while a quote is open.
        let mut buf = line.to_string();
        while open_quote(&buf) && i + 1 < lines.len() {
            i += 1;
            buf.push('\n');
            buf.push_str(lines[i].trim_end_matches('\r'));
        }
        out.push(Record {
            line: start + 1,
            fields: split_fields(&buf),
        });
        i += 1;
    }
    (out, noise)
}

fn open_quote(s: &str) -> bool {
    s.chars().filter(|&c| c == '"').count() % 2 == 1
}

/// Split one record: fields separated by commas, optionally quoted, `""` an escaped quote.
pub fn split_fields(s: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut cur = String::new();
    let mut in_q = false;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, in_q) {
            ('"', true) => {
                if chars.peek() == Some(&'"') {
                    cur.push('"');
                    chars.next();
                } else {
                    in_q = false;
                }
            }
            ('"', false) => in_q = true,
            (',', false) => fields.push(std::mem::take(&mut cur)),
            (c, _) => cur.push(c),
        }
    }
    fields.push(cur);
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_fields_commas_and_escapes() {
        assert_eq!(
            split_fields(r#""a","1,234","x ""y""",plain"#),
            vec!["a", "1,234", "x \"y\"", "plain"]
        );
        assert_eq!(split_fields(""), vec![""]);
    }

    #[test]
    fn records_skip_noise_and_join_multiline_quotes() {
        let text = "==PROF== Connected\nprogram says hi\n\"h1\",\"h2\"\n\"a\",\"multi\nline\"\n\n\"b\",\"c\"\n";
        let (recs, noise) = records(text);
        assert_eq!(noise, vec!["==PROF== Connected", "program says hi"]);
        assert_eq!(recs.len(), 3);
        assert_eq!(recs[1].fields, vec!["a", "multi\nline"]);
        assert_eq!(recs[1].line, 4);
        assert_eq!(recs[2].line, 7);
    }

    #[test]
    fn unterminated_quote_does_not_loop_or_panic() {
        let (recs, _) = records("\"a\",\"never closed\nmore\n");
        assert_eq!(recs.len(), 1);
    }
}
