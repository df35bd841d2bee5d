//! Label placement for plots: greedy, in priority order. Each label has an anchor (a marker,
//! a point on a roof) and candidate offsets around it; the first candidate inside the plot
//! that overlaps neither a placed label nor an obstacle (markers) wins. When all collide the
//! candidates are nudged outwards in growing vertical and horizontal steps; when even that
//! fails, a label that may hide is dropped (and the caller lists it) — placed labels never
//! overlap, which is what the tests check.

/// An axis-aligned box in pixels, top-left origin.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rect {
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
}

impl Rect {
    pub fn new(x: f64, y: f64, w: f64, h: f64) -> Rect {
        Rect { x, y, w, h }
    }
    pub fn around(cx: f64, cy: f64, r: f64) -> Rect {
        Rect::new(cx - r, cy - r, 2.0 * r, 2.0 * r)
    }
    /// Interiors intersect (touching edges do not count).
    pub fn overlaps(&self, o: &Rect) -> bool {
        self.x < o.x + o.w && o.x < self.x + self.w && self.y < o.y + o.h && o.y < self.y + self.h
    }
    pub fn inside(&self, area: &Rect) -> bool {
        self.x >= area.x && self.y >= area.y && self.x + self.w <= area.x + area.w && self.y + self.h <= area.y + area.h
    }
    fn grown(&self, pad: f64) -> Rect {
        Rect::new(self.x - pad, self.y - pad, self.w + 2.0 * pad, self.h + 2.0 * pad)
    }
}

/// One label to place.
#[derive(Debug, Clone)]
pub struct Label {
    pub text: String,
    pub anchor: (f64, f64),
    /// Text box size in pixels.
    pub size: (f64, f64),
    /// Offsets of the box's top-left corner from the anchor, best first.
    pub candidates: Vec<(f64, f64)>,
}

impl Label {
    /// A label beside a marker of radius `r`: right, left, above, below, then the corners.
    pub fn for_marker(text: impl Into<String>, anchor: (f64, f64), size: (f64, f64), r: f64) -> Label {
        let (w, h) = size;
        let g = r + 3.0;
        Label {
            text: text.into(),
            anchor,
            size,
            candidates: vec![
                (g, -h / 2.0),
                (-w - g, -h / 2.0),
                (-w / 2.0, -h - g),
                (-w / 2.0, g),
                (g, -h - g / 2.0),
                (g, g / 2.0),
                (-w - g, -h - g / 2.0),
                (-w - g, g / 2.0),
            ],
        }
    }
}

/// Gap kept between labels.
const PAD: f64 = 1.5;

/// Place labels in order; `None` where a label could not be placed without overlap.
pub fn place(labels: &[Label], obstacles: &[Rect], area: Rect) -> Vec<Option<Rect>> {
    let mut placed: Vec<Rect> = Vec::new();
    let mut out = Vec::with_capacity(labels.len());
    for l in labels {
        let (w, h) = l.size;
        let at = |dx: f64, dy: f64| Rect::new(l.anchor.0 + dx, l.anchor.1 + dy, w, h);
        let free_of = |r: &Rect, obs: bool| {
            r.inside(&area) && !placed.iter().any(|p| p.grown(PAD).overlaps(r)) && (!obs || !obstacles.iter().any(|o| o.overlaps(r)))
        };
        let mut choice = None;
        // 1. the candidates as given, avoiding labels and markers
        // 2. nudged: each candidate shifted by growing steps, vertically first
        // 3. the same, allowing a marker to be covered (never another label)
        'search: for avoid_obstacles in [true, false] {
            for &(dx, dy) in &l.candidates {
                let r = at(dx, dy);
                if free_of(&r, avoid_obstacles) {
                    choice = Some(r);
                    break 'search;
                }
            }
            for k in 1..=24 {
                let step_y = k as f64 * (h / 2.0 + PAD);
                let step_x = k as f64 * (w / 4.0 + PAD);
                for &(dx, dy) in &l.candidates {
                    for (sx, sy) in [(0.0, -step_y), (0.0, step_y), (step_x, 0.0), (-step_x, 0.0)] {
                        let r = at(dx + sx, dy + sy);
                        if free_of(&r, avoid_obstacles) {
                            choice = Some(r);
                            break 'search;
                        }
                    }
                }
            }
        }
        if let Some(r) = choice {
            placed.push(r);
        }
        out.push(choice);
    }
    out
}

/// Do any two of these boxes overlap?
pub fn any_overlap(rects: &[Rect]) -> Option<(usize, usize)> {
    for i in 0..rects.len() {
        for j in i + 1..rects.len() {
            if rects[i].overlaps(&rects[j]) {
                return Some((i, j));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// xorshift64*: seeded, fresh seed per run from the clock (printed for reproduction).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> f64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    #[test]
    fn placed_labels_never_overlap_and_stay_inside() {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
            | 1;
        eprintln!("label placement seed {seed}");
        let mut rng = Rng(seed);
        let area = Rect::new(60.0, 20.0, 700.0, 500.0);
        for _round in 0..20 {
            // clustered anchors: the hard case (many points near one spot)
            let n = 5 + (rng.next() * 30.0) as usize;
            let cx = 100.0 + rng.next() * 500.0;
            let cy = 60.0 + rng.next() * 400.0;
            let labels: Vec<Label> = (0..n)
                .map(|i| {
                    let a = (cx + (rng.next() - 0.5) * 120.0, cy + (rng.next() - 0.5) * 80.0);
                    let w = 30.0 + rng.next() * 90.0;
                    Label::for_marker(format!("p{i}"), a, (w, 13.0), 4.0)
                })
                .collect();
            let obstacles: Vec<Rect> = labels.iter().map(|l| Rect::around(l.anchor.0, l.anchor.1, 4.0)).collect();
            let placed = place(&labels, &obstacles, area);
            let boxes: Vec<Rect> = placed.iter().flatten().copied().collect();
            assert_eq!(any_overlap(&boxes), None, "seed {seed}");
            assert!(boxes.iter().all(|b| b.inside(&area)), "seed {seed}");
            // with room around, nearly all labels find a place
            assert!(boxes.len() * 10 >= n * 9, "only {} of {n} placed (seed {seed})", boxes.len());
        }
    }

    #[test]
    fn colliding_pair_is_nudged_apart() {
        let area = Rect::new(0.0, 0.0, 400.0, 300.0);
        let l = |x| Label::for_marker("label", (x, 150.0), (50.0, 12.0), 3.0);
        let placed = place(&[l(100.0), l(101.0)], &[], area);
        let (a, b) = (placed[0].unwrap(), placed[1].unwrap());
        assert!(!a.overlaps(&b));
        // the first keeps its preferred spot, right of its marker
        assert_eq!(a, Rect::new(106.0, 144.0, 50.0, 12.0));
    }
}
