//! Shell-style globs on point names and metric paths: `*` any run, `?` one character.

/// Whether `text` matches `pattern` (whole string; `*` and `?` only, no escapes).
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // Iterative matcher with one backtrack point: linear in practice, never exponential.
    let (mut pi, mut ti) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || (p[pi] != '*' && p[pi] == t[ti])) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn globs() {
        assert!(glob_match("*", ""));
        assert!(glob_match("*", "triad"));
        assert!(glob_match("tri*", "triad"));
        assert!(glob_match("*ad", "triad"));
        assert!(glob_match("t?i*d", "triad"));
        assert!(glob_match("a*b*c", "axxbyyc"));
        assert!(glob_match("a*b*c", "abcbc"));
        assert!(!glob_match("a*b*c", "abcb"));
        assert!(!glob_match("tri", "triad"));
        assert!(!glob_match("?", ""));
        assert!(glob_match("bytes.*", "bytes.dram"));
        assert!(!glob_match("bytes.*", "ai.dram"));
        assert!(glob_match("**a**", "bab"));
    }
}
