//! Text made safe for HTML, shared by the page's parts.

/// Escape text for HTML.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// An SVG written one element a line (plotters' output) made smaller for a page: attributes
/// at their default dropped (`opacity="1"`, `stroke-width="1"`, `stroke="none"`), and the
/// polylines, polygons and circles of one style within a run of such shapes joined into one
/// `<path>` (a dot is a few bytes of path instead of a hundred of markup). Within a run the
/// paths follow the order in which their styles first appear: a dot's marks of one colour stay
/// together, and a colour drawn over another stays over it where it first did. Other lines are
/// kept as they are, in their place.
pub fn compact_svg(svg: &str) -> String {
    let mut out = String::with_capacity(svg.len() / 2);
    // The run being joined: (style, path data) per style, in first appearance.
    let mut run: Vec<(String, String)> = Vec::new();
    let flush = |out: &mut String, run: &mut Vec<(String, String)>| {
        for (style, d) in run.drain(..) {
            out.push_str(&format!("<path{style} d=\"{d}\"/>\n"));
        }
    };
    for line in svg.lines() {
        let mut l = line.trim().to_string();
        for default in [" opacity=\"1\"", " stroke-width=\"1\""] {
            l = l.replace(default, "");
        }
        if !l.starts_with("<text") {
            l = l.replace(" stroke=\"none\"", "");
        }
        match shape_path(&l) {
            Some((style, d)) => match run.iter_mut().find(|(s, _)| *s == style) {
                Some((_, data)) => data.push_str(&d),
                None => run.push((style, d)),
            },
            None => {
                flush(&mut out, &mut run);
                out.push_str(&l);
                out.push('\n');
            }
        }
    }
    flush(&mut out, &mut run);
    out
}

/// A one-line `<polyline .../>`, `<polygon .../>` or `<circle .../>` as (its other
/// attributes, path data); None for anything else.
fn shape_path(l: &str) -> Option<(String, String)> {
    let (name, rest) = l.strip_prefix('<')?.split_once(' ')?;
    let body = rest.strip_suffix("/>")?;
    let mut style = String::new();
    let mut geo: Vec<(&str, &str)> = Vec::new();
    let mut s = body.trim();
    while !s.is_empty() {
        let (key, after) = s.split_once("=\"")?;
        let (value, next) = after.split_once('"')?;
        let key = key.trim();
        match key {
            "points" | "cx" | "cy" | "r" => geo.push((key, value)),
            _ => style.push_str(&format!(" {key}=\"{value}\"")),
        }
        s = next.trim_start();
    }
    let get = |k: &str| geo.iter().find(|(g, _)| *g == k).map(|(_, v)| *v);
    let d = match name {
        "polyline" | "polygon" => {
            let pts = get("points")?.trim();
            if pts.is_empty() || style.contains("fill=\"none\"") != (name == "polyline") {
                return None;
            }
            format!("M{pts}{}", if name == "polygon" { "Z" } else { "" })
        }
        "circle" => {
            let n = |k: &str| get(k).and_then(|v| v.parse::<f64>().ok());
            let (cx, cy, r) = (n("cx")?, n("cy")?, n("r")?);
            // Two half arcs from the left edge round to it again.
            format!("M{},{}a{r},{r} 0 1,0 {},0a{r},{r} 0 1,0 {},0", cx - r, cy, 2.0 * r, -2.0 * r)
        }
        _ => return None,
    };
    Some((style, d))
}
